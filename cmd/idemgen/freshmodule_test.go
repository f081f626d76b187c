package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// freshSpec is a spec written from scratch, as a team adopting idemgen
// for a webhook receiver and a body-keyed operation would write it.
const freshSpec = `openapi: 3.0.3
info: {title: Deliveries, version: "1"}
paths:
  /webhooks/carrier:
    post:
      operationId: receiveShipmentEvent
      x-idempotent:
        key: {header: webhook-id}
      parameters:
        - {name: webhook-id, in: header, required: true, schema: {type: string}, example: msg_1}
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              required: [type, shipment]
              properties:
                type: {type: string}
                shipment: {type: string}
            example: {type: shipment.delivered, shipment: shp_1}
      responses:
        "200":
          description: Received.
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Receipt"}
  /shipments:
    post:
      operationId: createShipment
      x-idempotent:
        key: {body: /reference}
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              required: [reference, parcels]
              properties:
                reference: {type: string, maxLength: 64}
                parcels: {type: integer, minimum: 1}
            example: {reference: ref-1, parcels: 2}
      responses:
        "201":
          description: Created.
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Receipt"}
components:
  schemas:
    Receipt:
      type: object
      required: [id]
      properties:
        id: {type: string}
`

// freshService implements the generated interface on the in-memory store.
const freshService = `package api

import (
	"context"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/memstore"
)

type Service struct{}

func (Service) ReceiveShipmentEvent(_ context.Context, at *idem.Attempt[memstore.NoTx], req ReceiveShipmentEventRequestObject) (ReceiveShipmentEventResponseObject, error) {
	return ReceiveShipmentEvent200JSONResponse{Id: at.DerivedKey("event")}, nil
}

func (Service) CreateShipment(_ context.Context, at *idem.Attempt[memstore.NoTx], req CreateShipmentRequestObject) (CreateShipmentResponseObject, error) {
	return CreateShipment201JSONResponse{Id: at.DerivedKey("shipment")}, nil
}
`

// freshConformance runs the generated conformance checks, built from the
// spec's examples, on the service.
const freshConformance = `package api_test

import (
	"testing"

	"example.com/deliveries/api"
	"example.com/deliveries/api/apitest"
	"github.com/idemgen/idemgen/idem/memstore"
)

func TestConformance(t *testing.T) {
	apitest.Check(t, api.Service{}, memstore.New(memstore.Options{}), api.IdempotentHandlerOptions{}, apitest.Requests{})
}
`

// TestFreshModulePlacements writes a spec with a webhook receiver keyed
// by its webhook-id header and an operation keyed by a body member into
// a new module outside this repository, generates it with the tool as a
// team would (tests: true), and runs the generated conformance checks on
// a service of that module: every placement generates, builds and keeps
// the protocol there, not only in this repository's tests.
func TestFreshModulePlacements(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module with the go command")
	}
	t.Parallel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed: %v", err)
	}
	root, err := filepath.Abs(moduleRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	if err := os.Symlink(root, filepath.Join(work, "idemgen")); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(work, "deliveries")
	env := append(os.Environ(), "GOWORK=off", "GOFLAGS=", "GOPROXY="+proxiesThenOff(t, goTool))
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(goTool, args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	write(t, filepath.Join(dir, "openapi.yaml"), freshSpec)
	write(t, filepath.Join(dir, "idemgen.yaml"), "spec: openapi.yaml\noutput:\n  dir: api\n  package: api\ntests: true\n")
	write(t, filepath.Join(dir, "api", "generate.go"), "package api\n\n//go:generate go tool idemgen -config ../idemgen.yaml\n")
	write(t, filepath.Join(dir, "api", "service.go"), freshService)
	write(t, filepath.Join(dir, "api", "conformance_test.go"), freshConformance)
	run("mod", "init", "example.com/deliveries")
	run("mod", "edit", "-require", "github.com/idemgen/idemgen@v0.0.0-00010101000000-000000000000", "-replace", "github.com/idemgen/idemgen=../idemgen")
	run("get", "-tool", "github.com/idemgen/idemgen/cmd/idemgen")
	run("generate", "./...")
	run("mod", "tidy")
	out := run("test", "-count=1", "-v", "./...")
	for _, want := range []string{"--- PASS: TestConformance/receiveShipmentEvent", "--- PASS: TestConformance/createShipment"} {
		if !strings.Contains(out, want) {
			t.Errorf("the generated checks did not pass %q:\n%s", want, out)
		}
	}
}
