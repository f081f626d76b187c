package server_test

import (
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// The spec says what Authenticate does, so that a client generated from it
// (or from the augmented spec) knows the token and the two refusals:
// every operation needs the bearer scheme and declares 401 and 403, but
// the payment provider's webhook, which needs none and declares the 401 of
// a bad signature.
func TestSpecDeclaresAuth(t *testing.T) {
	for _, path := range []string{"../openapi.yaml", "../gen/openapi.yaml"} {
		doc, err := openapi3.NewLoader().LoadFromFile(path)
		if err != nil {
			t.Fatal(err)
		}
		scheme := doc.Components.SecuritySchemes["bearerAuth"]
		if scheme == nil || scheme.Value.Type != "http" || scheme.Value.Scheme != "bearer" {
			t.Fatalf("%s: no http bearer scheme bearerAuth in components", path)
		}
		operations := 0
		for route, item := range doc.Paths.Map() {
			for method, op := range item.Operations() {
				operations++
				if op.OperationID == "receivePaymentEvent" {
					if op.Security == nil || len(*op.Security) != 0 || op.Responses.Status(401) == nil {
						t.Errorf("%s: the webhook %s %s must need no bearer token and declare 401", path, method, route)
					}
					continue
				}
				security := doc.Security
				if op.Security != nil {
					security = *op.Security
				}
				if len(security) != 1 || security[0]["bearerAuth"] == nil {
					t.Errorf("%s: %s %s does not require bearerAuth alone: %v", path, method, route, security)
				}
				for _, status := range []int{401, 403} {
					if op.Responses.Status(status) == nil {
						t.Errorf("%s: %s %s does not declare %d", path, method, route, status)
					}
				}
			}
		}
		// The augmented spec adds createExport's status resource.
		if want := map[string]int{"../openapi.yaml": 8, "../gen/openapi.yaml": 9}[path]; operations != want {
			t.Errorf("%s: %d operations, want the example's %d", path, operations, want)
		}
	}
}
