package pgstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/pgstore"
	"github.com/idemgen/idemgen/idem/redisfilter"
	"github.com/idemgen/idemgen/idem/storetest"
	"github.com/idemgen/idemgen/internal/redistest"
)

// filtered is a store with a Redis replay filter, an engine on it, and
// what they did: the statements sent to PostgreSQL, each request's
// outcome and filter result, and the handler's runs.
type filtered struct {
	t      *testing.T
	rdb    *redis.Client
	prefix string
	pool   *pgxpool.Pool
	store  *pgstore.Store
	engine *idem.Engine[pgx.Tx]
	trace  *statements
	seen   *outcomes
	runs   atomic.Int64
	op     *idem.Operation
}

func newFiltered(t *testing.T, rdb *redis.Client, prefix string, opts redisfilter.Options) *filtered {
	t.Helper()
	f := &filtered{t: t, rdb: rdb, prefix: prefix, trace: &statements{}, seen: &outcomes{},
		op: &idem.Operation{Name: "createOrder", TTL: time.Hour, Lease: time.Minute, ScopeHeader: "X-Account"}}
	pool := newPool(t, f.trace)
	f.pool = pool
	opts.Prefix = prefix
	if opts.Timeout == 0 {
		// The tests count fills and hits, which a call that times out on
		// a loaded machine would lose; the ones about a slow Redis set
		// their own.
		opts.Timeout = 10 * time.Second
	}
	cache, err := redisfilter.New(rdb, opts)
	if err != nil {
		t.Fatal(err)
	}
	f.store = pgstore.New(pool, pgstore.Options{ReplayCache: cache})
	f.engine = idem.NewEngine(f.store, idem.Options{Tracer: f.seen})
	t.Cleanup(func() { f.clear() })
	return f
}

// clear removes the test's keys from a shared Redis.
func (f *filtered) clear() {
	ctx := context.Background()
	keys, _ := f.rdb.Keys(ctx, f.prefix+"*").Result()
	if len(keys) > 0 {
		_ = f.rdb.Del(ctx, keys...).Err()
	}
}

// serve sends key with fingerprint fp in scope, and returns the response
// and what the tracer saw of it.
func (f *filtered) serve(scope, key, fp string) (*idem.Response, idem.TraceRequestEndData) {
	f.t.Helper()
	r := httptest.NewRequest("POST", "/orders", nil)
	r.Header.Set(idem.HeaderKey, key)
	r.Header.Set("X-Account", scope)
	var end idem.TraceRequestEndData
	ctx := idem.WithRequest(context.WithValue(context.Background(), endKey{}, &end), r)
	resp, err := f.engine.Serve(ctx, f.op, []byte(fp), func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (idem.Writer, error) {
		n := f.runs.Add(1)
		return func(w http.ResponseWriter) error {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Run", fmt.Sprint(n))
			w.WriteHeader(201)
			_, err := fmt.Fprintf(w, `{"key":%q,"scope":%q,"fp":%q,"run":%d}`, key, scope, fp, n)
			return err
		}, nil
	})
	if err != nil {
		f.t.Fatalf("serve %s/%s: %v", scope, key, err)
	}
	if end.Outcome == 0 {
		f.t.Fatalf("serve %s/%s: the tracer saw no end", scope, key)
	}
	return resp, end
}

// entries are the filter's keys in Redis.
func (f *filtered) entries() []string {
	f.t.Helper()
	keys, err := f.rdb.Keys(context.Background(), f.prefix+"*").Result()
	if err != nil {
		f.t.Fatal(err)
	}
	return keys
}

func sameResponse(a, b *idem.Response) bool {
	return a.Status == b.Status && bytes.Equal(a.Body, b.Body) && a.Header.Get("X-Run") == b.Header.Get("X-Run")
}

// TestRedisFilterReplays: the first replay reads PostgreSQL and fills the
// filter, the next ones are answered from Redis without a statement, with
// the same response, for no longer than the key's TTL; another tenant's
// use of the same key is its own.
func TestRedisFilterReplays(t *testing.T) {
	rdb, prefix := redistest.Client(t)
	f := newFiltered(t, rdb, prefix, redisfilter.Options{})

	first, end := f.serve("a", "k1", "fp")
	if end.Outcome != idem.OutcomeFirst || end.Filter != idem.FilterMiss {
		t.Fatalf("first: outcome %s, filter %s", end.Outcome, end.Filter)
	}
	f.trace.take()
	replay, end := f.serve("a", "k1", "fp")
	if end.Outcome != idem.OutcomeReplay || end.Filter != idem.FilterMiss || !sameResponse(first, replay) {
		t.Fatalf("first replay: outcome %s, filter %s, %s", end.Outcome, end.Filter, replay.Body)
	}
	if got := f.trace.take(); len(got) != 1 {
		t.Fatalf("first replay: statements %v, want the lookup alone", got)
	}
	keys := f.entries()
	if len(keys) != 1 {
		t.Fatalf("Redis holds %v, want one entry", keys)
	}
	ttl, err := rdb.PTTL(context.Background(), keys[0]).Result()
	if err != nil || ttl <= 0 || ttl > f.op.TTL-time.Second {
		t.Fatalf("entry's TTL %s (%v), want within the key's %s less a second", ttl, err, f.op.TTL)
	}

	for i := range 3 {
		again, end := f.serve("a", "k1", "fp")
		if end.Outcome != idem.OutcomeReplay || end.Filter != idem.FilterHit || !again.Replayed || !sameResponse(first, again) {
			t.Fatalf("replay %d: outcome %s, filter %s, replayed %v, %s", i, end.Outcome, end.Filter, again.Replayed, again.Body)
		}
		if again.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("replay %d: headers %v", i, again.Header)
		}
		if got := f.trace.take(); len(got) != 0 {
			t.Fatalf("replay %d from Redis sent %v to PostgreSQL", i, got)
		}
	}

	// The same key in another scope is another key.
	other, end := f.serve("b", "k1", "fp")
	if end.Outcome != idem.OutcomeFirst || bytes.Equal(other.Body, first.Body) {
		t.Fatalf("tenant b: outcome %s, body %s", end.Outcome, other.Body)
	}
	if n := f.runs.Load(); n != 2 {
		t.Fatalf("handler ran %d times, want 2", n)
	}
}

// TestRedisNeverDecides: whatever Redis holds, the answer is the one
// PostgreSQL gives. An altered entry, another key's entry, an entry for
// another request, and an entry whose key was forgotten are all misses.
func TestRedisNeverDecides(t *testing.T) {
	t.Parallel() // waits out leases and timeouts: beside the other waiting tests
	ctx := context.Background()
	rdb, prefix := redistest.Client(t)
	f := newFiltered(t, rdb, prefix, redisfilter.Options{})
	fill := func(key string) (*idem.Response, string) {
		t.Helper()
		before := map[string]bool{}
		for _, k := range f.entries() {
			before[k] = true
		}
		first, _ := f.serve("a", key, "fp")
		f.serve("a", key, "fp") // fills
		for _, k := range f.entries() {
			if !before[k] {
				return first, k
			}
		}
		t.Fatalf("no entry for %s", key)
		return nil, ""
	}
	k1, slot1 := fill("k1")
	k2, slot2 := fill("k2")
	// want sends key with fp and wants PostgreSQL's answer: outcome, with
	// resp's bytes when given, and no hit.
	want := func(name, key, fp string, outcome idem.Outcome, resp *idem.Response) {
		t.Helper()
		got, end := f.serve("a", key, fp)
		if end.Outcome != outcome || end.Filter == idem.FilterHit || (resp != nil && !sameResponse(got, resp)) {
			t.Errorf("%s: outcome %s (want %s), filter %s, body %s", name, end.Outcome, outcome, end.Filter, got.Body)
		}
	}

	// Another request under k1 is PostgreSQL's 422, not a miss that runs.
	want("another request", "k1", "other", idem.OutcomeMismatch, nil)

	// An entry altered in Redis: its body changed, its MAC no longer holds.
	v, err := rdb.Get(ctx, slot1).Bytes()
	if err != nil {
		t.Fatal(err)
	}
	altered := bytes.Replace(v, []byte(`"run":1`), []byte(`"run":9`), 1)
	if bytes.Equal(altered, v) {
		altered = append(bytes.Clone(v[:len(v)-2]), '!', v[len(v)-1])
	}
	if err := rdb.Set(ctx, slot1, altered, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	want("altered entry", "k1", "fp", idem.OutcomeReplay, k1)

	// k2's entry, valid, copied into k1's slot: it names k2.
	v2, err := rdb.Get(ctx, slot2).Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, slot1, v2, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	want("another key's entry", "k1", "fp", idem.OutcomeReplay, k1)
	if got, end := f.serve("a", "k2", "fp"); end.Filter != idem.FilterHit || !sameResponse(got, k2) {
		t.Errorf("k2 itself: filter %s, body %s; want a hit with its own response", end.Filter, got.Body)
	}

	// Forgetting k2 removes it from both: the next use runs anew, and a
	// replay of the new run cannot put an entry back until the old one
	// would have expired, so no replay that read the forgotten row can.
	if _, err := f.store.ForgetKey(ctx, idem.ID{Scope: "a", Operation: "createOrder", Key: "k2"}, pgstore.ForgetOptions{}); err != nil {
		t.Fatal(err)
	}
	runs := f.runs.Load()
	again, end := f.serve("a", "k2", "fp")
	if end.Outcome != idem.OutcomeFirst || f.runs.Load() != runs+1 || sameResponse(again, k2) {
		t.Fatalf("after forget: outcome %s, filter %s, body %s", end.Outcome, end.Filter, again.Body)
	}
	want("replay after forget", "k2", "fp", idem.OutcomeReplay, again)
	// The previous release's servers read the entry without an epoch:
	// the forget left them a tombstone there.
	if v, err := rdb.Get(ctx, prefix+pgstore.FilterKey(idem.ID{Scope: "a", Operation: "createOrder", Key: "k2"})).Bytes(); err != nil || bytes.Contains(v, []byte(`"run"`)) {
		t.Fatalf("after forget, k2's epochless slot holds %q (%v), want the tombstone", v, err)
	}
}

// TestForgetWithoutFilterThenWithIt: a key forgotten through a store
// without the filter (keys forget without -redis-url) is still replayed
// from Redis; forgetting it again through the filter's store finds no row
// but drops the entry, and the next use runs anew.
func TestForgetWithoutFilterThenWithIt(t *testing.T) {
	t.Parallel() // waits out leases and timeouts: beside the other waiting tests
	ctx := context.Background()
	rdb, prefix := redistest.Client(t)
	f := newFiltered(t, rdb, prefix, redisfilter.Options{})
	id := idem.ID{Scope: "a", Operation: "createOrder", Key: "k1"}
	first, _ := f.serve("a", "k1", "fp")
	f.serve("a", "k1", "fp") // fills
	if len(f.entries()) != 1 {
		t.Fatalf("entries %v, want k1's", f.entries())
	}

	if _, err := pgstore.New(f.pool, pgstore.Options{}).ForgetKey(ctx, id, pgstore.ForgetOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, end := f.serve("a", "k1", "fp"); end.Filter != idem.FilterHit || !sameResponse(got, first) || f.runs.Load() != 1 {
		t.Fatalf("forgotten without the filter: filter %s, runs %d; want the entry still replayed", end.Filter, f.runs.Load())
	}

	if _, err := f.store.ForgetKey(ctx, id, pgstore.ForgetOptions{}); !errors.Is(err, pgstore.ErrKeyNotFound) || errors.Is(err, pgstore.ErrFilterForget) {
		t.Fatalf("forget again with the filter: %v; want only ErrKeyNotFound", err)
	}
	again, end := f.serve("a", "k1", "fp")
	if end.Outcome != idem.OutcomeFirst || end.Filter == idem.FilterHit || f.runs.Load() != 2 || sameResponse(again, first) {
		t.Fatalf("after the second forget: outcome %s, filter %s, runs %d; want a first execution", end.Outcome, end.Filter, f.runs.Load())
	}
	if got, end := f.serve("a", "k1", "fp"); end.Outcome != idem.OutcomeReplay || !sameResponse(got, again) {
		t.Fatalf("the new run's replay: outcome %s, body %s", end.Outcome, got.Body)
	}

	// With Redis unreachable, the not-found error says the entry stayed.
	down := newFiltered(t, redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true, MaxRetries: -1}), prefix, redisfilter.Options{})
	_, err := down.store.ForgetKey(ctx, idem.ID{Operation: "createOrder", Key: "never"}, pgstore.ForgetOptions{})
	if !errors.Is(err, pgstore.ErrKeyNotFound) || !errors.Is(err, pgstore.ErrFilterForget) {
		t.Fatalf("forget with Redis down: %v; want ErrKeyNotFound and ErrFilterForget", err)
	}
}

// TestForgetDerivedKeyWithFilter: a key whose attempts derived keys (a
// payment's) is emptied, not deleted, when forgotten; forgotten first
// without the filter, then with it, the second forget finds the row
// emptied already and must still drop the entry, which would otherwise
// replay the old answer for the rest of its TTL.
func TestForgetDerivedKeyWithFilter(t *testing.T) {
	t.Parallel() // waits out leases and timeouts: beside the other waiting tests
	ctx := context.Background()
	rdb, prefix := redistest.Client(t)
	f := newFiltered(t, rdb, prefix, redisfilter.Options{})
	id := idem.ID{Scope: "a", Operation: "createOrder", Key: "k1"}
	first, _ := f.serve("a", "k1", "fp")
	f.serve("a", "k1", "fp") // fills
	if len(f.entries()) != 1 {
		t.Fatalf("entries %v, want k1's", f.entries())
	}
	// As a phased attempt, or one that derived a key, leaves its row.
	if _, err := f.pool.Exec(ctx, `UPDATE idempotency_keys SET derived = true WHERE key = 'k1'`); err != nil {
		t.Fatal(err)
	}
	k, err := pgstore.New(f.pool, pgstore.Options{}).ForgetKey(ctx, id, pgstore.ForgetOptions{})
	if err != nil || !k.Derived {
		t.Fatalf("forget without the filter: %+v, %v", k, err)
	}
	if got, end := f.serve("a", "k1", "fp"); end.Filter != idem.FilterHit || !sameResponse(got, first) {
		t.Fatalf("forgotten without the filter: filter %s; want the entry still replayed", end.Filter)
	}
	if _, err := f.store.ForgetKey(ctx, id, pgstore.ForgetOptions{}); err != nil {
		t.Fatalf("forget the emptied key with the filter: %v", err)
	}
	again, end := f.serve("a", "k1", "fp")
	if end.Outcome != idem.OutcomeFirst || end.Filter == idem.FilterHit || f.runs.Load() != 2 || sameResponse(again, first) {
		t.Fatalf("after forgetting with the filter: outcome %s, filter %s, runs %d; want a first execution", end.Outcome, end.Filter, f.runs.Load())
	}
}

// TestRedisFilterReplaysPhased: a phased operation's key is 409 from
// PostgreSQL while its attempt runs, whatever the filter holds; once
// completed, its replays fill the filter and are answered from it, and
// another request under the key is PostgreSQL's 422. No phase runs again.
func TestRedisFilterReplaysPhased(t *testing.T) {
	rdb, prefix := redistest.Client(t)
	f := newFiltered(t, rdb, prefix, redisfilter.Options{})
	op := &idem.Operation{Name: "createPayment", TTL: time.Hour, Lease: time.Minute, RecoveryPoints: []string{"charged"}, ScopeHeader: "X-Account"}
	var phases atomic.Int64
	inPhase, release := make(chan struct{}), make(chan struct{})
	serve := func(fp string, hold bool) (*idem.Response, idem.TraceRequestEndData) {
		r := httptest.NewRequest("POST", "/payments", nil)
		r.Header.Set(idem.HeaderKey, "p1")
		r.Header.Set("X-Account", "a")
		var end idem.TraceRequestEndData
		ctx := idem.WithRequest(context.WithValue(context.Background(), endKey{}, &end), r)
		resp, err := f.engine.ServePhased(ctx, op, []byte(fp), func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (string, idem.Writer, error) {
			phases.Add(1)
			if at.RecoveryPoint() == "" {
				if hold {
					close(inPhase)
					<-release
				}
				return "charged", nil, nil
			}
			return "", func(w http.ResponseWriter) error {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(201)
				_, err := fmt.Fprintf(w, `{"payment":"p1","phases":%d}`, phases.Load())
				return err
			}, nil
		})
		if err != nil {
			t.Errorf("serve p1: %v", err)
		}
		return resp, end
	}

	type answer struct {
		resp *idem.Response
		end  idem.TraceRequestEndData
	}
	firstDone := make(chan answer, 1)
	go func() {
		resp, end := serve("fp", true)
		firstDone <- answer{resp, end}
	}()
	<-inPhase
	if _, end := serve("fp", false); end.Outcome != idem.OutcomeConflict || end.Filter == idem.FilterHit {
		t.Errorf("while the attempt runs: outcome %s, filter %s; want PostgreSQL's 409", end.Outcome, end.Filter)
	}
	close(release)
	first := <-firstDone
	if first.end.Outcome != idem.OutcomeFirst || first.resp.Status != 201 || phases.Load() != 2 {
		t.Fatalf("first: outcome %s, status %d, phases %d", first.end.Outcome, first.resp.Status, phases.Load())
	}

	if got, end := serve("fp", false); end.Outcome != idem.OutcomeReplay || end.Filter != idem.FilterMiss || !bytes.Equal(got.Body, first.resp.Body) {
		t.Fatalf("first replay: outcome %s, filter %s, body %s; want PostgreSQL's replay", end.Outcome, end.Filter, got.Body)
	}
	f.trace.take()
	got, end := serve("fp", false)
	if end.Outcome != idem.OutcomeReplay || end.Filter != idem.FilterHit || !bytes.Equal(got.Body, first.resp.Body) || got.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("second replay: outcome %s, filter %s, body %s; want the filter's replay of the first response", end.Outcome, end.Filter, got.Body)
	}
	if sent := f.trace.take(); len(sent) != 0 {
		t.Errorf("a replay from the filter sent %v to PostgreSQL", sent)
	}
	if _, end := serve("other", false); end.Outcome != idem.OutcomeMismatch || end.Filter == idem.FilterHit {
		t.Errorf("another request: outcome %s, filter %s; want PostgreSQL's 422", end.Outcome, end.Filter)
	}
	if phases.Load() != 2 {
		t.Errorf("%d phases ran, want the first attempt's 2", phases.Load())
	}
}

// TestRedisFilterSkipsLargeResponses: a response larger than the
// filter's MaxEntryBytes is never put in Redis, and its replays are
// PostgreSQL's; a smaller one is answered from Redis. The zero value's
// bound (64 KiB) holds too.
func TestRedisFilterSkipsLargeResponses(t *testing.T) {
	rdb, prefix := redistest.Client(t)
	for _, tc := range []struct {
		name      string
		max, size int
		filled    bool
	}{
		{"small, bound 4096", 4096, 1000, true},
		{"large, bound 4096", 4096, 5000, false},
		{"small, default bound", 0, 60 << 10, true},
		{"large, default bound", 0, 70 << 10, false},
		{"large, no bound", -1, 70 << 10, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFiltered(t, rdb, prefix, redisfilter.Options{MaxEntryBytes: tc.max})
			body := bytes.Repeat([]byte("x"), tc.size)
			runs := 0
			serve := func() (*idem.Response, idem.TraceRequestEndData) {
				t.Helper()
				r := httptest.NewRequest("POST", "/exports", nil)
				r.Header.Set(idem.HeaderKey, "e1")
				r.Header.Set("X-Account", "a")
				var end idem.TraceRequestEndData
				ctx := idem.WithRequest(context.WithValue(context.Background(), endKey{}, &end), r)
				resp, err := f.engine.Serve(ctx, f.op, []byte("fp"), func(context.Context, *idem.Attempt[pgx.Tx]) (idem.Writer, error) {
					runs++
					return func(w http.ResponseWriter) error { _, err := w.Write(body); return err }, nil
				})
				if err != nil {
					t.Fatal(err)
				}
				return resp, end
			}
			serve()
			for i := range 3 {
				resp, end := serve()
				wantFilter := idem.FilterMiss
				if tc.filled && i > 0 {
					wantFilter = idem.FilterHit
				}
				if end.Outcome != idem.OutcomeReplay || end.Filter != wantFilter || !bytes.Equal(resp.Body, body) || runs != 1 {
					t.Fatalf("replay %d: outcome %s, filter %s (want %s), %d bytes, runs %d", i, end.Outcome, end.Filter, wantFilter, len(resp.Body), runs)
				}
			}
			if n := len(f.entries()); n != map[bool]int{true: 1, false: 0}[tc.filled] {
				t.Errorf("%d entries in Redis, filled %v", n, tc.filled)
			}
		})
	}
}

// TestRedisDownFallsBack: with Redis killed mid-run, then paused (a
// server that stops answering), every request is answered as PostgreSQL
// decides, without an error, and each handler runs once.
func TestRedisDownFallsBack(t *testing.T) {
	t.Parallel() // waits out leases and timeouts: beside the other waiting tests
	srv := redistest.Start(t)
	f := newFiltered(t, srv.Client(t), "test:", redisfilter.Options{Timeout: 50 * time.Millisecond, Backoff: time.Nanosecond})

	const workers, perWorker, replayKeys = 6, 30, 4
	want := make([]*idem.Response, replayKeys)
	for i := range want {
		want[i], _ = f.serve("a", fmt.Sprint("replay", i), "fp")
		f.serve("a", fmt.Sprint("replay", i), "fp") // fills
	}
	var done atomic.Int64
	var stopOnce sync.Once
	var mu sync.Mutex
	results := map[idem.FilterResult]int{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				if done.Add(1) == workers*perWorker/3 {
					stopOnce.Do(srv.Stop) // Redis dies under the load
				}
				var end idem.TraceRequestEndData
				var resp *idem.Response
				switch i % 3 {
				case 0: // a first execution
					resp, end = f.serve("a", fmt.Sprintf("new-%d-%d", w, i), "fp")
					if end.Outcome != idem.OutcomeFirst || resp.Status != 201 {
						t.Errorf("first execution: outcome %s, status %d", end.Outcome, resp.Status)
					}
				case 1: // a replay
					k := (w + i) % replayKeys
					resp, end = f.serve("a", fmt.Sprint("replay", k), "fp")
					if end.Outcome != idem.OutcomeReplay || !sameResponse(resp, want[k]) {
						t.Errorf("replay: outcome %s, body %s, want %s", end.Outcome, resp.Body, want[k].Body)
					}
				default: // a 422
					resp, end = f.serve("a", fmt.Sprint("replay", (w+i)%replayKeys), "other")
					if end.Outcome != idem.OutcomeMismatch {
						t.Errorf("another request: outcome %s", end.Outcome)
					}
				}
				mu.Lock()
				results[end.Filter]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if n, want := f.runs.Load(), int64(replayKeys+workers*perWorker/3); n != want {
		t.Fatalf("handlers ran %d times, want %d: once per first execution", n, want)
	}
	if results[idem.FilterFailed] == 0 || results[idem.FilterHit] == 0 {
		t.Fatalf("filter results %v: want hits before Redis died and failures after", results)
	}
	t.Logf("filter results: %v", results)

	// A Redis that stops answering: each call waits its timeout, then
	// PostgreSQL answers.
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	// go-redis dials again on its own schedule after failed dials.
	deadline := time.Now().Add(10 * time.Second)
	for f.rdb.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			t.Fatal("the client did not reach the restarted Redis in 10s")
		}
		time.Sleep(10 * time.Millisecond) // polls the client's state
	}
	f.serve("a", "replay0", "fp") // fills the new, empty Redis
	if _, end := f.serve("a", "replay0", "fp"); end.Filter != idem.FilterHit {
		t.Fatalf("after Redis came back: filter %s, want a hit", end.Filter)
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Resume() }()
	resp, end := f.serve("a", "replay0", "fp")
	if end.Filter != idem.FilterFailed || end.Outcome != idem.OutcomeReplay || !sameResponse(resp, want[0]) {
		t.Fatalf("Redis paused: filter %s, outcome %s, body %s", end.Filter, end.Outcome, resp.Body)
	}
	resp, end = f.serve("a", "paused-new", "fp")
	if end.Filter != idem.FilterFailed || end.Outcome != idem.OutcomeFirst || resp.Status != 201 {
		t.Fatalf("Redis paused, first execution: filter %s, outcome %s", end.Filter, end.Outcome)
	}
}

// TestConformanceWithReplayFilter runs the store conformance suite on the
// store with a Redis replay filter: the same facts, and the same answer
// for every key state. A key made to expire loses its entry too, as time
// would take it, the entry's TTL being shorter than the key's.
func TestConformanceWithReplayFilter(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.Client(t)
	var added atomic.Int64
	storetest.Run(t, func(t *testing.T) storetest.Harness[pgx.Tx] {
		pool := newPool(t, nil)
		own := prefix + t.Name() + ":"
		cache, err := redisfilter.New(rdb, redisfilter.Options{Prefix: own, Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		store := pgstore.New(pool, pgstore.Options{ReplayCache: countingCache{cache, &added}})
		age := func(column string) func(t *testing.T, id idem.ID) {
			return func(t *testing.T, id idem.ID) {
				_, err := pool.Exec(context.Background(),
					`UPDATE idempotency_keys SET `+column+` = now() - interval '1 second' WHERE scope = $1 AND operation = $2 AND key = $3`,
					id.Scope, id.Operation, id.Key)
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		return storetest.Harness[pgx.Tx]{
			Store: store,
			Reap: func(t *testing.T) {
				if _, err := store.Reap(context.Background(), pgstore.ReapOptions{Logger: slog.New(slog.DiscardHandler)}); err != nil {
					t.Fatal(err)
				}
			},
			Expire: func(t *testing.T, id idem.ID) {
				age("expires_at")(t, id)
				// Its entries, under whatever epoch they were written.
				keys, err := rdb.Keys(context.Background(), own+pgstore.FilterKey(id)+"*").Result()
				if err == nil && len(keys) > 0 {
					err = rdb.Del(context.Background(), keys...).Err()
				}
				if err != nil {
					t.Fatal(err)
				}
			},
			ExpireLease: age("locked_until"),
		}
	})
	t.Cleanup(func() {
		keys, _ := rdb.Keys(context.Background(), prefix+"*").Result()
		if len(keys) > 0 {
			_ = rdb.Del(context.Background(), keys...).Err()
		}
		if added.Load() == 0 {
			t.Error("the suite added no entry to Redis: the filter was not tried")
		}
		t.Logf("%d entries added to Redis", added.Load())
	})
}

// countingCache counts the entries added.
type countingCache struct {
	pgstore.ReplayCache
	added *atomic.Int64
}

func (c countingCache) Add(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	c.added.Add(1)
	return c.ReplayCache.Add(ctx, key, value, ttl)
}

// TestReplayFilterAfterRedisRestore: Redis restored from a snapshot taken
// before a key was forgotten (or a failover to a replica that missed the
// writes since) brings back the forgotten use's entry, and loses the
// tombstone and the new use's entry: the answer is still the new use's,
// since correctness never depends on Redis keeping a write. So after
// every write is lost (FLUSHALL).
func TestReplayFilterAfterRedisRestore(t *testing.T) {
	t.Parallel() // waits out leases and timeouts: beside the other waiting tests
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	f := newFiltered(t, rdb, "test:", redisfilter.Options{})
	id := idem.ID{Scope: "a", Operation: "createOrder", Key: "k1"}
	gen1, _ := f.serve("a", "k1", "fp")
	f.serve("a", "k1", "fp") // fills
	if _, end := f.serve("a", "k1", "fp"); end.Filter != idem.FilterHit {
		t.Fatalf("before the snapshot: filter %s, want the entry answering", end.Filter)
	}
	snapshot := srv.Snapshot(t)

	if _, err := f.store.ForgetKey(ctx, id, pgstore.ForgetOptions{}); err != nil {
		t.Fatal(err)
	}
	gen2, end := f.serve("a", "k1", "fp")
	if end.Outcome != idem.OutcomeFirst || sameResponse(gen2, gen1) {
		t.Fatalf("after forget: outcome %s, body %s; want a first execution", end.Outcome, gen2.Body)
	}
	var hits int
	for range 5 {
		got, end := f.serve("a", "k1", "fp")
		if !sameResponse(got, gen2) {
			t.Fatalf("replay of the new use: %s, want %s", got.Body, gen2.Body)
		}
		if end.Filter == idem.FilterHit {
			hits++
		}
	}

	for _, loss := range []string{"restore", "flushall"} {
		switch loss {
		case "restore":
			if err := srv.RestartFrom(snapshot); err != nil {
				t.Fatal(err)
			}
			if n, err := rdb.Exists(ctx, f.entries()...).Result(); err != nil || n == 0 {
				t.Fatalf("the restored Redis holds %v (%v): the snapshot did not come back", f.entries(), err)
			}
		case "flushall":
			if err := rdb.FlushAll(ctx).Err(); err != nil {
				t.Fatal(err)
			}
		}
		for range 5 {
			got, end := f.serve("a", "k1", "fp")
			if end.Outcome != idem.OutcomeReplay || !sameResponse(got, gen2) {
				t.Fatalf("after %s: outcome %s, filter %s, body %s; want the new use's %s", loss, end.Outcome, end.Filter, got.Body, gen2.Body)
			}
		}
	}
	if f.runs.Load() != 2 {
		t.Fatalf("the handler ran %d times, want 2", f.runs.Load())
	}
	t.Logf("the new use's replays answered by Redis before the loss: %d of 5", hits)
}
