package server_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/example/server"
	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/internal/pgtest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A request that breaks the spec's schema is refused by the gate before
// the protocol claims its key: a 400 in the API's shape that names the
// failing member, no key stored, nothing run, counted as invalid_request;
// the same key then runs a valid request.
func TestRequestValidatedBeforeClaim(t *testing.T) {
	dbURL := pgtest.NewDatabase(t)
	srv, err := server.Start(context.Background(), server.Config{DatabaseURL: dbURL, AuthSecret: testSecret, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	db, err := pgxpool.New(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	count := func(query string) int {
		t.Helper()
		var n int
		if err := db.QueryRow(t.Context(), query).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	send := func(body string) reply {
		t.Helper()
		return postAs(t, srv.URL+"/orders", "k1", "application/json", body)
	}

	long := strings.Repeat("c", 65)
	for _, tt := range []struct{ name, body, detail string }{
		{"over maxLength", `{"amount_cents": 1250, "currency": "EUR", "customer_id": "` + long + `"}`, "/customer_id: maximum string length is 64"},
		{"under minLength", `{"amount_cents": 1250, "currency": "EUR", "customer_id": ""}`, "/customer_id: minimum string length is 1"},
		{"a required member missing", `{"amount_cents": 1250, "currency": "EUR"}`, `property "customer_id" is missing`},
		{"a member of the wrong type", `{"amount_cents": "1250", "currency": "EUR", "customer_id": "cus_1"}`, "/amount_cents: value must be an integer"},
	} {
		r := send(tt.body)
		if r.status != 400 {
			t.Fatalf("%s: %d %s, want 400", tt.name, r.status, r.body)
		}
		p := r.problem(t)
		if p.Type != idem.TypeInvalidRequest || !strings.Contains(p.Detail, tt.detail) || !strings.Contains(p.Detail, "Idempotency-Key was not used") {
			t.Errorf("%s: %+v, want invalid-request naming %q and that the key was not used", tt.name, p, tt.detail)
		}
		if strings.Contains(p.Detail, long) {
			t.Errorf("%s: the detail repeats the value: %s", tt.name, p.Detail)
		}
	}
	if n := count(`SELECT count(*) FROM idempotency_keys`); n != 0 {
		t.Fatalf("%d keys stored after invalid requests, want 0", n)
	}
	if n := count(`SELECT count(*) FROM orders`); n != 0 {
		t.Fatalf("%d orders after invalid requests, want 0", n)
	}

	// The key was never claimed: a valid request runs under it, once.
	first := send(order)
	if first.status != 201 || first.header.Get(idem.HeaderReplayed) != "" {
		t.Fatalf("valid request under the same key: %d %s", first.status, first.body)
	}
	again := send(order)
	if again.status != 201 || again.header.Get(idem.HeaderReplayed) != "true" || string(again.body) != string(first.body) {
		t.Fatalf("its retry: %d %s, want the replay of %s", again.status, again.body, first.body)
	}
	if n := count(`SELECT count(*) FROM orders`); n != 1 {
		t.Fatalf("%d orders, want 1", n)
	}

	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	text, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	got := requestCounts(t, string(text))
	want := map[string]int{"createOrder invalid_request 400": 4, "createOrder first 201": 1, "createOrder replay 201": 1}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("idem_requests_total for %s = %d, want %d", k, got[k], n)
		}
	}
	if len(got) != len(want) {
		t.Errorf("idem_requests_total: %v, want %v", got, want)
	}
}

// A JSON body that is not UTF-8 is refused before any claim, whatever its
// Content-Type's charset says: read as UTF-8 its bytes would decode as
// U+FFFD, and another request that differs only there would be taken for
// it and replayed its answer. So the Latin-1 é of a first order and the è
// of a second never meet under one key; nor do two purchase orders whose
// numbers, the key of importOrders, differ only there.
func TestBodyNotUTF8IsRefused(t *testing.T) {
	dbURL := pgtest.NewDatabase(t)
	srv, err := server.Start(context.Background(), server.Config{DatabaseURL: dbURL, AuthSecret: testSecret, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	send := func(path, key, body string) reply {
		t.Helper()
		return postAs(t, srv.URL+path, key, "application/json; charset=iso-8859-1", body)
	}
	orderFor := func(customer string) string {
		return `{"amount_cents": 1250, "currency": "EUR", "customer_id": "` + customer + `"}`
	}
	importOf := func(po string) string {
		return `{"po_number": "` + po + `", "lines": [` + orderFor("cus_1") + `]}`
	}
	for _, tt := range []struct{ path, key, body string }{
		{"/orders", "k1", orderFor("caf\xe9")},
		{"/orders", "k1", orderFor("caf\xe8")},
		{"/orders/imports", "unused", importOf("PO-\xe9")},
		{"/orders/imports", "unused", importOf("PO-\xe8")},
	} {
		r := send(tt.path, tt.key, tt.body)
		if r.status != 400 {
			t.Fatalf("%s %q: %d %s, want 400", tt.path, tt.body, r.status, r.body)
		}
		if p := r.problem(t); p.Type != idem.TypeInvalidRequest || !strings.Contains(p.Detail, "not valid UTF-8") {
			t.Errorf("%s %q: %+v, want invalid-request saying the body is not UTF-8", tt.path, tt.body, p)
		}
	}
	// Nothing was claimed: the key runs a request in UTF-8, and another
	// in UTF-8 that differs from it is a 422, not a replay.
	if r := send("/orders", "k1", orderFor("café")); r.status != 201 || r.header.Get(idem.HeaderReplayed) != "" {
		t.Fatalf("the order in UTF-8 under the same key: %d %s, want 201", r.status, r.body)
	}
	if r := send("/orders", "k1", orderFor("cafè")); r.status != 422 {
		t.Fatalf("another order under the key: %d %s, want 422", r.status, r.body)
	}
}

// postAs posts body to url as acct_1, under key, and reads the answer.
func postAs(t *testing.T, url, key, contentType, body string) reply {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	authorize(req, "acct_1")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{resp.StatusCode, resp.Header, b}
}
