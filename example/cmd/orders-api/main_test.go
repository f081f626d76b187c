package main_test

// These tests run the orders-api binary as a separate process and drive it
// over HTTP, as a client would; the crash test kills it mid-request.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idemgen/idemgen/example/orders"
	"github.com/idemgen/idemgen/example/psp"
	"github.com/idemgen/idemgen/example/server"
	"github.com/idemgen/idemgen/internal/pgtest"
	"github.com/jackc/pgx/v5/pgxpool"
)

func TestMain(m *testing.M) {
	pgtest.Main(m, func() {
		if built.dir != "" {
			os.RemoveAll(built.dir)
		}
	})
}

// built is the server, compiled once for all the tests that run it.
var built struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

// build returns the server's binary, compiling it on first use.
func build(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "orders-api-test-"); built.err != nil {
			return
		}
		bin := filepath.Join(built.dir, "orders-api")
		if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		built.bin = bin
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

type proc struct {
	cmd *exec.Cmd
	url string
	eof chan struct{} // closed when the server's stderr ends: it has exited

	mu      sync.Mutex
	logs    strings.Builder
	changed chan struct{} // closed, and replaced, when a line is logged
}

var listening = regexp.MustCompile(`msg="orders-api: listening" url=(\S+)`)

// start runs the server on a free port against dbURL and waits for it to
// say where it listens.
func start(t *testing.T, bin, dbURL string, args ...string) *proc {
	t.Helper()
	p := &proc{
		cmd:     exec.Command(bin, append([]string{"-addr", "127.0.0.1:0"}, args...)...),
		eof:     make(chan struct{}),
		changed: make(chan struct{}),
	}
	p.cmd.Env = append(p.cmd.Environ(), "DATABASE_URL="+dbURL, "ORDERS_AUTH_SECRET="+testSecret)
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		p.cmd.Wait()
		if t.Failed() {
			t.Logf("server log:\n%s", p.log())
		}
	})
	found := make(chan string, 1)
	go func() {
		defer close(p.eof)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.mu.Lock()
			p.logs.WriteString(sc.Text() + "\n")
			close(p.changed)
			p.changed = make(chan struct{})
			p.mu.Unlock()
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
		close(found)
	}()
	url, ok := <-found
	if !ok {
		p.cmd.Wait()
		t.Fatalf("server exited before listening:\n%s", p.log())
	}
	p.url = url
	return p
}

func (p *proc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// waitLog waits until the server has logged a line that matches re, and
// returns that line.
func (p *proc) waitLog(t *testing.T, re *regexp.Regexp, within time.Duration) string {
	t.Helper()
	timeout := time.After(within)
	for {
		p.mu.Lock()
		logs, changed := p.logs.String(), p.changed
		p.mu.Unlock()
		if line := re.FindString(logs); line != "" {
			return line
		}
		select {
		case <-changed:
		case <-p.eof:
			t.Fatalf("the server exited without logging %s:\n%s", re, p.log())
		case <-timeout:
			t.Fatalf("the server did not log %s within %v:\n%s", re, within, p.log())
		}
	}
}

// waitClaimed waits until an attempt holds its key: the key's advisory
// lock is granted to the server's session exclusively, in this test's
// database (pg_locks shows the whole cluster). A lookup also takes the
// lock shared, for the time of its statement, which is not a claim: a
// duplicate sent then could claim the key first.
func waitClaimed(t *testing.T, pool *pgxpool.Pool, p *proc) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for count(t, pool, claimedKeys) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the first attempt never claimed its key:\n%s", p.log())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

const claimedKeys = `SELECT count(*) FROM pg_locks
	WHERE locktype = 'advisory' AND mode = 'ExclusiveLock' AND granted
	  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`

// testSecret is the secret of the tokens of the servers the tests start.
const testSecret = "orders-api-test-secret"

// authorize names account in req and adds its token.
func authorize(req *http.Request, account string) {
	req.Header.Set("X-Account-Id", account)
	req.Header.Set("Authorization", "Bearer "+server.Token(testSecret, account))
}

// client fails a request the server does not answer within a minute, so
// that a test waiting on it fails with its own message rather than at the
// test binary's timeout.
var client = &http.Client{Timeout: time.Minute}

type reply struct {
	status int
	header http.Header
	body   string
}

func post(url, key, body string) (reply, error) {
	req, err := http.NewRequest("POST", url+"/orders", strings.NewReader(body))
	if err != nil {
		return reply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	authorize(req, "acct_1")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := client.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, string(b)}, err
}

func mustPost(t *testing.T, url, key, body string) reply {
	t.Helper()
	r, err := post(url, key, body)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

const order = `{"amount_cents": 1250, "currency": "EUR", "customer_id": "cus_1"}`

func count(t *testing.T, pool *pgxpool.Pool, query string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), query).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestServerOverHTTP(t *testing.T) {
	t.Parallel()
	bin := build(t)
	p := start(t, bin, pgtest.NewDatabase(t))

	first := mustPost(t, p.url, "k1", order)
	if first.status != 201 {
		t.Fatalf("first: %d %s", first.status, first.body)
	}
	replay := mustPost(t, p.url, "k1", order)
	if replay.status != 201 || replay.body != first.body || replay.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %v %s", replay.status, replay.header, replay.body)
	}
	if r := mustPost(t, p.url, "k1", `{"amount_cents": 1, "currency": "EUR", "customer_id": "cus_1"}`); r.status != 422 {
		t.Fatalf("reused key: %d %s", r.status, r.body)
	}
	if r := mustPost(t, p.url, "", order); r.status != 400 {
		t.Fatalf("no key: %d %s", r.status, r.body)
	}
	req, _ := http.NewRequest("GET", p.url+"/orders?customer_id=cus_1", nil)
	authorize(req, "acct_1")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.Count(string(b), `"id"`) != 1 {
		t.Fatalf("list: %d %s", resp.StatusCode, b)
	}
	// Tokens are ORDERS_AUTH_SECRET's: the demo secret's is another
	// account's as far as the server can tell, and no token is no account.
	for auth, want := range map[string]int{"Bearer " + server.Token("", "acct_1"): 403, "": 401} {
		req.Header.Set("Authorization", auth)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("list with Authorization %q: %d %s, want %d", auth, resp.StatusCode, b, want)
		}
	}

	// SIGTERM stops it cleanly.
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, p.log())
	}
}

// -token prints an account's token under ORDERS_AUTH_SECRET, or the demo
// secret without it, and -h says how to use it.
func TestTokenFlag(t *testing.T) {
	t.Parallel()
	bin := build(t)
	for secret, want := range map[string]string{testSecret: server.Token(testSecret, "acct_1"), "": server.Token(server.DemoSecret, "acct_1")} {
		cmd := exec.Command(bin, "-token", "acct_1")
		cmd.Env = append(cmd.Environ(), "ORDERS_AUTH_SECRET="+secret)
		out, err := cmd.Output()
		if err != nil || string(out) != want+"\n" {
			t.Errorf("-token acct_1 with ORDERS_AUTH_SECRET=%q: %q, %v; want %q", secret, out, err, want)
		}
	}
	help, _ := exec.Command(bin, "-h").CombinedOutput()
	for _, want := range []string{"-token", "ORDERS_AUTH_SECRET", "Authorization: Bearer"} {
		if !strings.Contains(string(help), want) {
			t.Errorf("-h does not mention %s:\n%s", want, help)
		}
	}
}

// With its replay filter's Redis down from the start, the server answers
// as without one, and logs the outage once, in its own log: go-redis's
// lines about each failed dial are kept out of the server's output.
func TestServerWithRedisDown(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := l.Addr().String() // nothing listens there once closed
	l.Close()
	bin := build(t)
	p := start(t, bin, pgtest.NewDatabase(t), "-redis-url", "redis://"+down+"/0")

	first := mustPost(t, p.url, "k1", order)
	if first.status != 201 {
		t.Fatalf("first: %d %s", first.status, first.body)
	}
	for i := range 3 {
		r := mustPost(t, p.url, "k1", order)
		if r.status != 201 || r.body != first.body || r.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replay %d: %d %v %s", i, r.status, r.header, r.body)
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
	<-p.eof
	logs := p.log()
	for line := range strings.Lines(logs) {
		if !strings.HasPrefix(line, "time=") {
			t.Errorf("a line outside the server's log: %q", line)
		}
	}
	if n := strings.Count(logs, "redisfilter: Redis failed"); n != 1 {
		t.Errorf("the filter's outage was logged %d times, want once:\n%s", n, logs)
	}
}

// The server dies while createOrder runs, its order inserted but not
// committed. The claim dies with its transaction: a retry on a new server
// runs once, and the result replays byte for byte.
func TestCrashMidHandlerRunsOnceOnRetry(t *testing.T) {
	t.Parallel()
	bin := build(t)
	dbURL := pgtest.NewDatabase(t)
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	p1 := start(t, bin, dbURL, "-work-delay", "1h")
	go post(p1.url, "k1", order) // answered by the crash, not by the server

	// Wait until the attempt holds its claim; a duplicate sent before
	// could claim the key first and run for the hour.
	waitClaimed(t, pool, p1)
	if r := mustPost(t, p1.url, "k1", order); r.status != 409 {
		t.Fatalf("duplicate while the first runs: %d %s", r.status, r.body)
	}

	if err := p1.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	p1.cmd.Wait()

	p2 := start(t, bin, dbURL)
	r := retryWhileHeld(t, p2.url, "k1", order)
	if r.status != 201 || r.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("retry after the crash: %d %v %s", r.status, r.header, r.body)
	}
	if n := count(t, pool, `SELECT count(*) FROM orders`); n != 1 {
		t.Fatalf("%d orders after crash and retry, want 1", n)
	}
	for range 2 {
		again := mustPost(t, p2.url, "k1", order)
		if again.status != 201 || again.body != r.body || again.header.Get("Location") != r.header.Get("Location") {
			t.Fatalf("replay differs: %d %s, want %s", again.status, again.body, r.body)
		}
	}
}

// pay sends createPayment for orderID.
func pay(url, key, orderID string, amount int) (reply, error) {
	req, err := http.NewRequest("POST", url+"/payments", strings.NewReader(fmt.Sprintf(`{"order_id": %q, "amount_cents": %d}`, orderID, amount)))
	if err != nil {
		return reply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	authorize(req, "acct_1")
	req.Header.Set("Idempotency-Key", key)
	resp, err := client.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, string(b)}, err
}

// newOrder creates an order through the server at url.
func newOrder(t *testing.T, url string) string {
	t.Helper()
	r := mustPost(t, url, "order-"+t.Name(), order)
	var o struct {
		ID string `json:"id"`
	}
	if r.status != 201 || json.Unmarshal([]byte(r.body), &o) != nil {
		t.Fatalf("create order: %d %s", r.status, r.body)
	}
	return o.ID
}

// retryPayment retries like a client told 409 and Retry-After: until the
// key's lease has passed and a takeover answers.
func retryPayment(t *testing.T, url, key, orderID string) reply {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		r, err := pay(url, key, orderID, 1250)
		if err != nil {
			t.Fatal(err)
		}
		if r.status != 409 {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("still 409 after a minute: %s", r.body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// killedBy checks that the server process died from the crash flag's
// SIGKILL, not from anything else.
func killedBy(t *testing.T, p *proc) {
	t.Helper()
	err := p.cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("server ended with %v, want killed by SIGKILL:\n%s", err, p.log())
	}
	if !strings.Contains(p.log(), "crashing on purpose") {
		t.Fatalf("server died before its crash point:\n%s", p.log())
	}
}

// For each crash point, the first server dies there in the middle of a
// payment; a second server, on the same database and payment provider,
// answers the client's retry. Whatever the point, the provider charged
// once, there is one payment, and every later replay repeats the 201.
func TestCrashDuringPaymentChargesOnce(t *testing.T) {
	t.Parallel()
	bin := build(t)
	for _, tc := range []struct {
		at       string
		requests int  // charge requests the provider sees in all
		replayed bool // whether the retry is answered from the store
	}{
		{orders.CrashAfterClaim, 1, false},
		{orders.CrashAfterCharge, 2, false},
		{orders.CrashBeforeResponse, 1, true},
	} {
		t.Run(tc.at, func(t *testing.T) {
			t.Parallel()
			dbURL := pgtest.NewDatabase(t)
			fake := psp.NewFake()
			provider := httptest.NewServer(fake)
			t.Cleanup(provider.Close)
			pool, err := pgxpool.New(context.Background(), dbURL)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()

			p1 := start(t, bin, dbURL, "-psp-url", provider.URL, "-crash-at", tc.at)
			orderID := newOrder(t, p1.url)
			if _, err := pay(p1.url, "pay-1", orderID, 1250); err == nil {
				t.Fatal("the payment was answered; the server should have died first")
			}
			killedBy(t, p1)

			p2 := start(t, bin, dbURL, "-psp-url", provider.URL)
			r := retryPayment(t, p2.url, "pay-1", orderID)
			replayed := r.header.Get("Idempotent-Replayed") == "true"
			if r.status != 201 || replayed != tc.replayed {
				t.Fatalf("retry after the crash: %d (replayed %v) %s", r.status, replayed, r.body)
			}
			if s := fake.Stats(); s.Charges != 1 || s.Requests != tc.requests {
				t.Fatalf("provider saw %+v, want %d request(s) and exactly 1 charge", s, tc.requests)
			}
			if n := count(t, pool, `SELECT count(*) FROM payments WHERE status = 'succeeded'`); n != 1 {
				t.Fatalf("%d succeeded payments, want 1", n)
			}
			for range 2 {
				again, err := pay(p2.url, "pay-1", orderID, 1250)
				if err != nil {
					t.Fatal(err)
				}
				if again.status != 201 || again.body != r.body || again.header.Get("Idempotent-Replayed") != "true" {
					t.Fatalf("replay differs: %d %s, want %s", again.status, again.body, r.body)
				}
			}
		})
	}
}

// createPayment stages a send_receipt River job in its last phase, on
// the phase's transaction (the outbox): whether the server dies after the
// charge (the retry runs the last phase, and stages it), after the job
// was staged and before the phase committed (the job rolls back with it,
// and the retry stages it again), or after the response was stored (the
// retry replays it), a payment that succeeded has its receipt job once,
// and a declined one has none.
func TestStagedJobOncePerPayment(t *testing.T) {
	t.Parallel()
	bin := build(t)
	for _, at := range []string{orders.CrashAfterCharge, orders.CrashAfterReceipt, orders.CrashBeforeResponse} {
		t.Run(at, func(t *testing.T) {
			t.Parallel()
			dbURL := pgtest.NewDatabase(t)
			provider := httptest.NewServer(psp.NewFake())
			t.Cleanup(provider.Close)
			pool, err := pgxpool.New(context.Background(), dbURL)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()

			p1 := start(t, bin, dbURL, "-psp-url", provider.URL, "-crash-at", at)
			orderID := newOrder(t, p1.url)
			if _, err := pay(p1.url, "pay-1", orderID, 1250); err == nil {
				t.Fatal("the payment was answered; the server should have died first")
			}
			killedBy(t, p1)
			p2 := start(t, bin, dbURL, "-psp-url", provider.URL)
			r := retryPayment(t, p2.url, "pay-1", orderID)
			if r.status != 201 {
				t.Fatalf("retry after the crash: %d %s", r.status, r.body)
			}
			for range 2 {
				if again, err := pay(p2.url, "pay-1", orderID, 1250); err != nil || again.status != 201 {
					t.Fatalf("replay: %v %d", err, again.status)
				}
			}
			declined, err := pay(p2.url, "pay-2", orderID, int(psp.DeclineAmount))
			if err != nil || declined.status != 402 {
				t.Fatalf("declined payment: %v %d %s", err, declined.status, declined.body)
			}
			var paid struct{ ID string }
			if err := json.Unmarshal([]byte(r.body), &paid); err != nil || paid.ID == "" {
				t.Fatalf("payment body %s: %v", r.body, err)
			}
			if n := count(t, pool, `SELECT count(*) FROM river_job WHERE kind = 'send_receipt' AND args->>'payment_id' = '`+paid.ID+`'`); n != 1 {
				t.Errorf("%d send_receipt jobs for the payment, want 1", n)
			}
			if n := count(t, pool, `SELECT count(*) FROM river_job WHERE kind = 'send_receipt'`); n != 1 {
				t.Errorf("%d send_receipt jobs in all, want the paid one's alone: a declined payment stages none", n)
			}
		})
	}
}

// Two servers receive retries of the same abandoned payment at the same
// moment, once its lease has passed: exactly one takes it over and runs
// the unfinished phase, and the provider charges once.
func TestTwoServersTakeOverOnce(t *testing.T) {
	t.Parallel()
	bin := build(t)
	dbURL := pgtest.NewDatabase(t)
	fake := psp.NewFake()
	provider := httptest.NewServer(fake)
	defer provider.Close()
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	p1 := start(t, bin, dbURL, "-psp-url", provider.URL, "-crash-at", orders.CrashAfterCharge)
	orderID := newOrder(t, p1.url)
	if _, err := pay(p1.url, "pay-1", orderID, 1250); err == nil {
		t.Fatal("the payment was answered; the server should have died first")
	}
	killedBy(t, p1)
	servers := []*proc{start(t, bin, dbURL, "-psp-url", provider.URL), start(t, bin, dbURL, "-psp-url", provider.URL)}

	// Wait until the dead attempt's lease has passed, so that the retries
	// below all find it abandoned.
	deadline := time.Now().Add(60 * time.Second)
	for count(t, pool, `SELECT count(*) FROM idempotency_keys WHERE key = 'pay-1' AND locked_until <= now()`) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the crashed attempt's lease never passed")
		}
		time.Sleep(50 * time.Millisecond)
	}
	const each = 8
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		answers = map[int]int{}
		bodies  = map[string]bool{}
		errs    []error
		fire    = make(chan struct{})
	)
	for i := range 2 * each {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-fire
			r, err := pay(servers[i%2].url, "pay-1", orderID, 1250)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			answers[r.status]++
			if r.status == 201 {
				bodies[r.body] = true
			}
		}()
	}
	close(fire)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if answers[201]+answers[409] != 2*each || len(bodies) > 1 {
		t.Fatalf("answers %v with %d distinct 201 bodies; want only 201s of one payment and 409s", answers, len(bodies))
	}
	final := retryPayment(t, servers[0].url, "pay-1", orderID)
	if final.status != 201 {
		t.Fatalf("final answer %d %s", final.status, final.body)
	}
	takeovers := 0
	for _, p := range servers {
		takeovers += strings.Count(p.log(), "took over an abandoned attempt")
	}
	if takeovers != 1 {
		t.Fatalf("%d takeovers logged by the two servers, want 1", takeovers)
	}
	if s := fake.Stats(); s.Charges != 1 || s.Requests != 2 {
		t.Fatalf("provider saw %+v, want 2 requests (the crashed one and the takeover) and 1 charge", s)
	}
	if n := count(t, pool, `SELECT count(*) FROM payments`); n != 1 {
		t.Fatalf("%d payments, want 1", n)
	}
}

// retryWhileHeld posts body with key as a client does after a crash: until
// PostgreSQL has noticed the dead connection and rolled its attempt back,
// the key is still held, and the client retries on 409 as told, for up to
// 30s.
func retryWhileHeld(t *testing.T, url, key, body string) reply {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := mustPost(t, url, key, body)
		if r.status != 409 || time.Now().After(deadline) {
			return r
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A payment whose server dies after the charge, and whose client never
// retries, is finished by the completer of the next server: the provider
// charged once, the payment succeeded once, and the stored 201 is what the
// client's late retry gets, replayed.
func TestCompleterFinishesCrashedPayment(t *testing.T) {
	t.Parallel()
	bin := build(t)
	dbURL := pgtest.NewDatabase(t)
	fake := psp.NewFake()
	provider := httptest.NewServer(fake)
	defer provider.Close()
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	p1 := start(t, bin, dbURL, "-psp-url", provider.URL, "-crash-at", orders.CrashAfterCharge)
	orderID := newOrder(t, p1.url)
	if _, err := pay(p1.url, "pay-1", orderID, 1250); err == nil {
		t.Fatal("the payment was answered; the server should have died first")
	}
	killedBy(t, p1)

	// No client retries. The next server's completer takes the payment
	// over once its lease (5s) has passed.
	p2 := start(t, bin, dbURL, "-psp-url", provider.URL, "-complete-after", "1ms", "-completer-interval", "100ms")
	deadline := time.Now().Add(time.Minute)
	for count(t, pool, `SELECT count(*) FROM idempotency_keys WHERE operation = 'createPayment' AND status = 'completed'`) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the completer did not finish the payment in a minute:\n%s", p2.log())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if s := fake.Stats(); s.Charges != 1 {
		t.Fatalf("provider saw %+v, want exactly 1 charge", s)
	}
	if n := count(t, pool, `SELECT count(*) FROM payments WHERE status = 'succeeded'`); n != 1 {
		t.Fatalf("%d succeeded payments, want 1", n)
	}
	if n := count(t, pool, `SELECT count(*) FROM idempotency_keys WHERE operation = 'createPayment' AND response_status = 201 AND request IS NULL`); n != 1 {
		t.Fatalf("%d stored 201s, want 1, its kept request let go", n)
	}
	if !strings.Contains(p2.log(), "completer: finished an abandoned attempt") {
		t.Errorf("the completer's work is not in the log:\n%s", p2.log())
	}
	r, err := pay(p2.url, "pay-1", orderID, 1250)
	if err != nil {
		t.Fatal(err)
	}
	if r.status != 201 || r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the client's late retry: %d (replayed %q) %s, want the stored 201", r.status, r.header.Get("Idempotent-Replayed"), r.body)
	}
	if s := fake.Stats(); s.Charges != 1 {
		t.Fatalf("after the retry the provider saw %+v, want still 1 charge", s)
	}
}
