package server_test

// createPayment is phased: these tests drive it over HTTP against a real
// PostgreSQL and an in-process fake payment provider, and count charges
// at the provider.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/idemgen/idemgen/example/gen"
	"github.com/idemgen/idemgen/example/orders"
	"github.com/idemgen/idemgen/example/psp"
	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/pgstore"
)

// newOrder creates an order in acct_1 and returns its ID.
func (e *env) newOrder() string {
	e.t.Helper()
	r := e.post("acct_1", order, "order-"+e.t.Name())
	if r.status != 201 {
		e.t.Fatalf("create order: %d %s", r.status, r.body)
	}
	var o gen.Order
	if err := json.Unmarshal(r.body, &o); err != nil {
		e.t.Fatal(err)
	}
	return o.Id
}

func (e *env) pay(key, orderID string, amount int) reply {
	e.t.Helper()
	r, err := e.sendPayment(key, orderID, amount)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

func (e *env) sendPayment(key, orderID string, amount int) (reply, error) {
	body := fmt.Sprintf(`{"order_id": %q, "amount_cents": %d}`, orderID, amount)
	req, err := http.NewRequest("POST", e.url+"/payments", strings.NewReader(body))
	if err != nil {
		return reply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	authorize(req, "acct_1")
	req.Header.Set("Idempotency-Key", key)
	return e.roundTrip(req)
}

func (e *env) payments(status string) int {
	return e.count(`SELECT count(*) FROM payments WHERE status = $1`, status)
}

func (e *env) expectPSP(want psp.Stats) {
	e.t.Helper()
	if got := e.psp.Stats(); got != want {
		e.t.Errorf("payment provider: %+v, want %+v", got, want)
	}
}

func TestPaymentChargesOnceAndReplays(t *testing.T) {
	e := newEnv(t, nil)
	orderID := e.newOrder()
	first := e.pay("p1", orderID, 1250)
	if first.status != 201 || first.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("first: %d %s", first.status, first.body)
	}
	var p gen.Payment
	if err := json.Unmarshal(first.body, &p); err != nil {
		t.Fatal(err)
	}
	if p.OrderId != orderID || p.AmountCents != 1250 || p.Status != psp.StatusSucceeded || !strings.HasPrefix(p.ChargeId, "ch_") {
		t.Fatalf("payment %+v", p)
	}
	if loc := first.header.Get("Location"); loc != "/payments/"+p.Id {
		t.Errorf("Location %q", loc)
	}
	for range 2 {
		again := e.pay("p1", orderID, 1250)
		if again.status != 201 || string(again.body) != string(first.body) || again.header.Get("Idempotent-Replayed") != "true" || again.header.Get("Location") != first.header.Get("Location") {
			t.Fatalf("replay: %d %v %s", again.status, again.header, again.body)
		}
	}
	if r := e.pay("p1", orderID, 999); r.status != 422 || r.problem(t).Type != idem.TypeKeyReused {
		t.Fatalf("reused key: %d %s", r.status, r.body)
	}
	e.expectPSP(psp.Stats{Requests: 1, Charges: 1})
	if n := e.payments(psp.StatusSucceeded); n != 1 {
		t.Fatalf("%d succeeded payments, want 1", n)
	}
}

// A decline is a typed response: stored, and replayed without asking the
// provider again.
func TestDeclinedPaymentIsStored(t *testing.T) {
	e := newEnv(t, nil)
	orderID := e.newOrder()
	first := e.pay("p1", orderID, int(psp.DeclineAmount))
	if first.status != 402 || first.problem(t).Type != orders.ProblemDeclined {
		t.Fatalf("declined: %d %s", first.status, first.body)
	}
	again := e.pay("p1", orderID, int(psp.DeclineAmount))
	if again.status != 402 || string(again.body) != string(first.body) || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay of the decline: %d %s", again.status, again.body)
	}
	e.expectPSP(psp.Stats{Requests: 1, Declines: 1})
	if n := e.payments(psp.StatusDeclined); n != 1 {
		t.Fatalf("%d declined payments, want 1", n)
	}
}

func TestPaymentOfUnknownOrderIs404(t *testing.T) {
	e := newEnv(t, nil)
	r := e.pay("p1", "ord_missing", 1250)
	if r.status != 404 {
		t.Fatalf("got %d %s", r.status, r.body)
	}
	if again := e.pay("p1", "ord_missing", 1250); again.status != 404 || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %v", again.status, again.header)
	}
	e.expectPSP(psp.Stats{})
}

// The provider fails after the payment is recorded: the client gets a 500,
// the phase rolls back and the lease is released; the retry resumes at
// payment_created, so the payment is recorded once and charged once.
func TestProviderFailureResumesAfterPaymentCreated(t *testing.T) {
	e := newEnv(t, nil)
	orderID := e.newOrder()
	e.pspDown.Store(true)
	failed := e.pay("p1", orderID, 1250)
	if failed.status != 500 || failed.problem(t).Type != idem.TypeInternal {
		t.Fatalf("provider down: %d %s", failed.status, failed.body)
	}
	var point string
	if err := e.pool.QueryRow(t.Context(), `SELECT recovery_point FROM idempotency_keys WHERE key = 'p1' AND status = 'in_flight' AND locked_until <= now()`).Scan(&point); err != nil || point != "payment_created" {
		t.Fatalf("key after the failure: point %q, %v; want a released lease at payment_created", point, err)
	}
	e.pspDown.Store(false)
	ok := e.pay("p1", orderID, 1250)
	if ok.status != 201 || ok.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("retry: %d %s", ok.status, ok.body)
	}
	if n := e.count(`SELECT count(*) FROM payments`); n != 1 {
		t.Fatalf("%d payments, want 1", n)
	}
	e.expectPSP(psp.Stats{Requests: 1, Charges: 1})
}

// Many clients send the same payment at once: one charge, one payment,
// and every answer is that payment or a 409.
func TestConcurrentSamePaymentChargesOnce(t *testing.T) {
	e := newEnv(t, nil)
	orderID := e.newOrder()
	const n = 30
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		bodies  = map[string]int{}
		answers = map[int]int{}
		errs    []error
	)
	start := make(chan struct{})
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r, err := e.sendPayment("p1", orderID, 1250)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			answers[r.status]++
			if r.status == 201 {
				bodies[string(r.body)]++
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if answers[201]+answers[409] != n || answers[201] == 0 || len(bodies) != 1 {
		t.Fatalf("answers %v, %d distinct 201 bodies; want 201s of one payment and 409s", answers, len(bodies))
	}
	e.expectPSP(psp.Stats{Requests: 1, Charges: 1})
	if c := e.count(`SELECT count(*) FROM payments`); c != 1 {
		t.Fatalf("%d payments, want 1", c)
	}
}

// expireKey makes a key's TTL pass, as a day going by would.
func (e *env) expireKey(key string) {
	e.t.Helper()
	if _, err := e.pool.Exec(e.t.Context(), `UPDATE idempotency_keys SET expires_at = now() - interval '1 second' WHERE key = $1`, key); err != nil {
		e.t.Fatal(err)
	}
}

// A payment key reused after its TTL is a new payment: its derived keys
// are new, so the payment reference is fresh and the provider charges
// again, instead of a 500 on the old reference or the old charge.
func TestDerivedKeysChangeAfterTTL(t *testing.T) {
	e := newEnv(t, nil)
	orderID := e.newOrder()
	first := e.pay("p1", orderID, 1250)
	if first.status != 201 {
		t.Fatalf("first: %d %s", first.status, first.body)
	}
	e.expireKey("p1")
	second := e.pay("p1", orderID, 1250)
	if second.status != 201 || second.header.Get("Idempotent-Replayed") != "" || string(second.body) == string(first.body) {
		t.Fatalf("reuse after the TTL: %d %v %s, want a new 201 (first was %s)", second.status, second.header, second.body, first.body)
	}
	if n := e.count(`SELECT count(DISTINCT reference) FROM payments`); n != 2 {
		t.Fatalf("%d payment references, want 2", n)
	}
	if g := e.count(`SELECT generation FROM idempotency_keys WHERE key = 'p1'`); g != 2 {
		t.Fatalf("generation %d, want 2", g)
	}
	e.expectPSP(psp.Stats{Requests: 2, Charges: 2})
}

// A payment that stopped partway keeps its key past the TTL: a different
// request with the key gets 422 instead of restarting it from the first
// phase, and the same request resumes it and charges once.
func TestExpiredInFlightDifferentRequest(t *testing.T) {
	e := newEnv(t, nil)
	orderID := e.newOrder()
	e.pspDown.Store(true)
	if r := e.pay("p1", orderID, 1250); r.status != 500 || !strings.Contains(r.problem(t).Detail, `"payment_created"`) {
		t.Fatalf("provider down: %d %s, want a 500 naming the kept step", r.status, r.body)
	}
	e.pspDown.Store(false)
	e.expireKey("p1")
	if r := e.pay("p1", orderID, 999); r.status != 422 || r.problem(t).Type != idem.TypeKeyReused {
		t.Fatalf("a different request on the expired key in flight: %d %s, want 422", r.status, r.body)
	}
	ok := e.pay("p1", orderID, 1250)
	if ok.status != 201 {
		t.Fatalf("the same request: %d %s, want it resumed", ok.status, ok.body)
	}
	if n := e.count(`SELECT count(*) FROM payments`); n != 1 {
		t.Fatalf("%d payments, want 1", n)
	}
	if g := e.count(`SELECT generation FROM idempotency_keys WHERE key = 'p1'`); g != 1 {
		t.Fatalf("generation %d, want 1: a takeover continues the generation", g)
	}
	e.expectPSP(psp.Stats{Requests: 1, Charges: 1})
}

// A key reused after its TTL is a new payment with a new provider key,
// also once the reaper has ended the first payment's row: the generation
// the provider's key is derived from survives the reaper.
func TestDerivedKeysAfterReap(t *testing.T) {
	e := newEnv(t, nil)
	orderID := e.newOrder()
	first := e.pay("p1", orderID, 1250)
	if first.status != 201 {
		t.Fatalf("first: %d %s", first.status, first.body)
	}
	store := pgstore.New(e.pool, pgstore.Options{})
	for use := 2; use <= 3; use++ {
		if _, err := e.pool.Exec(context.Background(), `UPDATE idempotency_keys SET expires_at = now() - interval '1 second' WHERE key = 'p1'`); err != nil {
			t.Fatal(err)
		}
		res, err := store.Reap(context.Background(), pgstore.ReapOptions{Logger: slog.New(slog.DiscardHandler)})
		if err != nil || res.Emptied != 1 {
			t.Fatalf("reap: %+v, %v; want the payment's key emptied, not deleted", res, err)
		}
		again := e.pay("p1", orderID, 1250)
		if again.status != 201 || again.header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("use %d of the key after the reaper: %d %s, want a new payment", use, again.status, again.body)
		}
		e.expectPSP(psp.Stats{Requests: use, Charges: use})
		if n := e.payments(psp.StatusSucceeded); n != use {
			t.Fatalf("%d succeeded payments, want %d: each use of the key is its own payment", n, use)
		}
	}
}
