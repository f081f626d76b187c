package psp_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/idemgen/idemgen/example/psp"
)

func newFake(t *testing.T) (*psp.Fake, *psp.Client) {
	t.Helper()
	fake := psp.NewFake()
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	return fake, &psp.Client{BaseURL: srv.URL, HTTP: srv.Client()}
}

type answer struct {
	status   int
	body     string
	replayed string
}

// post sends body to the fake as is, so that tests can see the exact
// status, bytes and headers the client hides.
func post(t *testing.T, c *psp.Client, method, path, key, body string) answer {
	t.Helper()
	r, err := http.NewRequestWithContext(t.Context(), method, c.BaseURL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		r.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.HTTP.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q, want application/json", method, path, ct)
	}
	return answer{resp.StatusCode, string(b), resp.Header.Get("Idempotent-Replayed")}
}

func TestChargeSucceeds(t *testing.T) {
	fake, c := newFake(t)
	a := post(t, c, "POST", "/v1/charges", "k1", `{"amount_cents": 1250, "reference": "pay_1"}`)
	if a.status != http.StatusCreated || a.replayed != "" {
		t.Fatalf("charge: %d %s (replayed %q), want a new 201", a.status, a.body, a.replayed)
	}
	var ch psp.Charge
	if err := json.Unmarshal([]byte(a.body), &ch); err != nil {
		t.Fatal(err)
	}
	if len(ch.ID) != len("ch_")+16 || !strings.HasPrefix(ch.ID, "ch_") {
		t.Errorf("charge ID %q, want ch_ and 16 hex characters", ch.ID)
	}
	want := psp.Charge{ID: ch.ID, AmountCents: 1250, Currency: "EUR", Reference: "pay_1", Status: psp.StatusSucceeded}
	if ch != want {
		t.Errorf("charge %+v, want %+v", ch, want)
	}
	if s := fake.Stats(); s != (psp.Stats{Requests: 1, Charges: 1}) {
		t.Fatalf("stats %+v, want 1 request and 1 charge", s)
	}
}

func TestReplayIsByteForByte(t *testing.T) {
	fake, c := newFake(t)
	first := post(t, c, "POST", "/v1/charges", "k1", `{"amount_cents": 500, "reference": "pay_1"}`)
	// The same charge, spelled differently: the currency that was defaulted.
	again := post(t, c, "POST", "/v1/charges", "k1", `{"reference": "pay_1", "currency": "EUR", "amount_cents": 500}`)
	if first.status != 201 || first.replayed != "" {
		t.Fatalf("first: %d %s (replayed %q)", first.status, first.body, first.replayed)
	}
	if again.status != 201 || again.body != first.body || again.replayed != "true" {
		t.Fatalf("retry: %d %s (replayed %q), want a replay of %s", again.status, again.body, again.replayed, first.body)
	}
	if s := fake.Stats(); s != (psp.Stats{Requests: 2, Charges: 1}) {
		t.Fatalf("stats %+v, want 2 requests and 1 charge", s)
	}
}

func TestDeclineIsStoredAndReplayed(t *testing.T) {
	fake, c := newFake(t)
	body := `{"amount_cents": 4000, "reference": "pay_1"}`
	first := post(t, c, "POST", "/v1/charges", "k1", body)
	again := post(t, c, "POST", "/v1/charges", "k1", body)
	if first.status != http.StatusPaymentRequired || again.status != http.StatusPaymentRequired || again.body != first.body || again.replayed != "true" {
		t.Fatalf("first %d %s, retry %d %s (replayed %q); want one 402 replayed", first.status, first.body, again.status, again.body, again.replayed)
	}
	ch, err := c.Charge(t.Context(), "k1", psp.ChargeRequest{AmountCents: psp.DeclineAmount, Reference: "pay_1"})
	if err != nil || ch.Status != psp.StatusDeclined || ch.DeclineCode != "card_declined" || !strings.Contains(first.body, ch.ID) {
		t.Fatalf("declined charge through the client: %+v, %v", ch, err)
	}
	if s := fake.Stats(); s != (psp.Stats{Requests: 3, Declines: 1}) {
		t.Fatalf("stats %+v, want 3 requests and 1 decline", s)
	}
}

func TestRefusals(t *testing.T) {
	fake, c := newFake(t)
	if _, err := c.Charge(t.Context(), "k1", psp.ChargeRequest{AmountCents: 100, Reference: "a"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		key    string
		req    psp.ChargeRequest
		status int
		code   string
	}{
		{"reused key, other amount", "k1", psp.ChargeRequest{AmountCents: 200, Reference: "a"}, 422, "idempotency_key_reused"},
		{"reused key, other currency", "k1", psp.ChargeRequest{AmountCents: 100, Currency: "USD", Reference: "a"}, 422, "idempotency_key_reused"},
		{"reused key, other reference", "k1", psp.ChargeRequest{AmountCents: 100, Reference: "b"}, 422, "idempotency_key_reused"},
		{"missing key", "", psp.ChargeRequest{AmountCents: 100}, 400, "missing_idempotency_key"},
		{"zero amount", "k2", psp.ChargeRequest{AmountCents: 0}, 400, "invalid_request"},
		{"negative amount", "k2", psp.ChargeRequest{AmountCents: -5}, 400, "invalid_request"},
	} {
		_, err := c.Charge(t.Context(), tc.key, tc.req)
		var pe *psp.Error
		if !errors.As(err, &pe) || pe.Status != tc.status || pe.Code != tc.code || pe.Message == "" {
			t.Errorf("%s: err = %v, want a psp.Error %d %s", tc.name, err, tc.status, tc.code)
		}
	}
	// A refused request is not stored: the key still makes its charge.
	if ch, err := c.Charge(t.Context(), "k2", psp.ChargeRequest{AmountCents: 300}); err != nil || ch.Status != psp.StatusSucceeded {
		t.Fatalf("charge with a key refused before: %+v, %v", ch, err)
	}
	if s := fake.Stats(); s != (psp.Stats{Requests: 8, Charges: 2}) {
		t.Fatalf("stats %+v, want 8 requests and 2 charges", s)
	}
}

func TestBadRequestsAnswerJSON(t *testing.T) {
	fake, c := newFake(t)
	for _, tc := range []struct {
		method, path, key, body string
		status                  int
		code                    string
	}{
		{"POST", "/v1/charges", "k1", `{"amount_cents": `, 400, "invalid_request"},
		{"POST", "/v1/charges", "k1", `{"amount_cents": "12"}`, 400, "invalid_request"},
		{"POST", "/v1/charges", "", `{"amount_cents": 12}`, 400, "missing_idempotency_key"},
		{"GET", "/v1/charges", "", "", 404, "not_found"},
		{"POST", "/v1/stats", "", "", 404, "not_found"},
		{"GET", "/", "", "", 404, "not_found"},
	} {
		a := post(t, c, tc.method, tc.path, tc.key, tc.body)
		var e struct{ Error, Message string }
		if err := json.Unmarshal([]byte(a.body), &e); err != nil || a.status != tc.status || e.Error != tc.code || e.Message == "" {
			t.Errorf("%s %s %s: %d %s, want %d %s", tc.method, tc.path, tc.body, a.status, a.body, tc.status, tc.code)
		}
	}
	if s := fake.Stats(); s != (psp.Stats{Requests: 3}) {
		t.Fatalf("stats %+v, want the 3 charge requests and nothing else", s)
	}
}

func TestConcurrentRetriesChargeOnce(t *testing.T) {
	fake, c := newFake(t)
	const n = 50
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		ids = map[string]int{}
	)
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			ch, err := c.Charge(context.Background(), "k1", psp.ChargeRequest{AmountCents: 700, Reference: "pay_1"})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				ids["error: "+err.Error()]++
				return
			}
			ids[ch.ID]++
		})
	}
	close(start)
	wg.Wait()
	if s := fake.Stats(); len(ids) != 1 || s != (psp.Stats{Requests: n, Charges: 1}) {
		t.Fatalf("answers by charge ID %v, stats %+v; want one charge answered %d times", ids, s, n)
	}
}

func TestClientRoundTrip(t *testing.T) {
	fake, c := newFake(t)
	ctx := t.Context()
	req := psp.ChargeRequest{AmountCents: 1250, Currency: "USD", Reference: "pay_1"}
	first, err := c.Charge(ctx, "k1", req)
	if err != nil || first.Status != psp.StatusSucceeded || first.AmountCents != 1250 || first.Currency != "USD" || first.Reference != "pay_1" {
		t.Fatalf("first charge: %+v, %v", first, err)
	}
	again, err := c.Charge(ctx, "k1", req)
	if err != nil || again != first {
		t.Fatalf("retry: %+v, %v; want the first charge %+v", again, err, first)
	}
	other, err := c.Charge(ctx, "k2", req)
	if err != nil || other.ID == first.ID {
		t.Fatalf("another key: %+v, %v; want a new charge", other, err)
	}
	s, err := c.Stats(ctx)
	if err != nil || s != (psp.Stats{Requests: 3, Charges: 2}) || s != fake.Stats() {
		t.Fatalf("Stats over HTTP: %+v, %v; want 3 requests and 2 charges", s, err)
	}
}

func TestClientTransportError(t *testing.T) {
	srv := httptest.NewServer(psp.NewFake())
	c := &psp.Client{BaseURL: srv.URL}
	srv.Close()
	_, err := c.Charge(t.Context(), "k1", psp.ChargeRequest{AmountCents: 100})
	var pe *psp.Error
	if err == nil || errors.As(err, &pe) || !strings.HasPrefix(err.Error(), "psp: charge: ") {
		t.Fatalf("charge with the provider down: %v, want a wrapped transport error", err)
	}
}
