package gen

//go:generate go tool idemgen -config ../idemgen.yaml
