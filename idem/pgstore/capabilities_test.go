package pgstore_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/pgstore"
)

// embeddingWrapper wraps a store by embedding the Store interface, as a
// metrics wrapper might: only Store's methods reach the store.
type embeddingWrapper struct {
	idem.Store[pgx.Tx]
	lookups atomic.Int64
}

func (w *embeddingWrapper) Lookup(ctx context.Context, id idem.ID) (idem.Record, error) {
	w.lookups.Add(1)
	return w.Store.Lookup(ctx, id)
}

// forwardingWrapper embeds the store's own type, so every method is
// forwarded; it counts the lookups that claim.
type forwardingWrapper struct {
	*pgstore.Store
	lookupClaims atomic.Int64
}

func (w *forwardingWrapper) LookupClaim(ctx context.Context, id idem.ID, c idem.Claim) (idem.Record, idem.Txn[pgx.Tx], error) {
	w.lookupClaims.Add(1)
	return w.Store.LookupClaim(ctx, id, c)
}

// reportingWrapper is embeddingWrapper reporting only what it forwards.
type reportingWrapper struct{ embeddingWrapper }

func (w *reportingWrapper) Capabilities() idem.Capabilities { return idem.Capabilities{} }

// A wrapper around the store keeps the store's capabilities or says it
// does not: one that would lose them without a word (embedding the Store
// interface, which forwards Capabilities but not the methods it names)
// is refused at start, naming each; one that forwards them gets them
// used; one that reports only what it forwards runs on Store's methods.
func TestWrappedStoreKeepsCapabilities(t *testing.T) {
	pool := newPool(t, nil)
	quiet := idem.Options{Logger: slog.New(slog.DiscardHandler)}
	op := &idem.Operation{Name: "createOrder", TTL: time.Hour, Lease: time.Minute}
	serve := func(e *idem.Engine[pgx.Tx], key string) string {
		t.Helper()
		resp, err := e.Serve(keyed(key), op, []byte("a"), func(context.Context, *idem.Attempt[pgx.Tx]) (idem.Writer, error) {
			return created("{}"), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return answerOf(t, resp)
	}

	refused := func() (msg string) {
		defer func() { msg = fmt.Sprint(recover()) }()
		idem.NewEngine[pgx.Tx](&embeddingWrapper{Store: pgstore.New(pool, pgstore.Options{})}, quiet)
		return ""
	}()
	for _, want := range []string{"LookupClaim", "ClassifyError", "FindAbandoned", "Accept", "forward", "override Capabilities"} {
		if !strings.Contains(refused, want) {
			t.Errorf("NewEngine on a wrapper that loses the store's capabilities: %q, want a refusal naming %q", refused, want)
		}
	}
	if strings.Contains(refused, "FilteredReplay") {
		t.Errorf("the refusal names the replay filter, which a store without a cache does not report: %q", refused)
	}

	fw := &forwardingWrapper{Store: pgstore.New(pool, pgstore.Options{})}
	if got := serve(idem.NewEngine[pgx.Tx](fw, quiet), "k1"); got != "201 " || fw.lookupClaims.Load() != 1 {
		t.Errorf("a forwarding wrapper: %s with %d lookup claims, want 201 claimed in its lookup", got, fw.lookupClaims.Load())
	}

	rw := &reportingWrapper{embeddingWrapper{Store: pgstore.New(pool, pgstore.Options{})}}
	e := idem.NewEngine[pgx.Tx](rw, quiet)
	if got := serve(e, "k2"); got != "201 " || rw.lookups.Load() != 1 {
		t.Errorf("a wrapper reporting no capability: %s with %d lookups, want 201 through Lookup", got, rw.lookups.Load())
	}
	if err := idem.NewCompleter(e, nil, idem.CompleterOptions{}).Run(t.Context()); err != idem.ErrNoFinder {
		t.Errorf("the completer on a wrapper without FindAbandoned: %v, want ErrNoFinder", err)
	}
}
