package psp_test

import (
	"context"
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
	return fake, &psp.Client{BaseURL: srv.URL}
}

func TestChargeOncePerKey(t *testing.T) {
	fake, c := newFake(t)
	ctx := context.Background()
	req := psp.ChargeRequest{AmountCents: 1250, Reference: "pay_1"}
	first, err := c.Charge(ctx, "k1", req)
	if err != nil || first.Status != psp.StatusSucceeded || !strings.HasPrefix(first.ID, "ch_") || first.Currency != "EUR" {
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
	if s := fake.Stats(); s != (psp.Stats{Requests: 3, Charges: 2}) {
		t.Fatalf("stats %+v, want 3 requests and 2 charges", s)
	}
	if s, err := c.Stats(ctx); err != nil || s != fake.Stats() {
		t.Fatalf("Stats over HTTP: %+v, %v", s, err)
	}
}

func TestReplayIsByteForByte(t *testing.T) {
	_, c := newFake(t)
	post := func() (int, string, string) {
		r, _ := http.NewRequest("POST", c.BaseURL+"/v1/charges", strings.NewReader(`{"amount_cents": 500, "reference": "pay_1"}`))
		r.Header.Set("Idempotency-Key", "k1")
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header.Get("Idempotent-Replayed")
	}
	s1, b1, r1 := post()
	s2, b2, r2 := post()
	if s1 != 201 || s2 != 201 || b1 != b2 || r1 != "" || r2 != "true" {
		t.Fatalf("first %d %q (replayed %q), retry %d %q (replayed %q)", s1, b1, r1, s2, b2, r2)
	}
}

func TestDeclineIsStored(t *testing.T) {
	fake, c := newFake(t)
	req := psp.ChargeRequest{AmountCents: psp.DeclineAmount, Reference: "pay_1"}
	for range 2 {
		ch, err := c.Charge(context.Background(), "k1", req)
		if err != nil || ch.Status != psp.StatusDeclined || ch.DeclineCode != "card_declined" {
			t.Fatalf("declined charge: %+v, %v", ch, err)
		}
	}
	if s := fake.Stats(); s != (psp.Stats{Requests: 2, Declines: 1}) {
		t.Fatalf("stats %+v, want 2 requests and 1 decline", s)
	}
}

func TestErrors(t *testing.T) {
	fake, c := newFake(t)
	ctx := context.Background()
	if _, err := c.Charge(ctx, "k1", psp.ChargeRequest{AmountCents: 100, Reference: "a"}); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		key    string
		req    psp.ChargeRequest
		status int
		code   string
	}{
		"reused key":     {"k1", psp.ChargeRequest{AmountCents: 200, Reference: "a"}, 422, "idempotency_key_reused"},
		"missing key":    {"", psp.ChargeRequest{AmountCents: 100}, 400, "missing_idempotency_key"},
		"invalid amount": {"k2", psp.ChargeRequest{AmountCents: 0}, 400, "invalid_request"},
	} {
		_, err := c.Charge(ctx, tc.key, tc.req)
		var pe *psp.Error
		if !errors.As(err, &pe) || pe.Status != tc.status || pe.Code != tc.code {
			t.Errorf("%s: err = %v, want a psp.Error %d %s", name, err, tc.status, tc.code)
		}
	}
	if s := fake.Stats(); s.Charges != 1 {
		t.Fatalf("refused requests made charges: %+v", s)
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
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ch, err := c.Charge(context.Background(), "k1", psp.ChargeRequest{AmountCents: 700, Reference: "pay_1"})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				ids["error: "+err.Error()]++
				return
			}
			ids[ch.ID]++
		}()
	}
	close(start)
	wg.Wait()
	if len(ids) != 1 || fake.Stats().Charges != 1 {
		t.Fatalf("charges by ID %v, stats %+v; want one charge answered %d times", ids, fake.Stats(), n)
	}
}
