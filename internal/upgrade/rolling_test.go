package upgrade

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/internal/pgtest"
	"github.com/jackc/pgx/v5/pgxpool"
)

const (
	// rollingClients send requests at once, each to a random server.
	rollingClients = 6
	// rollingAnswers is how many final answers the clients get before the
	// rollback; the schedule's steps happen at fractions of it.
	rollingAnswers = 4000
	// Each client draws a key among keyWindow of its account and
	// operation, so duplicates and concurrent duplicates happen; the
	// window moves on by one key every keyStep final answers, so new keys
	// keep running for the first time all along.
	keyWindow = 4
	keyStep   = 40
	// requestTimeout only protects against a hang: a server that does not
	// answer within it is a failure.
	requestTimeout = 20 * time.Second
	// waitingAfter is how long a use retries before other clients pass
	// its key over.
	waitingAfter = 25 * time.Millisecond
	// seedEnv sets the seed of the run's schedule.
	seedEnv = "IDEMGEN_UPGRADE_SEED"
)

var rollingAccounts = []string{"acct_a", "acct_b", "acct_c"}

// The previous release serves a new database, then the current one
// joins it after migrating it while the previous one serves; servers of
// both are killed and replaced at random points, expired keys are reaped
// by both releases' idemgen and used again, and the run ends with a
// rollback to the previous release, which replays every key. Clients
// retry each request until a final answer, as told to. The invariants
// are checked on every answer the clients got and on the database.
func TestRollingUpgrade(t *testing.T) {
	prev, cur := releases(t)
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(seedEnv); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("%s=%q is not a seed: %v", seedEnv, s, err)
		}
	}
	t.Logf("seed %d (%s=%d repeats this run's schedule)", seed, seedEnv, seed)
	rng := rand.New(rand.NewPCG(seed, 0))

	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dbURL := pgtest.NewDatabase(t)
	db, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r := &rolling{
		c:        newCluster(t, dbURL),
		client:   newClient(t),
		releases: map[string]release{prev.name: prev, cur.name: cur},
		history:  map[genID][]answer{},
		keys:     map[keyID]*poolKey{},
		kills:    map[string]int{},
		restarts: map[string]int{},
		progress: make(chan struct{}, 1),
	}
	if err := r.c.startPSP(ctx, cur); err != nil {
		t.Fatal(err)
	}
	// Two servers of the previous release migrate the new database (to
	// its newest migration, 0008) at once.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() { errs[i] = r.startServer(ctx, prev) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}

	// The clients, until the rollback.
	var stop atomic.Bool
	clientErrs := make(chan error, rollingClients)
	var clients sync.WaitGroup
	for i := range rollingClients {
		rng := rand.New(rand.NewPCG(seed, uint64(i)+1))
		clients.Go(func() {
			for !stop.Load() {
				if _, _, err := r.use(ctx, rng, r.draw(rng)); err != nil {
					clientErrs <- err
					return
				}
			}
		})
	}
	stopClients := func() {
		stop.Store(true)
		clients.Wait()
		close(clientErrs)
		for err := range clientErrs {
			t.Fatalf("a client gave up: %v", err)
		}
	}
	defer func() {
		cancel() // a failed test's clients stop at once
		clients.Wait()
	}()

	// The schedule: answers after which each step runs; the kills at
	// random points of their span.
	at := func(from, to float64) int64 {
		lo, hi := int64(from*rollingAnswers), int64(to*rollingAnswers)
		return lo + rng.Int64N(hi-lo)
	}
	fixed := func(f float64) int64 { return int64(f * rollingAnswers) }
	var expired []*poolKey
	var reaped []string // what each idemgen reap said
	schedule := []struct {
		at   int64
		what string
		do   func() error
	}{
		{at(0.10, 0.30), "kill a server", func() error { return r.killOne(ctx, rng, "") }},
		{fixed(0.35), "migrate up with the current release, the previous one serving", func() error {
			out, _, err := tool(ctx, cur, dbURL, "migrate", "up")
			if err == nil && !strings.Contains(out, "applied 0009_derived_by_default") {
				err = fmt.Errorf("%s idemgen migrate up printed:\n%s\nwant it to apply 0009_derived_by_default", cur.name, out)
			}
			return err
		}},
		// The previous release restarts on the database migrated to 0009.
		{at(0.38, 0.48), "kill a server of the previous release", func() error { return r.killOne(ctx, rng, prev.name) }},
		{fixed(0.50), "start two servers of the current release", func() error {
			return errors.Join(r.startServer(ctx, cur), r.startServer(ctx, cur))
		}},
		{at(0.55, 0.65), "kill a server", func() error { return r.killOne(ctx, rng, "") }},
		{fixed(0.70), "expire keys, reap them with both releases' idemgen, and use them again", func() error {
			for _, reaper := range []release{prev, cur} {
				ks, summary, err := r.expireAndReap(ctx, rng, db, dbURL, reaper)
				if err != nil {
					return err
				}
				expired = append(expired, ks...)
				reaped = append(reaped, fmt.Sprintf("%s: %s", reaper.name, summary))
			}
			return nil
		}},
		{at(0.75, 0.95), "kill a server", func() error { return r.killOne(ctx, rng, "") }},
	}
	for _, step := range schedule {
		r.waitAnswered(ctx, t, step.at)
		n, began := r.answered.Load(), time.Now()
		if err := step.do(); err != nil {
			t.Fatalf("after %d answers, %s: %v", n, step.what, err)
		}
		t.Logf("after %d answers (at %v): %s (took %v)", n, began.Sub(start).Round(time.Millisecond), step.what, time.Since(began).Round(time.Millisecond))
	}
	t.Logf("the reapers said: %s", strings.Join(reaped, "; "))
	r.waitAnswered(ctx, t, rollingAnswers)
	stopClients()
	t.Logf("after %d answers (%v): the clients stopped, each with a final answer", r.answered.Load(), time.Since(start).Round(time.Millisecond))

	// The rollback: the current release's servers go, its migrations are
	// rolled back, and a restarted server of the previous release replays
	// every key's last generation.
	for _, p := range r.liveOf(cur.name) {
		r.kill(p)
	}
	out, _, err := tool(ctx, cur, dbURL, "migrate", "down", "-to", strconv.Itoa(PreviousMigration))
	for _, name := range newerMigrations(t) {
		if err == nil && !strings.Contains(out, "rolled back "+name) {
			err = fmt.Errorf("it printed:\n%s\nwant it to roll back %s", out, name)
		}
	}
	if err != nil {
		t.Fatalf("rollback: %s idemgen migrate down -to %d: %v", cur.name, PreviousMigration, err)
	}
	old := r.liveOf(prev.name)
	r.kill(old[rng.IntN(len(old))])
	last, err := r.c.startServer(ctx, prev)
	if err != nil {
		t.Fatalf("rollback: the previous release does not start again: %v", err)
	}
	r.mu.Lock()
	r.restarts[prev.name]++
	r.mu.Unlock()
	// Every key's last generation, replayed by a few clients at once.
	var (
		replayMu    sync.Mutex
		notReplayed []string
		replayErrs  []error
		replayers   sync.WaitGroup
		next        atomic.Int64
	)
	all := r.allKeys()
	for range 4 {
		replayers.Go(func() {
			for i := int(next.Add(1) - 1); i < len(all); i = int(next.Add(1) - 1) {
				k := all[i]
				g := genID{k.id, k.epoch}
				a, err := post(ctx, r.client, last, k.path(), k.id.account, k.id.key, k.body(k.epoch, k.orderID))
				replayMu.Lock()
				if err != nil {
					replayErrs = append(replayErrs, fmt.Errorf("%v: %w", g, err))
				} else if !a.replayed {
					notReplayed = append(notReplayed, fmt.Sprintf("%v: %v", g, a))
				}
				replayMu.Unlock()
				if err == nil {
					r.record(g, a)
				}
			}
		})
	}
	replayers.Wait()
	if err := errors.Join(replayErrs...); err != nil {
		t.Fatalf("rollback: replaying through %s: %v", last.name, err)
	}
	slices.Sort(notReplayed)
	t.Logf("after the clients (%v): rolled back to migration 0008 and replayed the %d keys through %s", time.Since(start).Round(time.Millisecond), len(all), last.name)
	if len(notReplayed) > 0 {
		t.Errorf("after the rollback, %s did not replay %d key(s), each the same request as its stored answer's:\n\t%s",
			last.name, len(notReplayed), strings.Join(notReplayed, "\n\t"))
	}

	stats, err := r.c.pspStats(ctx, r.client)
	if err != nil {
		t.Fatal(err)
	}
	r.check(ctx, t, db, expired, stats)
	r.summary(t, expired, stats, time.Since(start))
}

// Operations, as the key store names them.
const (
	opOrder   = "createOrder"
	opPayment = "createPayment"
)

// keyID is an idempotency key: (scope, operation, key).
type keyID struct{ account, op, key string }

// genID is one generation of a key: epoch counts the times the test
// expired it. Each epoch of a createOrder key sends another customer, so
// its order is told apart in the database.
type genID struct {
	keyID
	epoch int
}

func (g genID) String() string {
	return fmt.Sprintf("%s %s key %q epoch %d", g.account, g.op, g.key, g.epoch)
}

// poolKey is a key the clients draw.
type poolKey struct {
	id     keyID
	amount int
	// order is the key of the order a createPayment key pays; orderID,
	// set under orderMu by the key's first use, is that order's id.
	order   *poolKey
	orderMu sync.Mutex
	orderID string
	// mu is held shared by each use of the key until its final answer,
	// and exclusively while the test expires the key and moves it to its
	// next epoch.
	mu    sync.RWMutex
	epoch int
	// waiting counts the uses retrying for longer than waitingAfter, such
	// as behind the lease of an attempt whose server was killed; other
	// clients draw another key meanwhile.
	waiting atomic.Int32
}

func (k *poolKey) path() string {
	if k.id.op == opPayment {
		return "/payments"
	}
	return "/orders"
}

// body is the key's request in epoch: the same for each use in one.
func (k *poolKey) body(epoch int, orderID string) string {
	if k.id.op == opPayment {
		return paymentBody(orderID, k.amount)
	}
	return orderBody(k.amount, customer(genID{k.id, epoch}))
}

// customer is the customer_id of a createOrder generation's order.
func customer(g genID) string {
	return fmt.Sprintf("cus_%s_%s_e%d", g.account, g.key, g.epoch)
}

// rolling is the state of a TestRollingUpgrade run.
type rolling struct {
	c        *cluster
	client   *http.Client
	releases map[string]release

	keysMu sync.Mutex
	keys   map[keyID]*poolKey
	order  []*poolKey // keys, in the order they were first drawn

	answered atomic.Int64  // final answers
	progress chan struct{} // a final answer arrived

	mu         sync.Mutex
	live       []*proc // the servers requests go to
	history    map[genID][]answer
	sent       int
	connErrors int
	hangs      []string
	kills      map[string]int // per release
	restarts   map[string]int // per release
}

// key is the n-th key of account and op, made on first use. The n-th
// createPayment key pays an order of its own, the n-th "payorder" key's.
func (r *rolling) key(account, op string, n int) *poolKey {
	r.keysMu.Lock()
	defer r.keysMu.Unlock()
	return r.keyLocked(account, op, n, "")
}

func (r *rolling) keyLocked(account, op string, n int, prefix string) *poolKey {
	if prefix == "" {
		prefix = map[string]string{opOrder: "order", opPayment: "pay"}[op]
	}
	id := keyID{account, op, fmt.Sprintf("%s-%d", prefix, n)}
	if k, ok := r.keys[id]; ok {
		return k
	}
	k := &poolKey{id: id}
	switch {
	case op == opPayment:
		// Never the provider's declined amount (psp.DeclineAmount).
		k.amount = 2000 + 10*(n%50)
		k.order = r.keyLocked(account, opOrder, n, "payorder")
	case prefix == "payorder":
		k.amount = 500 + 10*(n%50)
	default:
		k.amount = 1000 + 10*(n%50)
	}
	r.keys[id] = k
	r.order = append(r.order, k)
	return k
}

// draw picks a client's next key: a random account, createOrder twice as
// often as createPayment, a key of the window. It passes over keys whose
// uses have waited for long, so the others keep the traffic going.
func (r *rolling) draw(rng *rand.Rand) *poolKey {
	for try := 0; ; try++ {
		account := rollingAccounts[rng.IntN(len(rollingAccounts))]
		op := opOrder
		if rng.IntN(3) == 0 {
			op = opPayment
		}
		k := r.key(account, op, int(r.answered.Load()/keyStep)+rng.IntN(keyWindow))
		if k.waiting.Load() == 0 || try == 10 {
			return k
		}
	}
}

// allKeys lists every key drawn so far.
func (r *rolling) allKeys() []*poolKey {
	r.keysMu.Lock()
	defer r.keysMu.Unlock()
	return slices.Clone(r.order)
}

func (r *rolling) startServer(ctx context.Context, rel release) error {
	p, err := r.c.startServer(ctx, rel)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.live = append(r.live, p)
	return nil
}

// liveOf lists the live servers of a release.
func (r *rolling) liveOf(rel string) []*proc {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ps []*proc
	for _, p := range r.live {
		if rel == "" || p.release == rel {
			ps = append(ps, p)
		}
	}
	return ps
}

// kill takes p out of the live servers and kills it with SIGKILL.
func (r *rolling) kill(p *proc) {
	r.mu.Lock()
	r.live = slices.DeleteFunc(r.live, func(q *proc) bool { return q == p })
	r.kills[p.release]++
	r.mu.Unlock()
	p.kill()
}

// killOne kills a random live server of rel ("": of either release),
// mid-traffic, and starts another of the same release.
func (r *rolling) killOne(ctx context.Context, rng *rand.Rand, rel string) error {
	ps := r.liveOf(rel)
	if len(ps) == 0 {
		return fmt.Errorf("no live server of %q to kill", rel)
	}
	p := ps[rng.IntN(len(ps))]
	r.kill(p)
	if err := r.startServer(ctx, r.releases[p.release]); err != nil {
		return fmt.Errorf("killed %s; its replacement: %w", p.name, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.restarts[p.release]++
	return nil
}

// pick is a random live server, or nil while there is none.
func (r *rolling) pick(rng *rand.Rand) *proc {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.live) == 0 {
		return nil
	}
	return r.live[rng.IntN(len(r.live))]
}

func (r *rolling) record(g genID, a answer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.history[g] = append(r.history[g], a)
}

// completed reports whether a generation has been answered 201.
func (r *rolling) completed(g genID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.history[g], func(a answer) bool { return a.status == http.StatusCreated })
}

// use sends the key's request of its current epoch to random live
// servers, as a client does: again, with the same key and body, after a
// connection error, a 409 or a 5xx, until a final answer.
func (r *rolling) use(ctx context.Context, rng *rand.Rand, k *poolKey) (genID, answer, error) {
	var orderID string
	if k.order != nil {
		var err error
		if orderID, err = r.orderOf(ctx, rng, k); err != nil {
			return genID{k.id, 0}, answer{}, err
		}
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	g := genID{k.id, k.epoch}
	body := k.body(k.epoch, orderID)
	began, waiting := time.Now(), false
	defer func() {
		if waiting {
			k.waiting.Add(-1)
		}
	}()
	for try := 0; ; try++ {
		if try > 0 && !waiting && time.Since(began) > waitingAfter {
			waiting = true
			k.waiting.Add(1)
		}
		if try > 0 {
			d := min(2*time.Millisecond<<min(try, 6), 100*time.Millisecond)
			select {
			case <-time.After(d/2 + time.Duration(rng.Int64N(int64(d/2)+1))):
			case <-ctx.Done():
			}
		}
		if err := ctx.Err(); err != nil {
			return g, answer{}, fmt.Errorf("%v: no final answer after %d tries: %w", g, try, err)
		}
		p := r.pick(rng)
		if p == nil {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, requestTimeout)
		a, err := post(rctx, r.client, p, k.path(), g.account, g.key, body)
		cancel()
		r.mu.Lock()
		r.sent++
		if err != nil && ctx.Err() == nil {
			r.connErrors++
			if errors.Is(err, context.DeadlineExceeded) {
				r.hangs = append(r.hangs, fmt.Sprintf("%v: %s did not answer within %v", g, p.name, requestTimeout))
			}
		}
		r.mu.Unlock()
		if err != nil {
			continue
		}
		r.record(g, a)
		if a.status == http.StatusConflict || a.status >= 500 {
			continue
		}
		r.answered.Add(1)
		select {
		case r.progress <- struct{}{}:
		default:
		}
		return g, a, nil
	}
}

// orderOf returns the id of the order a createPayment key pays, creating
// it, idempotently, on the key's first use.
func (r *rolling) orderOf(ctx context.Context, rng *rand.Rand, k *poolKey) (string, error) {
	k.orderMu.Lock()
	defer k.orderMu.Unlock()
	if k.orderID == "" {
		g, a, err := r.use(ctx, rng, k.order)
		if err != nil {
			return "", err
		}
		if a.status != http.StatusCreated {
			return "", fmt.Errorf("%v, the order a payment pays, was answered %v", g, a)
		}
		k.orderID = idOf(a.body)
	}
	return k.orderID, nil
}

// waitAnswered waits until the clients have had n final answers.
func (r *rolling) waitAnswered(ctx context.Context, t *testing.T, n int64) {
	t.Helper()
	for r.answered.Load() < n {
		select {
		case <-r.progress:
		case <-ctx.Done():
			t.Fatalf("the clients got %d final answers, and not %d: %v", r.answered.Load(), n, ctx.Err())
		}
	}
}

// expireAndReap picks two createOrder keys and a createPayment key among
// the latest the clients drew, whose current generation has completed,
// makes their TTL pass, runs rel's `idemgen reap`, and moves them to
// their next epoch. Then it uses each again: a new generation, which the
// clients may be sending too.
func (r *rolling) expireAndReap(ctx context.Context, rng *rand.Rand, db *pgxpool.Pool, dbURL string, rel release) (expired []*poolKey, summary string, err error) {
	keys := r.allKeys()
	keys = keys[max(0, len(keys)-120):]
	want := map[string]int{opOrder: 2, opPayment: 1}
	var picked []*poolKey
	for _, i := range rng.Perm(len(keys)) {
		k := keys[i]
		if want[k.id.op] == 0 || strings.HasPrefix(k.id.key, "payorder-") {
			continue
		}
		// Held, no request of this key is in flight. A key in use is
		// passed over: it may wait for a dead server's lease.
		if !k.mu.TryLock() {
			continue
		}
		// Each key once: the other reaper's keys are not picked again.
		if k.epoch > 0 || !r.completed(genID{k.id, k.epoch}) {
			k.mu.Unlock()
			continue
		}
		want[k.id.op]--
		picked = append(picked, k)
	}
	defer func() {
		for _, k := range picked {
			k.mu.Unlock()
		}
	}()
	if want[opOrder]+want[opPayment] > 0 {
		return nil, "", fmt.Errorf("too few completed keys to expire: %d createOrder and %d createPayment short", want[opOrder], want[opPayment])
	}
	var names []string
	for _, k := range picked {
		tag, err := db.Exec(ctx, `UPDATE idempotency_keys SET expires_at = now() - interval '1 second'
			WHERE scope = $1 AND operation = $2 AND key = $3 AND status = 'completed'`, k.id.account, k.id.op, k.id.key)
		if err != nil {
			return nil, "", err
		}
		if tag.RowsAffected() != 1 {
			return nil, "", fmt.Errorf("%v has no completed row to expire, although it was answered 201", genID{k.id, k.epoch})
		}
		names = append(names, k.id.account+"/"+k.id.key)
	}
	_, summary, err = tool(ctx, rel, dbURL, "reap")
	if err != nil {
		return nil, "", err
	}
	// The servers' janitors reap too, and the reaper skips the rows
	// another one holds: wait until none of the keys is completed.
	for {
		var n int
		if err := db.QueryRow(ctx, `SELECT count(*) FROM idempotency_keys k, unnest($1::text[], $2::text[], $3::text[]) AS e(scope, operation, key)
			WHERE k.scope = e.scope AND k.operation = e.operation AND k.key = e.key AND k.status = 'completed'`,
			fieldOf(picked, func(id keyID) string { return id.account }),
			fieldOf(picked, func(id keyID) string { return id.op }),
			fieldOf(picked, func(id keyID) string { return id.key })).Scan(&n); err != nil {
			return nil, "", err
		}
		if n == 0 {
			break
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
			return nil, "", fmt.Errorf("%d of the expired keys %v are still completed after %s idemgen reap (%s)", n, names, rel.name, strings.TrimSpace(summary))
		}
	}
	for _, k := range picked {
		k.epoch++
	}
	for _, k := range picked {
		k.mu.Unlock()
	}
	expired, picked = picked, nil
	var errs []error
	for _, k := range expired {
		g, a, err := r.use(ctx, rng, k)
		if err == nil && a.status != http.StatusCreated {
			err = fmt.Errorf("the first use of %v after it expired was answered %v", g, a)
		}
		errs = append(errs, err)
	}
	// The last line is the command's summary; those before, its log.
	lines := strings.Split(strings.TrimSpace(summary), "\n")
	return expired, lines[len(lines)-1], errors.Join(errs...)
}

func fieldOf(keys []*poolKey, f func(keyID) string) []string {
	var out []string
	for _, k := range keys {
		out = append(out, f(k.id))
	}
	return out
}

// check verifies the invariants on every answer and on the database,
// reporting each broken one with its key and the answers that broke it.
func (r *rolling) check(ctx context.Context, t *testing.T, db *pgxpool.Pool, expired []*poolKey, stats pspStats) {
	t.Helper()
	keys := r.allKeys()
	r.mu.Lock()
	defer r.mu.Unlock()
	gens := slices.SortedFunc(maps.Keys(r.history), func(a, b genID) int {
		return strings.Compare(a.String(), b.String())
	})
	list := func(as []answer) string {
		var b strings.Builder
		for _, a := range as {
			fmt.Fprintf(&b, "\n\t\t%v", a)
		}
		return b.String()
	}
	first := map[genID]answer{} // each generation's first 201
	for _, g := range gens {
		as := r.history[g]
		var created, fresh, bad []answer
		for _, a := range as {
			switch {
			case a.status == http.StatusCreated:
				created = append(created, a)
				if !a.replayed {
					fresh = append(fresh, a)
				}
			case a.status == http.StatusConflict:
			case a.status == http.StatusServiceUnavailable && (a.problemType == idem.TypeStoreUnavailable || a.problemType == idem.TypeStoreBusy):
			default:
				bad = append(bad, a)
			}
		}
		if len(bad) > 0 {
			t.Errorf("%v: a request matching its key's body was answered other than 201, 409 or a 503 of the store (%s, %s):%s",
				g, idem.TypeStoreUnavailable, idem.TypeStoreBusy, list(bad))
		}
		if len(created) == 0 {
			t.Errorf("%v: never answered 201; its answers:%s", g, list(as))
			continue
		}
		first[g] = created[0]
		for _, a := range created[1:] {
			if a.body != created[0].body || a.location != created[0].location {
				t.Errorf("%v: the 201s of one generation differ; the first and the one that differs:%s", g, list([]answer{created[0], a}))
				break
			}
		}
		if len(fresh) > 1 {
			t.Errorf("%v: %d answers were not replays: it ran more than once:%s", g, len(fresh), list(fresh))
		}
	}
	for _, k := range keys {
		if g := (genID{k.id, k.epoch}); len(r.history[g]) == 0 {
			t.Errorf("%v: drawn, and never answered", g)
		}
	}
	// A new generation is a new execution: another order or payment.
	for _, g := range gens {
		if g.epoch == 0 {
			continue
		}
		before, now := first[genID{g.keyID, g.epoch - 1}], first[g]
		if now.status != 0 && before.status != 0 && idOf(now.body) == idOf(before.body) {
			t.Errorf("%v: after its key expired it replayed the previous generation's %s instead of running again:%s",
				g, idOf(now.body), list([]answer{before, now}))
		}
	}

	// Each createOrder generation answered 201 has exactly its one order;
	// no order exists that no 201 announced.
	type custKey struct{ account, customer string }
	orders := map[custKey][]string{}
	rows, err := db.Query(ctx, `SELECT id, account_id, customer_id FROM orders ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var k custKey
		if err := rows.Scan(&id, &k.account, &k.customer); err != nil {
			t.Fatal(err)
		}
		orders[k] = append(orders[k], id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	announced := map[custKey]bool{}
	for _, g := range gens {
		a, ok := first[g]
		if g.op != opOrder || !ok {
			continue
		}
		k := custKey{g.account, customer(g)}
		announced[k] = true
		if ids := orders[k]; len(ids) != 1 || ids[0] != idOf(a.body) {
			t.Errorf("%v: the orders table holds %v for it, want exactly the order of its 201 (%s):%s", g, ids, idOf(a.body), list(r.history[g]))
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(orders), func(a, b custKey) int { return strings.Compare(a.account+a.customer, b.account+b.customer) }) {
		if !announced[k] {
			t.Errorf("orders %v of account %s, customer %s, were never announced by a 201", orders[k], k.account, k.customer)
		}
	}

	// Each createPayment generation answered 201 has its one payment,
	// charged once, of the order its key pays; no other payment exists.
	type paymentRow struct{ id, status, charge string }
	payments := map[string][]paymentRow{} // by order
	total := 0
	rows, err = db.Query(ctx, `SELECT id, order_id, status, coalesce(charge_id, '') FROM payments ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var p paymentRow
		var order string
		if err := rows.Scan(&p.id, &order, &p.status, &p.charge); err != nil {
			t.Fatal(err)
		}
		payments[order] = append(payments[order], p)
		total++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if k.id.op != opPayment {
			continue
		}
		var want []string
		for e := 0; e <= k.epoch; e++ {
			if a, ok := first[genID{k.id, e}]; ok {
				want = append(want, idOf(a.body))
			}
		}
		got := payments[k.orderID]
		charges := map[string]bool{}
		for _, p := range got {
			if p.status != "succeeded" || p.charge == "" || charges[p.charge] {
				t.Errorf("%s %s key %q: payment %s is %s with charge %q; want each succeeded, with a charge of its own (all: %v)",
					k.id.account, k.id.op, k.id.key, p.id, p.status, p.charge, got)
			}
			charges[p.charge] = true
		}
		var ids []string
		for _, p := range got {
			ids = append(ids, p.id)
		}
		slices.Sort(ids)
		slices.Sort(want)
		if !slices.Equal(ids, want) {
			t.Errorf("%s %s key %q: order %s has payments %v, want one per generation, those its 201s announced: %v",
				k.id.account, k.id.op, k.id.key, k.orderID, ids, want)
		}
	}
	if stats.Charges != total || stats.Declines != 0 {
		t.Errorf("the provider made %d charges and %d declines (%d requests) for %d payments: want one charge per payment", stats.Charges, stats.Declines, stats.Requests, total)
	}
	for _, h := range r.hangs {
		t.Errorf("a hang: %s", h)
	}
	for _, k := range expired {
		if k.epoch == 0 {
			t.Errorf("%v was expired but never used again", k.id)
		}
	}
}

// summary logs what the run did.
func (r *rolling) summary(t *testing.T, expired []*poolKey, stats pspStats, took time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	statuses := map[int]int{}
	byRelease := map[string]int{}
	replays, crossRelease := 0, 0
	for _, as := range r.history {
		rels := map[string]bool{}
		for _, a := range as {
			statuses[a.status]++
			byRelease[a.release]++
			if a.replayed {
				replays++
			}
			if a.status == http.StatusCreated {
				rels[a.release] = true
			}
		}
		if len(rels) > 1 {
			crossRelease++
		}
	}
	var names []string
	for _, k := range expired {
		names = append(names, fmt.Sprintf("%s/%s/%s", k.id.account, k.id.op, k.id.key))
	}
	t.Logf("in %v: the clients sent %d requests (%d without an answer: the server died); answers, the rollback's replays included, by status %v, by release %v; %d replays; "+
		"%d of %d generations answered 201 by both releases; kills (the rollback's included) %v, restarts %v; keys expired and used again: %s; provider: %+v",
		took.Round(time.Millisecond), r.sent, r.connErrors, statuses, byRelease, replays,
		crossRelease, len(r.history), r.kills, r.restarts, strings.Join(names, ", "), stats)
}
