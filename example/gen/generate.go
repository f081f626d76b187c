// Package gen holds the example's generated code: oapi-codegen's models and
// strict server, and the idempotency layer over them.
package gen

//go:generate go tool idemgen -config ../idemgen.yaml
