// Command demo starts the example orders API on PostgreSQL and walks
// through the Idempotency-Key protocol: a first call, its replay, a key
// reused for another request (422), a duplicate while the first call runs
// (409), a call without a key (400), a body the spec refuses (400,
// before any key is claimed) and another account's token with the first
// call's account and key (403, before any key is looked up); then a
// phased payment charged at a fake payment provider, its replay, and a
// stored decline; then the provider's signed webhook for the charge,
// keyed by its webhook-id, and a redelivery of it answered from the store;
// then an async export, answered 202 and run on a River worker, polled to
// its result and replayed.
//
// At the end it shows what the server counted at GET /metrics.
//
//	go run ./example/cmd/demo
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/idemgen/idemgen/example/psp"
	"github.com/idemgen/idemgen/example/server"
)

const workDelay = time.Second

// account is the demo's account; other is another, whose token the demo
// tries on account's key.
const account, other = "acct_demo", "acct_other"

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

type result struct {
	status   int
	header   http.Header
	body     []byte
	duration time.Duration
}

func run(out io.Writer) error {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	// A secret of this run's: the demo makes its own tokens.
	secret := rand.Text()
	srv, err := server.Start(context.Background(), server.Config{
		DatabaseURL: os.Getenv("DATABASE_URL"),
		Throwaway:   true, // on the local PostgreSQL, a database of its own, dropped at the end
		WorkDelay:   workDelay,
		AuthSecret:  secret,
		// The in-process provider signs its events with a secret of this
		// run's, which the server verifies.
		Webhooks:      true,
		WebhookSecret: psp.NewWebhookSecret(),
		Logger:        log,
	})
	if err != nil {
		return err
	}
	defer srv.Close()
	// Interrupted, it still drops its database and stops a cluster it
	// started.
	interrupt := make(chan os.Signal, 1)
	signal.Notify(interrupt, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-interrupt
		srv.Close()
		os.Exit(130)
	}()

	suffix := random()
	customer := "cus_" + suffix
	token := server.Token(secret, account)
	orderBody := func(amount int) string {
		return fmt.Sprintf(`{"amount_cents": %d, "currency": "EUR", "customer_id": %q}`, amount, customer)
	}
	post := func(key string, amount int) (result, error) {
		return send(srv.URL+"/orders", token, key, orderBody(amount))
	}

	fmt.Fprintf(out, "Orders API at %s on PostgreSQL; createOrder works for %s inside its attempt.\n\n", srv.URL, workDelay)
	key := "demo-" + suffix

	fmt.Fprintf(out, "1. First call: POST /orders, Idempotency-Key: %s\n", key)
	first, err := post(key, 1250)
	if err != nil {
		return err
	}
	show(out, first)

	fmt.Fprintln(out, "2. The client retries: same key, same body")
	replay, err := post(key, 1250)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "   (same body as the first call: %v)\n", bytes.Equal(first.body, replay.body))
	show(out, replay)

	fmt.Fprintln(out, "3. The same key with a different body (amount 999)")
	reused, err := post(key, 999)
	if err != nil {
		return err
	}
	show(out, reused)

	key2 := "demo-" + random()
	fmt.Fprintf(out, "4. Two calls at once with a new key, %s: one runs, the other is told to wait\n", key2)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		results []result
		errs    []error
	)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := post(key2, 4200)
			mu.Lock()
			defer mu.Unlock()
			results, errs = append(results, r), append(errs, err)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	slices.SortFunc(results, func(a, b result) int { return a.status - b.status })
	for _, r := range results {
		show(out, r)
	}

	fmt.Fprintln(out, "5. A call without an Idempotency-Key")
	missing, err := post("", 1250)
	if err != nil {
		return err
	}
	show(out, missing)

	fmt.Fprintln(out, "6. A body the spec refuses: customer_id over its maxLength of 64")
	invalid, err := send(srv.URL+"/orders", token, "demo-"+random(), fmt.Sprintf(`{"amount_cents": 1250, "currency": "EUR", "customer_id": %q}`, strings.Repeat("c", 65)))
	if err != nil {
		return err
	}
	show(out, invalid)

	fmt.Fprintf(out, "7. Someone with %s's token sends X-Account-Id: %s, the first call's key and body\n", other, account)
	forged, err := send(srv.URL+"/orders", server.Token(secret, other), key, orderBody(1250))
	if err != nil {
		return err
	}
	show(out, forged)
	if forged.status != http.StatusForbidden || bytes.Contains(forged.body, first.body) {
		return fmt.Errorf("another account's token was answered %d %s, want a 403 without the first order", forged.status, forged.body)
	}

	var list struct {
		Orders []json.RawMessage `json:"orders"`
	}
	req, _ := http.NewRequest("GET", srv.URL+"/orders?customer_id="+customer, nil)
	authorize(req, token)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		defer resp.Body.Close()
		_ = json.NewDecoder(resp.Body).Decode(&list)
	}
	fmt.Fprintf(out, "Orders created for %s: %d (eight calls; two keys ran).\n\n", customer, len(list.Orders))
	if len(list.Orders) != 2 {
		return fmt.Errorf("expected 2 orders, found %d", len(list.Orders))
	}
	var o struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(first.body, &o); err != nil {
		return fmt.Errorf("first order: %w", err)
	}
	if err := payments(out, srv, token, o.ID); err != nil {
		return err
	}
	if err := webhook(out, srv); err != nil {
		return err
	}
	if err := export(out, srv, token); err != nil {
		return err
	}
	return metrics(out, srv.URL)
}

// metrics shows what the server counted, as Prometheus scrapes it.
func metrics(out io.Writer, url string) error {
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	text, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\n12. What the server counted: GET %s/metrics | grep idem_requests_total\n", url)
	n := 0
	for _, line := range strings.Split(string(text), "\n") {
		if strings.HasPrefix(line, "idem_requests_total{") {
			fmt.Fprintln(out, "   "+scopeLabels.ReplaceAllString(line, ""))
			n++
		}
	}
	if n == 0 {
		return fmt.Errorf("GET /metrics has no idem_requests_total:\n%s", text)
	}
	return nil
}

// scopeLabels are the exporter's labels naming the instrumentation
// scope, the same on every line: left out of the demo's output.
var scopeLabels = regexp.MustCompile(`,?otel_scope_[a-z_]+="[^"]*"`)

// payments shows createPayment, which is phased around a call to the
// payment provider.
func payments(out io.Writer, srv *server.Server, token, orderID string) error {
	pay := func(key string, amount int64) (result, error) {
		return send(srv.URL+"/payments", token, key, fmt.Sprintf(`{"order_id": %q, "amount_cents": %d}`, orderID, amount))
	}
	provider := &psp.Client{BaseURL: srv.PSPURL}

	key := "demo-pay-" + random()
	fmt.Fprintf(out, "8. Pay for order %s: POST /payments, Idempotency-Key: %s\n", orderID, key)
	fmt.Fprintln(out, "   (phased: record the payment, charge the provider with a derived key, record the charge, answer)")
	for _, label := range []string{"", "   The client retries the payment:\n"} {
		fmt.Fprint(out, label)
		r, err := pay(key, 1250)
		if err != nil {
			return err
		}
		show(out, r)
	}

	declined := "demo-pay-" + random()
	fmt.Fprintf(out, "9. A payment of %d cents, which the provider declines, sent twice with key %s\n", psp.DeclineAmount, declined)
	for range 2 {
		r, err := pay(declined, psp.DeclineAmount)
		if err != nil {
			return err
		}
		show(out, r)
	}

	stats, err := provider.Stats(context.Background())
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "The payment provider received %d charge requests: %d charge made, %d declined (four calls, two keys).\n", stats.Requests, stats.Charges, stats.Declines)
	if stats != (psp.Stats{Requests: 2, Charges: 1, Declines: 1}) {
		return fmt.Errorf("expected 2 requests, 1 charge and 1 decline at the provider, got %+v", stats)
	}
	return nil
}

// webhook shows the provider's payment.succeeded event for the charge of
// step 8, which it delivered to POST /webhooks/psp, and a redelivery.
func webhook(out io.Writer, srv *server.Server) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ev, err := srv.Fake.WaitEvent(ctx, func(ev psp.Event) bool { return ev.Done })
	if err != nil {
		return fmt.Errorf("the provider's webhook was not delivered: %w", err)
	}
	first := ev.Deliveries[len(ev.Deliveries)-1]
	fmt.Fprintf(out, "\n10. The provider's webhook for the charge: POST /webhooks/psp, webhook-id: %s (signed, verified)\n", ev.ID)
	fmt.Fprintf(out, "   → %d %s\n     %s\n\n", first.Status, http.StatusText(first.Status), strings.TrimSpace(first.Body))
	fmt.Fprintln(out, "   The provider redelivers it (same webhook-id, a new timestamp and signature):")
	again, err := (&psp.Client{BaseURL: srv.PSPURL}).Redeliver(ctx, ev.ID)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "   → %d %s, Idempotent-Replayed: %v\n     %s\n", again.Status, http.StatusText(again.Status), again.Replayed, strings.TrimSpace(again.Body))
	if first.Status != http.StatusOK || again.Status != http.StatusOK || !again.Replayed || again.Body != first.Body {
		return fmt.Errorf("the redelivery was answered %+v, want the first delivery's answer %+v, replayed", again, first)
	}
	return nil
}

// export shows createExport, which is async: answered 202 at once, run
// on a River worker beside the server, polled at its status resource.
func export(out io.Writer, srv *server.Server, token string) error {
	key := "demo-export-" + random()
	fmt.Fprintf(out, "\n11. Export the account's orders as CSV: POST /exports, Idempotency-Key: %s\n", key)
	fmt.Fprintln(out, "   (async: answered once the key is claimed and the job enqueued; a River worker builds the file)")
	accepted, err := send(srv.URL+"/exports", token, key, `{"format": "csv"}`)
	if err != nil {
		return err
	}
	show(out, accepted)
	location := accepted.header.Get("Location")
	if accepted.status != http.StatusAccepted || location == "" {
		return fmt.Errorf("the export was answered %d %s, want 202 with a Location", accepted.status, accepted.body)
	}
	fmt.Fprintln(out, "   The client retries at once: same key, same body")
	retry, err := send(srv.URL+"/exports", token, key, `{"format": "csv"}`)
	if err != nil {
		return err
	}
	show(out, retry)
	fmt.Fprintf(out, "   It polls GET %s, waiting Retry-After between polls\n", location)
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := get(srv.URL+location, token)
		if err != nil {
			return err
		}
		var status struct{ Status string }
		_ = json.Unmarshal(st.body, &status)
		if status.Status == "succeeded" || status.Status == "failed" {
			show(out, st)
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the export is still %q after 30s", status.Status)
		}
		time.Sleep(retryAfter(st.header))
	}
	fmt.Fprintln(out, "   Once it is done, a retry of the request gets the export itself:")
	done, err := send(srv.URL+"/exports", token, key, `{"format": "csv"}`)
	if err != nil {
		return err
	}
	show(out, done)
	if done.status != http.StatusCreated || done.header.Get("Idempotent-Replayed") != "true" {
		return fmt.Errorf("the export's retry was answered %d %s, want its stored 201, replayed", done.status, done.body)
	}
	return nil
}

// retryAfter is the delay a Retry-After header of seconds asks for.
func retryAfter(h http.Header) time.Duration {
	var s int
	if _, err := fmt.Sscan(h.Get("Retry-After"), &s); err != nil || s <= 0 {
		return time.Second
	}
	return time.Duration(s) * time.Second
}

// get GETs url for the demo's account, and times the answer.
func get(url, token string) (result, error) {
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		return result{}, err
	}
	authorize(req, token)
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return result{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return result{resp.StatusCode, resp.Header, b, time.Since(start)}, err
}

// send POSTs a JSON body for the demo's account with token as its bearer
// token, with key as the Idempotency-Key unless it is empty, and times the
// answer.
func send(url, token, key, body string) (result, error) {
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		return result{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	authorize(req, token)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return result{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return result{resp.StatusCode, resp.Header, b, time.Since(start)}, err
}

// authorize names the demo's account in req, with token as its bearer
// token.
func authorize(req *http.Request, token string) {
	req.Header.Set("X-Account-Id", account)
	req.Header.Set("Authorization", "Bearer "+token)
}

func show(out io.Writer, r result) {
	fmt.Fprintf(out, "   → %d %s in %s", r.status, http.StatusText(r.status), r.duration.Round(time.Millisecond))
	for _, h := range []string{"Idempotent-Replayed", "Retry-After", "Location"} {
		if v := r.header.Get(h); v != "" {
			fmt.Fprintf(out, ", %s: %s", h, v)
		}
	}
	fmt.Fprintln(out)
	var problem struct{ Detail string }
	if strings.HasPrefix(r.header.Get("Content-Type"), "application/problem+json") && json.Unmarshal(r.body, &problem) == nil {
		fmt.Fprintf(out, "     %s\n\n", problem.Detail)
		return
	}
	fmt.Fprintf(out, "     %s\n\n", bytes.TrimSpace(r.body))
}

func random() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
