package server_test

// The payment provider's webhook, keyed by its webhook-id header: these
// tests drive it over HTTP against a real PostgreSQL, with the fake
// provider sending its signed events, and count settlements.

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgen/idemgen/example/gen"
	"github.com/idemgen/idemgen/example/orders"
	"github.com/idemgen/idemgen/example/psp"
	"github.com/idemgen/idemgen/example/server"
	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/internal/pgtest"
	"github.com/jackc/pgx/v5"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// heldWebhooks holds the first run of ReceivePaymentEvent until release
// is closed, telling entered when it starts: a redelivery then arrives
// while the first delivery runs.
type heldWebhooks struct {
	*service
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (s *heldWebhooks) ReceivePaymentEvent(ctx context.Context, at *idem.Attempt[pgx.Tx], req gen.ReceivePaymentEventRequestObject) (gen.ReceivePaymentEventResponseObject, error) {
	s.once.Do(func() {
		close(s.entered)
		<-s.release
	})
	return s.Service.ReceivePaymentEvent(ctx, at, req)
}

// newWebhookEnv serves the example on a fresh database behind the
// signature check with secret, and a fake provider that sends its events
// to it, signed with secret.
func newWebhookEnv(t *testing.T, secret string, svc func(*service) gen.IdempotentServer[pgx.Tx]) *env {
	t.Helper()
	pool := pgtest.NewPool(t)
	if err := orders.Migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	api := httptest.NewUnstartedServer(nil)
	// Each delivery is stamped ten seconds after the one before, as a
	// provider's redeliveries are, minutes apart: a fingerprint that held
	// the timestamp would tell them apart.
	var clock sync.Mutex
	stamp := time.Now().Add(-time.Minute)
	now := func() time.Time {
		clock.Lock()
		defer clock.Unlock()
		stamp = stamp.Add(10 * time.Second)
		return stamp
	}
	fake, err := psp.NewFakeSending(psp.WebhookOptions{URL: "http://" + api.Listener.Addr().String() + "/webhooks/psp", Secret: secret, Backoff: 10 * time.Millisecond, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	provider := httptest.NewServer(fake)
	e := &env{t: t, pool: pool, psp: fake}
	e.svc = &service{Service: &orders.Service{Pool: pool, PSP: &psp.Client{BaseURL: provider.URL}}}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	h, err := server.VerifyWebhooks(secret, server.Handler(svc(e.svc), pool, log, testSecret))
	if err != nil {
		t.Fatal(err)
	}
	api.Config.Handler = h
	api.Start()
	// The API first, then the fake's deliveries to it, then the provider.
	t.Cleanup(provider.Close)
	t.Cleanup(fake.Close)
	t.Cleanup(api.Close)
	e.url = api.URL
	return e
}

// paid creates an order, pays it, and returns the payment.
func (e *env) paid() gen.Payment {
	e.t.Helper()
	r := e.pay("pay-"+e.t.Name(), e.newOrder(), 1250)
	if r.status != 201 {
		e.t.Fatalf("pay: %d %s", r.status, r.body)
	}
	var p gen.Payment
	if err := json.Unmarshal(r.body, &p); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// eventOf waits for the fake's event of payment id to satisfy cond.
func (e *env) eventOf(id string, cond func(psp.Event) bool) psp.Event {
	e.t.Helper()
	ev, err := e.psp.WaitEvent(e.t.Context(), func(ev psp.Event) bool {
		var p struct {
			Data struct {
				PaymentID string `json:"payment_id"`
			} `json:"data"`
		}
		return json.Unmarshal(ev.Payload, &p) == nil && p.Data.PaymentID == id && cond(ev)
	})
	if err != nil {
		e.t.Fatalf("the provider's event for payment %s: %v", id, err)
	}
	return ev
}

// TestWebhookRedelivery: the provider delivers payment.succeeded and
// redelivers it five times, the first redelivery while the first delivery
// still runs. The payment is settled once; the duplicate in flight gets
// the 409 the provider retries on, and every 2xx answer is the first
// one's, byte for byte, replayed.
func TestWebhookRedelivery(t *testing.T) {
	held := &heldWebhooks{entered: make(chan struct{}), release: make(chan struct{})}
	e := newWebhookEnv(t, psp.NewWebhookSecret(), func(s *service) gen.IdempotentServer[pgx.Tx] {
		held.service = s
		return held
	})
	p := e.paid()
	select {
	case <-held.entered:
	case <-t.Context().Done():
		t.Fatal("the provider's first delivery never reached the handler")
	}
	ev := e.eventOf(p.Id, func(psp.Event) bool { return true })
	dup, err := e.psp.Redeliver(ev.ID)
	if err != nil {
		t.Fatal(err)
	}
	if dup.Status != http.StatusConflict {
		t.Fatalf("a redelivery while the first delivery runs: %d %s; want 409", dup.Status, dup.Body)
	}
	close(held.release)
	ev = e.eventOf(p.Id, func(ev psp.Event) bool { return ev.Done })
	first := ev.Deliveries[len(ev.Deliveries)-1]
	if first.Status != http.StatusOK || first.Replayed || !strings.Contains(first.Body, `"settled":true`) {
		t.Fatalf("the first delivery: %+v; want 200, settled, not replayed", first)
	}
	for i := range 4 {
		d, err := e.psp.Redeliver(ev.ID)
		if err != nil {
			t.Fatal(err)
		}
		if d.Status != first.Status || d.Body != first.Body || !d.Replayed {
			t.Fatalf("redelivery %d: %+v; want the first delivery's answer %+v, replayed", i+2, d, first)
		}
	}
	if n := e.count(`SELECT count(*) FROM settlements WHERE payment_id = $1`, p.Id); n != 1 {
		t.Fatalf("payment %s settled %d times; want once", p.Id, n)
	}
	if n := len(e.psp.Events()[0].Deliveries); n != 6 {
		t.Fatalf("%d deliveries; want the first and five redeliveries", n)
	}
}

// TestWebhookSignature: with a webhook secret, a delivery that is not
// signed with it, or not signed, or signed too long ago, is a 401 before
// anything runs: its webhook-id is not claimed, and a correctly signed
// delivery under the same id then settles the payment.
func TestWebhookSignature(t *testing.T) {
	secret := psp.NewWebhookSecret()
	e := newWebhookEnv(t, secret, func(s *service) gen.IdempotentServer[pgx.Tx] { return s })
	p := e.paid()
	e.eventOf(p.Id, func(ev psp.Event) bool { return ev.Done })
	body := `{"type":"payment.succeeded","timestamp":"2026-11-28T10:00:00Z","data":{"payment_id":"` + p.Id + `","charge_id":"ch_forged"}}`
	sign := func(secret string, at time.Time) string {
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		sig, err := wh.Sign("msg_forged", at, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return sig
	}
	deliver := func(signature string, at time.Time) reply {
		req, err := http.NewRequest("POST", e.url+"/webhooks/psp", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("webhook-id", "msg_forged")
		req.Header.Set("webhook-timestamp", strconv.FormatInt(at.Unix(), 10))
		if signature != "" {
			req.Header.Set("webhook-signature", signature)
		}
		r, err := e.roundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	now := time.Now()
	for name, r := range map[string]reply{
		"another secret": deliver(sign(psp.NewWebhookSecret(), now), now),
		"no signature":   deliver("", now),
		"an hour old":    deliver(sign(secret, now.Add(-time.Hour)), now.Add(-time.Hour)),
	} {
		if r.status != http.StatusUnauthorized || r.problem(t).Type != server.ProblemBadSignature {
			t.Errorf("%s: %d %s; want 401 %s", name, r.status, r.body, server.ProblemBadSignature)
		}
	}
	if n := e.count(`SELECT count(*) FROM idempotency_keys WHERE key = 'msg_forged'`); n != 0 {
		t.Fatalf("refused deliveries claimed their webhook-id: %d rows", n)
	}
	if r := deliver(sign(secret, now), now); r.status != http.StatusOK {
		t.Fatalf("a signed delivery under the refused id: %d %s; want 200", r.status, r.body)
	}
	if n := e.count(`SELECT count(*) FROM settlements WHERE payment_id = $1`, p.Id); n != 2 {
		t.Fatalf("payment %s settled %d times; want twice: by its event and by the signed one under another id", p.Id, n)
	}
}
