package pgstore_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/pgstore"
)

// With a pool of one connection, which the first attempt holds, a
// duplicate is answered at once as with any pool: 409 for the same
// request, 422 for another under a phased key, never 503 store-busy
// after waiting for the connection. The acquire timeout is an hour, so a
// duplicate that waited for the connection would hold this test until
// its deadline.
func TestOneConnectionPoolDuplicate(t *testing.T) {
	pool := newConfiguredPool(t, func(cfg *pgxpool.Config) { cfg.MaxConns = 1 })
	e := idem.NewEngine(pgstore.New(pool, pgstore.Options{AcquireTimeout: time.Hour}), idem.Options{Logger: slog.New(slog.DiscardHandler)})
	atomicOp := &idem.Operation{Name: "createOrder", TTL: time.Hour, Lease: time.Minute}
	phasedOp := &idem.Operation{Name: "createPayment", TTL: time.Hour, Lease: time.Minute, RecoveryPoints: []string{"charged"}}

	type served struct {
		resp *idem.Response
		err  error
	}
	// hold runs serve in the background until its handler is running,
	// and returns what finishes it and its answer.
	hold := func(serve func(inside func()) (*idem.Response, error)) (finish func() *idem.Response) {
		running, release := make(chan struct{}), make(chan struct{})
		done := make(chan served, 1)
		go func() {
			resp, err := serve(func() { close(running); <-release })
			done <- served{resp, err}
		}()
		<-running
		return func() *idem.Response {
			close(release)
			s := <-done
			if s.err != nil {
				t.Fatal(s.err)
			}
			return s.resp
		}
	}
	answer := func(resp *idem.Response, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return answerOf(t, resp)
	}

	// An atomic attempt holds the connection: its duplicate is a 409.
	order := func(inside func()) (*idem.Response, error) {
		return e.Serve(keyed("k1"), atomicOp, []byte("a"), func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (idem.Writer, error) {
			if _, err := at.Tx().Exec(ctx, `SELECT 1`); err != nil {
				return nil, err
			}
			if inside != nil {
				inside()
			}
			return created(`{"order":1}`), nil
		})
	}
	finish := hold(order)
	for _, fp := range []string{"a", "b"} {
		resp, err := e.Serve(keyed("k1"), atomicOp, []byte(fp), func(context.Context, *idem.Attempt[pgx.Tx]) (idem.Writer, error) {
			t.Error("a duplicate ran")
			return created("{}"), nil
		})
		if got := answer(resp, err); got != "409 idempotency-key-in-use" || resp.Header.Get("Retry-After") == "" {
			t.Errorf("duplicate (fingerprint %s) while the attempt holds the only connection: %s, want 409 with Retry-After", fp, got)
		}
	}
	if resp := finish(); resp.Status != 201 {
		t.Fatalf("the first attempt: %d", resp.Status)
	}
	if got := answer(order(nil)); got != "201 " {
		t.Errorf("after the attempt: %s, want its replay", got)
	}

	// A phase holds the connection: the same request is a 409, another
	// one a 422, as the key's row would say.
	payment := func(fp string, inside func()) (*idem.Response, error) {
		return e.ServePhased(keyed("p1"), phasedOp, []byte(fp), func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (string, idem.Writer, error) {
			if at.RecoveryPoint() == "" {
				if inside != nil {
					inside()
				}
				return "charged", nil, nil
			}
			return "", created(`{"payment":1}`), nil
		})
	}
	finish = hold(func(inside func()) (*idem.Response, error) { return payment("a", inside) })
	if got := answer(payment("a", nil)); got != "409 idempotency-key-in-use" {
		t.Errorf("same payment during its phase: %s, want 409", got)
	}
	if got := answer(payment("b", nil)); got != "422 idempotency-key-reused" {
		t.Errorf("another payment under its key during its phase: %s, want 422", got)
	}
	if resp := finish(); resp.Status != 201 {
		t.Fatalf("the payment: %d", resp.Status)
	}
	// Once the attempts are over, the database answers again.
	if got := answer(payment("a", nil)); got != "201 " {
		t.Errorf("the payment's replay: %s", got)
	}
}
