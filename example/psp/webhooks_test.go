package psp_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgen/idemgen/example/psp"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// TestWebhookRetriedUntil2xx: a charge sends one payment.succeeded event,
// delivered again after each answer other than a 2xx, under the same
// webhook-id with the same body, each delivery signed anew with the
// secret; a 2xx ends it.
func TestWebhookRetriedUntil2xx(t *testing.T) {
	secret := psp.NewWebhookSecret()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var ids, bodies []string
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if err := wh.Verify(body, r.Header); err != nil {
			t.Errorf("delivery %d does not verify: %v", len(ids)+1, err)
		}
		ids, bodies = append(ids, r.Header.Get("webhook-id")), append(bodies, string(body))
		if len(ids) < 3 {
			http.Error(w, "not yet", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()
	fake, err := psp.NewFakeSending(psp.WebhookOptions{URL: receiver.URL, Secret: secret, Backoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	provider := httptest.NewServer(fake)
	defer provider.Close()
	c := &psp.Client{BaseURL: provider.URL}
	ch, err := c.Charge(t.Context(), "k1", psp.ChargeRequest{AmountCents: 1250, Reference: "pay_1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Charge(t.Context(), "k1", psp.ChargeRequest{AmountCents: 1250, Reference: "pay_1"}); err != nil {
		t.Fatal(err) // a replay of the charge: no second event
	}
	ev, err := fake.WaitEvent(t.Context(), func(ev psp.Event) bool { return ev.Done })
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.Deliveries) != 3 || ev.Deliveries[0].Status != 503 || ev.Deliveries[2].Status != 204 {
		t.Fatalf("deliveries %+v; want 503, 503, 204", ev.Deliveries)
	}
	mu.Lock()
	defer mu.Unlock()
	for i := range ids {
		if ids[i] != ev.ID || bodies[i] != string(ev.Payload) {
			t.Fatalf("delivery %d: id %q body %s; want %q and the event's payload %s", i+1, ids[i], bodies[i], ev.ID, ev.Payload)
		}
	}
	if !strings.Contains(string(ev.Payload), `"charge_id":"`+ch.ID+`"`) || !strings.Contains(string(ev.Payload), `"payment_id":"pay_1"`) {
		t.Fatalf("payload %s does not name the charge %s and its payment", ev.Payload, ch.ID)
	}
	if n := len(fake.Events()); n != 1 {
		t.Fatalf("%d events for one charge; want 1", n)
	}
}

// TestWebhookGivesUp: a receiver that never answers 2xx gets Attempts
// deliveries, and the event is done.
func TestWebhookGivesUp(t *testing.T) {
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusInternalServerError)
	}))
	defer receiver.Close()
	fake, err := psp.NewFakeSending(psp.WebhookOptions{URL: receiver.URL, Attempts: 3, Backoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	provider := httptest.NewServer(fake)
	defer provider.Close()
	if _, err := (&psp.Client{BaseURL: provider.URL}).Charge(t.Context(), "k1", psp.ChargeRequest{AmountCents: 100, Reference: "pay_2"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ev, err := fake.WaitEvent(ctx, func(ev psp.Event) bool { return ev.Done })
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.Deliveries) != 3 {
		t.Fatalf("%d deliveries; want 3", len(ev.Deliveries))
	}
}
