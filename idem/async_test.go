package idem_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/memstore"
)

// A store that cannot accept async requests (the in-memory one) answers
// them 500 store-misconfigured, naming the store that can, and never
// enqueues; an async operation whose key is optional is refused.
func TestAsyncNeedsAnAccepter(t *testing.T) {
	e := idem.NewEngine[memstore.NoTx](memstore.New(memstore.Options{}), idem.Options{Logger: slog.New(slog.DiscardHandler)})
	op := &idem.Operation{Name: "createExport", TTL: time.Hour, Lease: time.Minute, Async: true, StatusPath: "/exports/{key}"}
	r := httptest.NewRequest("POST", "/exports", nil)
	r.Header.Set(idem.HeaderKey, "k1")
	enqueued := 0
	resp, err := e.ServeAsync(idem.WithRequest(context.Background(), r), op, []byte("fp"), struct{}{},
		func(context.Context, memstore.NoTx, idem.Accepted) error { enqueued++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != http.StatusInternalServerError || !strings.Contains(string(resp.Body), "store-misconfigured") || enqueued != 0 {
		t.Errorf("async request on the in-memory store: %d %s (enqueued %d), want a 500 store-misconfigured and nothing enqueued", resp.Status, resp.Body, enqueued)
	}
	optional := *op
	optional.KeyOptional = true
	if err := optional.Validate(); !errors.Is(err, idem.ErrInvalidOperation) || !strings.Contains(err.Error(), "KeyOptional") {
		t.Errorf("Validate of an async operation with an optional key: %v", err)
	}
}

// A key goes into its status resource's path escaped, as one segment.
func TestStatusLocationEscapesKey(t *testing.T) {
	op := &idem.Operation{Name: "createExport", Path: "/accounts/{id}/exports", StatusPath: "/exports/requests/{key}"}
	for key, want := range map[string]string{
		"a b/c": "/exports/requests/a%20b%2Fc",
		// Routers and clients read these segments as the path's own
		// or its parent's: their dots are escaped.
		".":   "/exports/requests/%2E",
		"..":  "/exports/requests/%2E%2E",
		"...": "/exports/requests/...",
		"a.b": "/exports/requests/a.b",
	} {
		if got := op.StatusLocation(key); got != want {
			t.Errorf("StatusLocation(%q) = %q, want %q", key, got, want)
		}
	}
}
