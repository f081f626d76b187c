package main_test

// Fault tests: a steady load with duplicate requests runs against the
// server binary while PostgreSQL restarts, while its connections are
// terminated, and while the server itself is killed. Afterwards nothing may
// be lost: no key ran twice, every 201 replays its bytes, no key is left in
// flight, and the outage was answered with 503 and Retry-After, never 500.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgen/idemgen/example/psp"
	"github.com/idemgen/idemgen/internal/pglocal"
	"github.com/idemgen/idemgen/internal/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

const (
	faultClients  = 8
	orderKeys     = 120
	paymentKeys   = 40
	faultDeadline = 90 * time.Second
)

// job is one key the load must get a final answer for.
type job struct {
	key     string
	payment bool
	group   int // the clients that send it: those with client%groups == group
}

// load sends every job's request until it is answered, from faultClients
// goroutines, each job from two of them at once.
type load struct {
	t      *testing.T
	url    atomic.Pointer[string]
	jobs   []job
	orders []string // by group: the order payments pay for

	done     atomic.Int64  // requests answered or failed, for timing the fault
	finished chan struct{} // closed when every job has its final answer

	mu         sync.Mutex
	final      map[string]reply
	statuses   map[int]int
	transport  int
	noRetry503 int
}

const groups = faultClients / 2

func newLoad(t *testing.T, url string) *load {
	l := &load{t: t, final: map[string]reply{}, statuses: map[int]int{}, finished: make(chan struct{})}
	l.url.Store(&url)
	for g := range groups {
		r := mustPost(t, url, fmt.Sprintf("order-%s-%d", t.Name(), g), order)
		var o struct {
			ID string `json:"id"`
		}
		if r.status != 201 || json.Unmarshal([]byte(r.body), &o) != nil {
			t.Fatalf("create order: %d %s", r.status, r.body)
		}
		l.orders = append(l.orders, o.ID)
	}
	for i := range orderKeys + paymentKeys {
		l.jobs = append(l.jobs, job{key: fmt.Sprintf("%s-%d", t.Name(), i), payment: i >= orderKeys, group: i % groups})
	}
	return l
}

// start drives the load in the background until every job has its final
// answer, then closes l.finished.
func (l *load) start() {
	go func() {
		defer close(l.finished)
		l.run()
	}()
}

func (l *load) run() {
	var wg sync.WaitGroup
	for c := range faultClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, j := range l.jobs {
				if j.group == c%groups {
					l.settle(j)
				}
			}
		}()
	}
	wg.Wait()
}

// settle sends j's request until it gets a final answer: 409 and 503 are
// retried after a short pause, as a client told Retry-After would, and so
// are transport errors while the server is down.
func (l *load) settle(j job) {
	deadline := time.Now().Add(faultDeadline)
	for time.Now().Before(deadline) {
		url := *l.url.Load()
		var (
			r   reply
			err error
		)
		if j.payment {
			r, err = pay(url, j.key, l.orders[j.group], 1250)
		} else {
			// The key is the customer, so orders per customer count the
			// executions of each key.
			r, err = post(url, j.key, `{"amount_cents": 1250, "currency": "EUR", "customer_id": "`+j.key+`"}`)
		}
		l.done.Add(1)
		l.mu.Lock()
		switch {
		case err != nil:
			l.transport++
		default:
			l.statuses[r.status]++
			if r.status == 503 && r.header.Get("Retry-After") == "" {
				l.noRetry503++
			}
		}
		l.mu.Unlock()
		if err == nil && r.status != 409 && r.status != 503 {
			l.mu.Lock()
			if _, seen := l.final[j.key]; !seen || r.header.Get("Idempotent-Replayed") == "" {
				l.final[j.key] = r
			}
			l.mu.Unlock()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	l.mu.Lock()
	l.final[j.key] = reply{status: -1}
	l.mu.Unlock()
}

// after waits until the load has made n more requests; it fails the test
// if the load ends first.
func (l *load) after(n int64) {
	l.t.Helper()
	target := l.done.Load() + n
	l.until(func() bool { return l.done.Load() >= target }, fmt.Sprintf("%d more requests", n))
}

// until polls cond until it holds; it fails the test if the load ends
// or a minute passes first.
func (l *load) until(cond func() bool, what string) {
	l.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		select {
		case <-l.finished:
			l.t.Fatalf("the load ended before %s", what)
		default:
		}
		if time.Now().After(deadline) {
			l.t.Fatalf("no %s within a minute", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// wait waits for the load to end.
func (l *load) wait() {
	l.t.Helper()
	select {
	case <-l.finished:
	case <-time.After(2 * faultDeadline):
		l.t.Fatal("the load did not end")
	}
}

// failures counts the requests the outage answered so far.
func (l *load) failures() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.statuses[503] + l.transport
}

// check asserts that nothing was lost, against the database at pool and
// the provider fake, asking the server at the load's current URL for
// replays.
func (l *load) check(pool *pgxpool.Pool, fake *psp.Fake) {
	t := l.t
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	t.Logf("statuses %v, transport errors %d", l.statuses, l.transport)
	if l.statuses[500] > 0 {
		t.Errorf("%d requests got 500; an outage must answer 503", l.statuses[500])
	}
	if l.noRetry503 > 0 {
		t.Errorf("%d 503 answers without Retry-After", l.noRetry503)
	}
	if l.statuses[503]+l.transport == 0 {
		t.Errorf("no request saw the fault: the test tested nothing")
	}
	ctx := context.Background()
	created := map[bool]int{}
	for _, j := range l.jobs {
		r := l.final[j.key]
		if r.status != 201 {
			t.Errorf("%s: final answer %d %s, want 201", j.key, r.status, r.body)
			continue
		}
		created[j.payment]++
		var again reply
		var err error
		if j.payment {
			again, err = pay(*l.url.Load(), j.key, l.orders[j.group], 1250)
		} else {
			again, err = post(*l.url.Load(), j.key, `{"amount_cents": 1250, "currency": "EUR", "customer_id": "`+j.key+`"}`)
		}
		if err != nil || again.status != 201 || again.body != r.body || again.header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("%s: replay %d %q, want the 201 %q replayed", j.key, again.status, again.body, r.body)
		}
	}
	var twice, orders int
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE n > 1), count(*) FROM (SELECT count(*) AS n FROM orders WHERE customer_id LIKE $1 GROUP BY customer_id) AS o`, l.t.Name()+"-%").Scan(&twice, &orders); err != nil {
		t.Fatal(err)
	}
	if twice > 0 || orders != created[false] {
		t.Errorf("%d keys made more than one order; %d keys made orders, %d got 201", twice, orders, created[false])
	}
	var payments int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM payments`).Scan(&payments); err != nil {
		t.Fatal(err)
	}
	if s := fake.Stats(); s.Charges != created[true] || payments != created[true] {
		t.Errorf("%d payment keys got 201, with %d payment rows and %d charges at the provider (%+v); want them equal", created[true], payments, s.Charges, s)
	}
	var inFlight int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM idempotency_keys WHERE status = 'in_flight'`).Scan(&inFlight); err != nil {
		t.Fatal(err)
	}
	if inFlight > 0 {
		t.Errorf("%d keys still in flight after every request was answered", inFlight)
	}
}

// checker names the test's own connections, which it does not terminate.
const checker = "fault-test"

// faultEnv is a server on a database, a provider fake, and a pool for
// checking the database.
type faultEnv struct {
	bin, dbURL  string
	fake        *psp.Fake
	providerURL string
	pool        *pgxpool.Pool
}

func newFaultEnv(t *testing.T, bin, dbURL string) *faultEnv {
	fake := psp.NewFake()
	provider := httptest.NewServer(fake)
	t.Cleanup(provider.Close)
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = checker
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return &faultEnv{bin: bin, dbURL: dbURL, fake: fake, providerURL: provider.URL, pool: pool}
}

func (e *faultEnv) start(t *testing.T) *proc {
	return start(t, e.bin, e.dbURL, "-psp-url", e.providerURL)
}

// PostgreSQL stops (fast shutdown, as for a restart) in the middle of the
// load and starts again once requests have seen it down.
func TestFaultDatabaseRestart(t *testing.T) {
	t.Parallel()
	bin := build(t)
	cluster, err := pglocal.Start(context.Background(), pglocal.Options{ForceCluster: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cluster.Close() })
	dbURL := createDatabase(t, cluster.URL, "faults")
	e := newFaultEnv(t, bin, dbURL)
	p := e.start(t)
	l := newLoad(t, p.url)
	l.start()

	l.after(100)
	if err := cluster.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Down until the load has met the outage.
	l.until(func() bool { return l.failures() >= 20 }, "20 failed requests")
	if err := cluster.Resume(context.Background()); err != nil {
		t.Fatal(err)
	}
	l.wait()
	e.pool.Reset() // its connections died with the restart
	l.check(e.pool, e.fake)
	if t.Failed() {
		t.Logf("server log:\n%s", p.log())
	}
}

// The server's database connections are terminated, three times, under
// load.
func TestFaultConnectionsTerminated(t *testing.T) {
	t.Parallel()
	bin := build(t)
	e := newFaultEnv(t, bin, pgtest.NewDatabase(t))
	p := e.start(t)
	l := newLoad(t, p.url)
	l.start()

	terminated := 0
	for range 3 {
		l.after(60)
		var n int
		err := e.pool.QueryRow(context.Background(),
			`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name <> $1`, checker).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		terminated += n
	}
	l.wait()
	if terminated == 0 {
		t.Fatal("no server connection was terminated")
	}
	l.check(e.pool, e.fake)
	if t.Failed() {
		t.Logf("server log:\n%s", p.log())
	}
}

// The server is killed under load; a new one takes over on the same
// database, and the clients follow it.
func TestFaultServerKilled(t *testing.T) {
	t.Parallel()
	bin := build(t)
	e := newFaultEnv(t, bin, pgtest.NewDatabase(t))
	p1 := e.start(t)
	l := newLoad(t, p1.url)
	l.start()

	l.after(150)
	if err := p1.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	p1.cmd.Wait()
	l.until(func() bool { return l.failures() >= 5 }, "5 failed requests")
	p2 := e.start(t)
	l.url.Store(&p2.url)
	l.wait()
	l.check(e.pool, e.fake)
	if t.Failed() {
		t.Logf("new server's log:\n%s", p2.log())
	}
}

// createDatabase creates a database on the server at adminURL and returns
// its URL.
func createDatabase(t *testing.T, adminURL, name string) string {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), adminURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	cfg, err := pgx.ParseConfig(adminURL)
	if err != nil {
		t.Fatal(err)
	}
	return "postgres://" + cfg.User + "@" + cfg.Host + ":" + strconv.Itoa(int(cfg.Port)) + "/" + name + "?sslmode=disable"
}
