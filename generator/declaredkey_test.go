package generator_test

import "testing"

// TestDeclaredIdempotencyKeyParam runs the generated handler of a spec
// that declares its own Idempotency-Key parameter, optional, 8 to 64
// characters, lower-case: the layer makes the key optional, enforces the
// limits with 400s that state them, and does not count the key in the
// fingerprint.
func TestDeclaredIdempotencyKeyParam(t *testing.T) {
	t.Parallel()
	runGenerated(t, "declaredkey", declaredKeyTest)
}

const declaredKeyTest = `package declaredkey

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/memstore"
)

type service struct{ runs int }

func (s *service) CreateTransfer(ctx context.Context, at *idem.Attempt[memstore.NoTx], request CreateTransferRequestObject) (CreateTransferResponseObject, error) {
	s.runs++
	return CreateTransfer201JSONResponse{Id: fmt.Sprintf("tr_%d", s.runs)}, nil
}

func TestDeclaredKey(t *testing.T) {
	svc := &service{}
	srv := httptest.NewServer(NewIdempotentHandler(svc, memstore.New(memstore.Options{}), IdempotentHandlerOptions{Options: idem.Options{Logger: slog.New(slog.DiscardHandler)}}))
	defer srv.Close()
	send := func(key string) (int, string, string) {
		t.Helper()
		req, err := http.NewRequest("POST", srv.URL+"/transfers", strings.NewReader(` + "`" + `{"amount_cents": 5}` + "`" + `))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var p idem.Problem
		_ = json.Unmarshal(body, &p)
		return resp.StatusCode, resp.Header.Get(idem.HeaderReplayed), p.Detail
	}
	for _, tc := range []struct{ key, says string }{
		{strings.Repeat("a", 65), "limit is 64"},
		{"short", "at least 8"},
		{"Upper-Case-Key", "pattern ^[a-z0-9-]+$"},
	} {
		status, _, detail := send(tc.key)
		if status != 400 || !strings.Contains(detail, tc.says) || !strings.Contains(detail, "8 to 64 printable ASCII characters matching ^[a-z0-9-]+$") {
			t.Errorf("key %q: %d %q, want a 400 that says %q and states the rule", tc.key, status, detail, tc.says)
		}
	}
	if svc.runs != 0 {
		t.Fatalf("invalid keys ran the handler %d times", svc.runs)
	}
	// The spec makes the key optional: without one, every request runs.
	for range 2 {
		if status, replayed, _ := send(""); status != 201 || replayed != "" {
			t.Fatalf("no key: %d replayed=%q, want a fresh 201", status, replayed)
		}
	}
	key := "transfer-0001"
	if status, _, _ := send(key); status != 201 {
		t.Fatalf("first with a key: %d", status)
	}
	if status, replayed, _ := send(key); status != 201 || replayed != "true" {
		t.Fatalf("retry: %d replayed=%q, want a replay", status, replayed)
	}
	if svc.runs != 3 {
		t.Fatalf("the handler ran %d times, want 3", svc.runs)
	}
}
`
