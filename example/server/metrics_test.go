package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/idemgen/idemgen/example/psp"
	"github.com/idemgen/idemgen/example/server"
	"github.com/idemgen/idemgen/internal/pgtest"
	"github.com/idemgen/idemgen/internal/redistest"
)

// The example serves its metrics at /metrics, through OpenTelemetry's
// Prometheus exporter: after a first call, its replay, a 422, a 400
// without a key and one without a body, and a 409, each is counted by
// operation and outcome.
func TestExampleServesMetrics(t *testing.T) {
	// A payment provider that holds the first charge until told, so that
	// a duplicate payment arrives while the first holds its key.
	fake := psp.NewFake()
	charging, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() {
			close(charging)
			<-release
		})
		fake.ServeHTTP(w, r)
	}))
	defer provider.Close()
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	defer unblock()

	srv, err := server.Start(context.Background(), server.Config{
		DatabaseURL: pgtest.NewDatabase(t),
		PSPURL:      provider.URL,
		AuthSecret:  testSecret,
		Logger:      slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()

	send := func(path, key, body string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest("POST", srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		authorize(req, "acct_1")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return 0, nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	order := `{"amount_cents": 1250, "currency": "EUR", "customer_id": "cus_1"}`
	status, body := send("/orders", "k1", order)
	if status != 201 {
		t.Fatalf("first call: %d %s", status, body)
	}
	for i, want := range []struct {
		key, body string
		status    int
	}{{"k1", order, 201}, {"k1", order, 201}, {"k1", `{"amount_cents": 9, "currency": "EUR", "customer_id": "cus_1"}`, 422}, {"", order, 400}, {"k2", "", 400}} {
		if got, b := send("/orders", want.key, want.body); got != want.status {
			t.Fatalf("call %d: %d %s, want %d", i, got, b, want.status)
		}
	}
	var o struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(body, &o); err != nil {
		t.Fatal(err)
	}
	payment := fmt.Sprintf(`{"order_id": %q, "amount_cents": 1250}`, o.ID)
	first := make(chan int, 1)
	go func() {
		status, _ := send("/payments", "p1", payment)
		first <- status
	}()
	<-charging // the first payment holds its key, its lease live
	if got, b := send("/payments", "p1", payment); got != 409 {
		t.Fatalf("duplicate payment: %d %s, want 409", got, b)
	}
	unblock()
	if got := <-first; got != 201 {
		t.Fatalf("first payment: %d", got)
	}

	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	text, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d, %v", resp.StatusCode, err)
	}
	got := requestCounts(t, string(text))
	want := map[string]int{
		"createOrder first 201": 1, "createOrder replay 201": 2, "createOrder mismatch 422": 1,
		"createOrder missing_key 400": 1, "createOrder invalid_request 400": 1, // the request without a body
		"createPayment first 201": 1, "createPayment conflict 409": 1,
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("idem_requests_total for %s = %d, want %d", k, got[k], n)
		}
	}
	for k, n := range got {
		if want[k] == 0 {
			t.Errorf("idem_requests_total for %s = %d, want none", k, n)
		}
	}
	for _, name := range []string{"idem_lookup_duration_seconds_bucket", "idem_attempt_duration_seconds_bucket"} {
		if !strings.Contains(string(text), name+"{") {
			t.Errorf("/metrics has no %s", name)
		}
	}
	if strings.Contains(string(text), "acct_1") || strings.Contains(string(text), `"k1"`) {
		t.Error("/metrics holds a scope or a key")
	}
}

var requestsLine = regexp.MustCompile(`^idem_requests_total\{(.*)\} (\d+)$`)
var label = regexp.MustCompile(`(\w+)="([^"]*)"`)

// requestCounts reads idem_requests_total from a Prometheus text
// exposition, by "operation outcome status".
func requestCounts(t *testing.T, text string) map[string]int {
	t.Helper()
	got := map[string]int{}
	for _, line := range strings.Split(text, "\n") {
		m := requestsLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		labels := map[string]string{}
		for _, l := range label.FindAllStringSubmatch(m[1], -1) {
			labels[l[1]] = l[2]
		}
		n, err := strconv.Atoi(m[2])
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		got[labels["idem_operation"]+" "+labels["idem_outcome"]+" "+labels["http_response_status_code"]] += n
	}
	if len(got) == 0 {
		t.Fatalf("no idem_requests_total in /metrics:\n%s", text)
	}
	return got
}

// The example with -redis-url: replays over HTTP are answered from Redis
// after the first, with the first call's bytes, and the scrape counts the
// filter's hits and misses.
func TestExampleRedisFilter(t *testing.T) {
	srv := redistest.Start(t)
	api, err := server.Start(context.Background(), server.Config{
		DatabaseURL: pgtest.NewDatabase(t),
		RedisURL:    "redis://" + srv.Addr + "/0",
		AuthSecret:  testSecret,
		Logger:      slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	order := `{"amount_cents": 1250, "currency": "EUR", "customer_id": "cus_1"}`
	send := func(account string) (int, string, string) {
		t.Helper()
		req, err := http.NewRequest("POST", api.URL+"/orders", strings.NewReader(order))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		authorize(req, account)
		req.Header.Set("Idempotency-Key", "k1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header.Get("Idempotent-Replayed")
	}
	status, first, _ := send("acct_1")
	if status != 201 {
		t.Fatalf("first call: %d %s", status, first)
	}
	for i := range 3 { // the first replay reads PostgreSQL, the others Redis
		if status, body, replayed := send("acct_1"); status != 201 || body != first || replayed != "true" {
			t.Fatalf("replay %d: %d %s, replayed %q; want the first call's bytes", i, status, body, replayed)
		}
	}
	if status, body, _ := send("acct_2"); status != 201 || body == first {
		t.Fatalf("another account's k1: %d %s, want a new order", status, body)
	}
	resp, err := http.Get(api.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(resp.Body)
	for result, want := range map[string]int{"hit": 2, "miss": 3} {
		re := regexp.MustCompile(`(?m)^idem_filter_lookups_total\{[^}]*idem_filter_result="` + result + `"[^}]*\} (\d+)$`)
		m := re.FindSubmatch(text)
		if m == nil {
			t.Fatalf("no idem_filter_lookups_total for %s in /metrics:\n%s", result, text)
		}
		if got, _ := strconv.Atoi(string(m[1])); got != want {
			t.Errorf("idem_filter_lookups_total{%s} = %d, want %d", result, got, want)
		}
	}
}
