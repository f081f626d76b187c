package server_test

// Tenant isolation in the configurations teams use beside the example's
// own: no scope at all, a scope from the spec's header, a scope from what
// an auth middleware put in the context, and scopes a client gets wrong.

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/idemgen/idemgen/example/gen"
	"github.com/idemgen/idemgen/example/orders"
	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/pgstore"
	"github.com/idemgen/idemgen/internal/pgtest"
)

// newEnvWith serves the example on a fresh database with the given
// handler options instead of the example server's own.
func newEnvWith(t *testing.T, opts gen.IdempotentHandlerOptions) *env {
	t.Helper()
	pool := pgtest.NewPool(t)
	if err := orders.Migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, pool: pool}
	e.svc = &service{Service: &orders.Service{Pool: pool}}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	srv := httptest.NewServer(gen.NewIdempotentHandler(e.svc, pgstore.New(pool), opts))
	t.Cleanup(srv.Close)
	e.url = srv.URL
	return e
}

// With the zero-value options every request shares one scope, but the
// X-Account-Id header the spec declares still counts in the fingerprint:
// account B reusing account A's key gets a 422, never A's order.
func TestHeaderParamsInFingerprint(t *testing.T) {
	e := newEnvWith(t, gen.IdempotentHandlerOptions{})
	if r := e.post("acct_A", order, "k1"); r.status != 201 {
		t.Fatalf("first request: %d %s", r.status, r.body)
	}
	r := e.post("acct_B", order, "k1")
	if r.status != 422 || r.problem(t).Type != idem.TypeKeyReused {
		t.Fatalf("same key and body from another account: %d %s %v, want 422", r.status, r.body, r.header)
	}
	if r := e.post("acct_A", order, "k1"); r.status != 201 || r.header.Get(idem.HeaderReplayed) != "true" {
		t.Fatalf("retry from the first account: %d %s, want a replayed 201", r.status, r.body)
	}
	e.expect(1, 1, 1)
}
