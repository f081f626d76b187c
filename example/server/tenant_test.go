package server_test

// Tenant isolation in the configurations teams use beside the example's
// own: no scope at all, a scope from the spec's header, a scope from what
// an auth middleware put in the context, and scopes a client gets wrong.

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemgen/idemgen/example/gen"
	"github.com/idemgen/idemgen/example/orders"
	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/pgstore"
	"github.com/idemgen/idemgen/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// newEnvWith serves the example on a fresh database with the given
// handler options instead of the example server's own: without its
// account check (auth_test.go tests that), so that each test shows what
// the generated handler does with those options alone. The tokens env's
// requests carry go unread.
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
	srv := httptest.NewServer(gen.NewIdempotentHandler(e.svc, pgstore.New(pool, pgstore.Options{}), opts))
	t.Cleanup(srv.Close)
	e.url = srv.URL
	return e
}

// The example's spec scopes keys by X-Account-Id (scope: {header:
// X-Account-Id} in x-idempotency), so with the zero-value options, no Go
// at all, account B reusing account A's key and body gets its own order,
// never A's; each retry replays its own. A request without the header is
// a 400 naming it.
func TestScopeFromSpec(t *testing.T) {
	e := newEnvWith(t, gen.IdempotentHandlerOptions{})
	a := e.post("acct_A", order, "k1")
	b := e.post("acct_B", order, "k1")
	for name, r := range map[string]reply{"A": a, "B": b} {
		if r.status != 201 || r.header.Get(idem.HeaderReplayed) != "" {
			t.Fatalf("account %s: %d %v %s, want a fresh 201", name, r.status, r.header, r.body)
		}
	}
	if string(a.body) == string(b.body) {
		t.Fatalf("account B received account A's order: %s", b.body)
	}
	for name, first := range map[string]reply{"acct_A": a, "acct_B": b} {
		if r := e.post(name, order, "k1"); r.status != 201 || r.header.Get(idem.HeaderReplayed) != "true" || string(r.body) != string(first.body) {
			t.Fatalf("%s's retry: %d %s, want its own order replayed", name, r.status, r.body)
		}
	}
	r := e.post("", order, "k1")
	if r.status != 400 || !strings.Contains(r.problem(t).Detail, "X-Account-Id") {
		t.Fatalf("no X-Account-Id: %d %s, want a 400 naming the header", r.status, r.body)
	}
	e.expect(2, 2, 2)
}

type principalKey struct{}

// authenticate is an auth middleware in the strict server's style: it
// stores the caller's principal in the context, where a scope function
// finds it.
func authenticate(f gen.StrictHandlerFunc, _ string) gen.StrictHandlerFunc {
	return func(ctx context.Context, w http.ResponseWriter, r *http.Request, request any) (any, error) {
		principal, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok {
			return nil, &idem.Problem{Type: "https://example.com/unauthenticated", Title: "Unauthenticated", Status: 401, Detail: "Send a bearer token."}
		}
		return f(context.WithValue(ctx, principalKey{}, principal), w, r, request)
	}
}

func principalScope(ctx context.Context, _ *http.Request) (string, error) {
	if p, ok := ctx.Value(principalKey{}).(string); ok {
		return p, nil
	}
	return "", errors.New("no principal in the context")
}

// Two principals of one account send the same key and body: each request
// runs once for its principal, and each retry replays its own answer.
func TestScopeSeesMiddlewareContext(t *testing.T) {
	e := newEnvWith(t, gen.IdempotentHandlerOptions{
		Options:           idem.Options{Scope: principalScope},
		StrictMiddlewares: []gen.StrictMiddlewareFunc{authenticate},
	})
	post := func(principal string) reply {
		t.Helper()
		req, err := http.NewRequest("POST", e.url+"/orders", strings.NewReader(order))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Account-Id", "acct_1")
		req.Header.Set("Authorization", "Bearer "+principal)
		req.Header.Set(idem.HeaderKey, "k1")
		return e.do(req)
	}
	alice, bob := post("alice"), post("bob")
	for name, r := range map[string]reply{"alice": alice, "bob": bob} {
		if r.status != 201 || r.header.Get(idem.HeaderReplayed) != "" {
			t.Fatalf("%s's first request: %d %v %s, want a fresh 201", name, r.status, r.header, r.body)
		}
	}
	if string(alice.body) == string(bob.body) {
		t.Fatalf("bob received alice's order: %s", bob.body)
	}
	for name, first := range map[string]reply{"alice": alice, "bob": bob} {
		r := post(name)
		if r.status != 201 || r.header.Get(idem.HeaderReplayed) != "true" || string(r.body) != string(first.body) {
			t.Fatalf("%s's retry: %d %v %s, want a replay of %s", name, r.status, r.header, r.body, first.body)
		}
	}
	e.expect(2, 2, 2)
}

// countingStore counts the key store's lookups and claims.
type countingStore struct {
	idem.Store[pgx.Tx]
	calls atomic.Int64
}

func (s *countingStore) Lookup(ctx context.Context, id idem.ID) (idem.Record, error) {
	s.calls.Add(1)
	return s.Store.Lookup(ctx, id)
}

// Capabilities reports none: the wrapper forwards only Store's methods,
// so that every lookup goes through Lookup, where it is counted.
func (s *countingStore) Capabilities() idem.Capabilities { return idem.Capabilities{} }

// A scope the key table cannot hold is the client's mistake: a 400
// invalid-scope problem, answered before any store round trip, never a
// 503 that clients would retry forever.
func TestInvalidScopeIs400(t *testing.T) {
	pool := pgtest.NewPool(t)
	if err := orders.Migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	store := &countingStore{Store: pgstore.New(pool, pgstore.Options{})}
	svc := &service{Service: &orders.Service{Pool: pool}}
	srv := httptest.NewServer(gen.NewIdempotentHandler[pgx.Tx](svc, store, gen.IdempotentHandlerOptions{
		Options: idem.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
	}))
	t.Cleanup(srv.Close)
	e := &env{t: t, pool: pool, svc: svc, url: srv.URL}
	for name, account := range map[string]string{
		"invalid UTF-8": "acct\xff",
		"too long":      strings.Repeat("a", 3000),
	} {
		r := e.post(account, order, "k1")
		if r.status != 400 || r.problem(t).Type != idem.TypeInvalidScope || r.header.Get("Retry-After") != "" {
			t.Errorf("%s: %d %v %s, want a 400 invalid-scope problem", name, r.status, r.header, r.body)
		}
	}
	if n := store.calls.Load(); n != 0 {
		t.Errorf("the store was asked %d times", n)
	}
	e.expect(0, 0, 0)
}

// TestMiddlewareRefusal: a strict middleware refuses a request by
// returning an *idem.Problem (authenticate, without a bearer token). The
// client gets that problem, with its status, in the API's error shape;
// nothing is stored or claimed, so the same key with a token runs at
// once; and nothing is logged as an error, since the server did not
// fail.
func TestMiddlewareRefusal(t *testing.T) {
	var logs bytes.Buffer
	e := newEnvWith(t, gen.IdempotentHandlerOptions{
		Options:           idem.Options{Scope: principalScope, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelError}))},
		StrictMiddlewares: []gen.StrictMiddlewareFunc{authenticate},
	})
	post := func(auth string) reply {
		t.Helper()
		req, err := http.NewRequest("POST", e.url+"/orders", strings.NewReader(order))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Account-Id", "acct_1")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		req.Header.Set(idem.HeaderKey, "k1")
		return e.do(req)
	}
	r := post("")
	if r.status != 401 || r.header.Get("Content-Type") != idem.ContentTypeProblem || r.problem(t).Type != "https://example.com/unauthenticated" {
		t.Fatalf("without a token: %d %v %s, want the middleware's 401 problem", r.status, r.header, r.body)
	}
	e.expect(0, 0, 0)
	if r := post("Bearer alice"); r.status != 201 || r.header.Get(idem.HeaderReplayed) != "" {
		t.Fatalf("the same key with a token: %d %s, want a first execution", r.status, r.body)
	}
	e.expect(1, 1, 1)
	if logs.Len() > 0 {
		t.Errorf("a refusal was logged as an error:\n%s", logs.String())
	}
}
