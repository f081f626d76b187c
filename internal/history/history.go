// Package history is a randomized history checker for the idempotency
// engine on any store: many clients send requests over a small key space,
// so that they collide all the time, with handler errors, panics, client
// cancels, killed connections and slow phases, while TTLs and leases pass
// and the reaper, the sweeper and, on a store that lists abandoned
// attempts, the completer run in between. With a job queue (Harness.Async,
// River's in WithRiver), requests of an async operation are accepted and
// run on workers that die mid-run now and then, and whose requests a
// rescuer takes over. Every answer, handler run and committed effect is
// recorded, and the whole history is then checked against the protocol's
// invariants (see History.Check).
//
// Each mechanism has its own tests; this is where their seams are proven.
package history

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgen/idemgen/idem"
)

// Effect is one committed write of a handler run: its use of a key, the
// phase it ran ("" for an atomic run or a first phase), and the token of
// the run, which its response carries.
type Effect struct {
	Scope, Operation, Key string
	Generation            int64
	Phase                 string
	Token                 string
}

// use names one use of a key: what at most one execution commits.
func use(scope, operation, key string, generation int64) string {
	return fmt.Sprintf("%s/%s/%s#%d", scope, operation, key, generation)
}

// Harness is the store under test and what the checker needs of it.
type Harness[T any] struct {
	Store idem.Store[T]
	// Tracer, when set, sees the engine's requests.
	Tracer idem.Tracer
	// Transactional stores commit a handler's writes with its attempt:
	// effects are written before the faults that follow them, so that
	// their rollback is checked too. Others get them written as the
	// handler returns its result.
	Transactional bool
	// Effect writes e so that it commits with the attempt, and Committed
	// lists the effects that did.
	Effect    func(ctx context.Context, at *idem.Attempt[T], e Effect) error
	Committed func(t testing.TB) []Effect
	// Kill, when set, ends the attempt's connection to the store, as a
	// crashed database backend or a cut network would.
	Kill func(ctx context.Context, at *idem.Attempt[T]) error
	// Statement, when set, runs a statement that fails in the attempt's
	// transaction and returns its error, as a handler's bad query would.
	Statement func(ctx context.Context, at *idem.Attempt[T]) error
	// Age makes a key's TTL pass, and AgeLease its lease.
	Age, AgeLease func(t testing.TB, id idem.ID)
	// Reap runs the TTL reaper; Sweep, when set, the lease sweeper, which
	// fails abandoned attempts.
	Reap, Sweep func(t testing.TB)
	// Migrate, when set, rolls the store's migrations since the previous
	// release back and applies them again, as a rollback and an upgrade
	// do while requests run.
	Migrate func(t testing.TB)
	// Stall, when set, makes the store stop answering for a while without
	// closing anything, as a network partition or a frozen host does, and
	// returns once it answers again; StoreTimeout is then the engine's
	// bound on waiting for it (idem.Options.StoreTimeout).
	Stall        func(t testing.TB, rng *rand.Rand)
	StoreTimeout time.Duration
	// Forget, when set, forgets a key as an operator's keys forget does,
	// returning once the forget is complete, and reports whether it
	// forgot it: a key an attempt holds, or one without a row, is left
	// alone.
	Forget func(t testing.TB, id idem.ID) bool
	// SnapshotCache and LoseCache, when set, take a snapshot of the replay
	// filter's cache, and make it lose writes: all it holds, or those
	// since the last snapshot, as a FLUSHALL, a restore from a backup or a
	// failover to a lagging replica does.
	SnapshotCache func(t testing.TB)
	LoseCache     func(t testing.TB, rng *rand.Rand)
	// Settle, when set, waits until what the disturbances left behind in
	// the store has gone by itself, such as the sessions a stall cut off,
	// which hold their keys until their lease passes.
	Settle func(t testing.TB)
	// Now is the store's clock; nil is time.Now.
	Now func() time.Time
	// After reports what the store still holds once every client is done
	// and every lease has passed, such as locks or connections left.
	After func(t testing.TB) []string
	// Send, when set, sends req another way than through an engine of
	// the checker's own, such as over HTTP to a generated handler whose
	// annotated operations run handle; Points then name the phased
	// operation's recovery points. Logger is the logger such a handler's
	// engine must use, for the checker to read its errors.
	Send   func(ctx context.Context, req Request, handle Handle[T]) Answer
	Points []string
	// Operations name the atomic and the phased operation, as Send serves
	// them and the store keeps their keys; zero is createOrder and
	// createPayment.
	Operations [2]string

	// Async, when set, adds an async operation (AsyncOperation) to the
	// requests: accepted with a job, run on the harness's workers, which
	// die as a disturbance. Only with the checker's own engine (no Send).
	Async *Async[T]

	// complete runs the completer once, when the checker has one.
	complete func(t testing.TB)
}

// AsyncOperation names the async operation of a harness with Async.
const AsyncOperation = "createExport"

// Async is what runs the async operation's accepted requests: workers
// of a job queue, in processes of their own.
type Async[T any] struct {
	// Enqueue inserts the job of an accepted request on its claim's
	// transaction.
	Enqueue idem.Enqueue[T]
	// Start starts the workers, which run each job with work. Each worker
	// has an engine of its own (a process's), made with work.Options.
	Start func(t testing.TB, work AsyncWork[T])
	// Rescue, when set, runs once what takes over the requests of workers
	// that died, once their lease has passed.
	Rescue func(t testing.TB)
	// Drain waits until no accepted request is left in flight, running
	// Rescue as it needs, and reports those left when its bound passes.
	Drain func(t testing.TB) []string
}

// AsyncWork is what the workers run: the operation, the engine's options,
// and the phases of a stored request. die kills the worker that runs
// them, where the request says to: its connection to the store is ended
// and the run never returns while the checker runs, as a process killed
// mid-run; die returns once the checker is done.
type AsyncWork[T any] struct {
	Operation *idem.Operation
	Options   idem.Options
	Phases    func(ctx context.Context, request []byte, die func(context.Context, *idem.Attempt[T])) (idem.PhaseFunc[T], error)
}

// Request is what a client sends: a key's use, and which of the key's two
// requests (Variant 0 or 1) it is, which its fingerprint tells apart.
type Request struct {
	ID      idem.ID
	Phased  bool
	Variant int
	// Async requests are stored with their key for the worker that runs
	// them, with what it does: the client and request that sent them,
	// the behaviour and the phase its fault strikes in.
	Async       bool   `json:",omitempty"`
	Client, Seq int    `json:",omitempty"`
	Behaviour   string `json:",omitempty"`
	FaultPhase  string `json:",omitempty"`
}

// Handle runs one handler invocation, an atomic attempt or one phase, and
// returns the token its response must carry.
type Handle[T any] func(ctx context.Context, at *idem.Attempt[T]) (token string, err error)

// Answer is what a client got: the status, the problem type's name (its
// URI without idem.ProblemBase; "handler-error" for the 500 of a handler's
// error or panic), whether it was a replay, the body, and the token the
// body carries. A client whose request was canceled got 499.
type Answer struct {
	Status   int
	Problem  string
	Replayed bool
	Body     []byte
	Token    string
}

// Logger returns a logger whose errors the history's check reads, for an
// engine the checker does not make itself (see Harness.Send).
func (hist *History) Logger() *slog.Logger { return slog.New(hist.logs) }

// Config sizes a run. The zero value is a short run.
type Config struct {
	Seed uint64
	// Clients send Requests each; defaults 6 and 60.
	Clients, Requests int
	// Lease of the operations; default 1s.
	Lease time.Duration
	// Slow adds handlers whose phases take 0.4 of the lease each, so that
	// an attempt of three phases outlives one lease.
	Slow bool
}

// FromEnv is the run asked for: seed when not 0, else IDEMGEN_HISTORY_SEED,
// else a random one; a long run (12 clients of 400 requests, slow phases)
// when long is set or IDEMGEN_HISTORY=long.
func FromEnv(seed uint64, long bool) (Config, error) {
	if s := os.Getenv("IDEMGEN_HISTORY_SEED"); seed == 0 && s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return Config{}, fmt.Errorf("IDEMGEN_HISTORY_SEED=%q: %w", s, err)
		}
		seed = n
	}
	if seed == 0 {
		seed = rand.Uint64()
	}
	cfg := Config{Seed: seed}
	if long || os.Getenv("IDEMGEN_HISTORY") == "long" {
		cfg.Clients, cfg.Requests, cfg.Slow = 12, 400, true
	}
	return cfg, nil
}

func (c Config) withDefaults() Config {
	if c.Clients <= 0 {
		c.Clients = 6
	}
	if c.Requests <= 0 {
		c.Requests = 60
	}
	if c.Lease <= 0 {
		c.Lease = time.Second
	}
	return c
}

// behaviour is what a request's handler does.
type behaviour string

const (
	succeed  behaviour = "succeed"
	fail     behaviour = "error"
	panicked behaviour = "panic"
	cancel   behaviour = "cancel" // the client hangs up while it runs
	kill     behaviour = "kill"   // its connection to the store is ended
	badSQL   behaviour = "bad-statement"
	slow     behaviour = "slow" // its phases take 0.4 of the lease each
	// Of async requests, on their workers: the worker dies mid-run; the
	// handler fails on every run, so that the job runs out of attempts.
	workerDies behaviour = "worker-dies"
	failAlways behaviour = "error-every-run"
)

// request is one request of the history and what came of it.
type request struct {
	client, seq int
	id          idem.ID
	phased      bool
	async       bool
	variant     int // which of the key's two requests: its fingerprint
	behaviour   behaviour
	faultPhase  string // the phase its fault strikes in
	start, end  time.Time
	status      int
	problem     string // the problem type's name, or "handler-error"
	replayed    bool
	body        []byte
	token       string
}

func (r *request) String() string {
	return fmt.Sprintf("client %d request %d (%s %s/%s variant %d, %s in phase %q) [%s, %s]: %d %s replayed=%v",
		r.client, r.seq, r.id.Operation, r.id.Scope, r.id.Key, r.variant, r.behaviour, r.faultPhase,
		r.start.Format("15:04:05.000"), r.end.Format("15:04:05.000"), r.status, r.problem, r.replayed)
}

// run is one run of a handler: an atomic attempt, or one phase.
type run struct {
	req        *request
	generation int64
	derived    string
	phase      string
	token      string
	start      time.Time
}

// History is the record of a run.
type History struct {
	cfg Config
	// perRequest is set when the checker's own engine derives keys per
	// request (idem.Options.DerivedKeysPerRequest), in half the runs by
	// their seed; its completer then derives the other way, and must
	// still derive as each use began.
	perRequest bool
	mu         sync.Mutex
	requests   []*request
	// completions are the completer's takeovers, as requests of client -1
	// whose span covers the completer's run: not answers to anyone, but
	// holders of their keys while they run.
	completions []*request
	// workerRuns are the async requests' runs on workers, as requests
	// whose span covers the run: holders of their keys while they run.
	workerRuns []*request
	runs       []*run
	effects    []Effect
	logs       *recorder
	after      []string
	// stalls are when the store stopped answering (Harness.Stall); the
	// end of one under way is zero.
	stalls [][2]time.Time
	// forgets are the operator's forgets (Harness.Forget), which hold
	// their key while they run.
	forgets []forgetting
}

// forgetting is one forget of a key: when it ran, and whether it forgot
// the key.
type forgetting struct {
	id         idem.ID
	start, end time.Time
	forgot     bool
}

// scopeHeader carries a request's scope to the engine's Scope function.
const scopeHeader = "X-Scope"

var (
	scopes = []string{"s1", "s2"}
	keys   = []string{"k1", "k2", "k3"}
)

// Run drives the clients against h, then lets every lease pass, and
// returns the history for Check.
func Run[T any](t testing.TB, h Harness[T], cfg Config) *History {
	return RunOn(t, New(cfg), h)
}

// New returns an empty history for RunOn, whose Logger a harness's
// handler may need before it runs.
func New(cfg Config) *History {
	return &History{cfg: cfg.withDefaults(), logs: &recorder{}}
}

// RunOn is Run, recording into hist.
func RunOn[T any](t testing.TB, hist *History, h Harness[T]) *History {
	cfg := hist.cfg
	if h.Now == nil {
		h.Now = time.Now
	}
	if h.Points == nil {
		h.Points = []string{"a", "b"}
	}
	if h.Operations == ([2]string{}) {
		h.Operations = [2]string{"createOrder", "createPayment"}
	}
	ops := [2]*idem.Operation{
		{Name: h.Operations[0], TTL: time.Hour, Lease: cfg.Lease},
		{Name: h.Operations[1], TTL: time.Hour, Lease: cfg.Lease, RecoveryPoints: h.Points},
	}
	var asyncOp *idem.Operation
	if h.Async != nil {
		if h.Send != nil {
			t.Fatal("history: Async needs the checker's own engine, not Send")
		}
		asyncOp = &idem.Operation{Name: AsyncOperation, TTL: time.Hour, Lease: cfg.Lease, RecoveryPoints: h.Points,
			Async: true, Path: "/exports", StatusPath: "/exports/{key}"}
	}
	if h.Send == nil {
		hist.perRequest = cfg.Seed%2 == 1
		// The checker's own engine keeps the phased requests for the
		// completer, where the store lists abandoned attempts.
		if _, ok := h.Store.(idem.AbandonedFinder); ok {
			ops[1].Abandoned = idem.AbandonedComplete
			h.complete = completer(h, hist, ops[1])
		}
		h.Send = engineSend(h, hist, ops, asyncOp)
	}
	if asyncOp != nil {
		h.Async.Start(t, asyncWork(h, hist, asyncOp))
	}

	if stall := h.Stall; stall != nil {
		h.Stall = func(t testing.TB, rng *rand.Rand) {
			// Recorded as it begins, without an end while it lasts, so
			// that what meets it is told so before it is over: a
			// completer's run, which is checked at once.
			hist.mu.Lock()
			i := len(hist.stalls)
			hist.stalls = append(hist.stalls, [2]time.Time{h.Now(), {}})
			hist.mu.Unlock()
			stall(t, rng)
			hist.mu.Lock()
			hist.stalls[i][1] = h.Now()
			hist.mu.Unlock()
		}
	}
	if forget := h.Forget; forget != nil {
		h.Forget = func(t testing.TB, id idem.ID) bool {
			f := forgetting{id: id, start: h.Now()}
			f.forgot = forget(t, id)
			f.end = h.Now()
			hist.mu.Lock()
			hist.forgets = append(hist.forgets, f)
			hist.mu.Unlock()
			return f.forgot
		}
	}
	ctx, stop := context.WithCancel(context.Background())
	var chaos sync.WaitGroup
	chaos.Go(func() { disturb(ctx, t, h, cfg.Seed) })
	var clients sync.WaitGroup
	for c := range cfg.Clients {
		clients.Go(func() {
			rng := rand.New(rand.NewPCG(cfg.Seed, uint64(c)+1))
			for i := range cfg.Requests {
				if rng.IntN(5) == 0 {
					// Between its requests too, so that a store whose
					// requests take no time is disturbed as often.
					disturbOnce(t, h, rng)
				}
				if c == 0 && i == cfg.Requests/4 && h.Stall != nil {
					// At least one stall in every run, while the other
					// clients are busy.
					h.Stall(t, rng)
				}
				if c == 0 && h.Forget != nil && h.SnapshotCache != nil && i == cfg.Requests/3 {
					// At least one forget in every run, and a loss of
					// the cache's writes since before it.
					h.SnapshotCache(t)
					h.Forget(t, idem.ID{Scope: scopes[rng.IntN(len(scopes))], Operation: h.Operations[0], Key: keys[rng.IntN(len(keys))]})
				}
				if c == 0 && h.LoseCache != nil && i == cfg.Requests*2/3 {
					h.LoseCache(t, rng)
				}
				send(t, h, hist, rng, c, i, ops)
			}
		})
	}
	clients.Wait()
	stop()
	chaos.Wait()
	if h.Async != nil {
		// Every accepted request runs to its response, its workers'
		// deaths and the disturbances notwithstanding.
		hist.after = append(hist.after, h.Async.Drain(t)...)
	}
	if h.Settle != nil {
		h.Settle(t)
	}

	all := ops[:]
	if asyncOp != nil {
		all = append(all, asyncOp)
	}
	for _, s := range scopes {
		for _, op := range all {
			for _, k := range keys {
				id := idem.ID{Scope: s, Operation: op.Name, Key: k}
				h.AgeLease(t, id)
				rec, err := h.Store.Lookup(context.Background(), id)
				if err != nil {
					t.Fatalf("lookup %v after the run: %v", id, err)
				}
				if rec.Held {
					hist.after = append(hist.after, fmt.Sprintf("%v is still held after every client is done and its lease has passed", id))
				}
			}
		}
	}
	if h.After != nil {
		hist.after = append(hist.after, h.After(t)...)
	}
	hist.effects = h.Committed(t)
	return hist
}

// disturb makes TTLs and leases of random keys pass and runs the reaper
// and the sweeper while the clients run, until ctx ends.
func disturb[T any](ctx context.Context, t testing.TB, h Harness[T], seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0))
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		disturbOnce(t, h, rng)
	}
}

// disturbOnce makes the TTL or lease of a random key pass, or runs the
// reaper, the sweeper, the completer or a migration, or does nothing.
func disturbOnce[T any](t testing.TB, h Harness[T], rng *rand.Rand) {
	names := h.Operations[:]
	if h.Async != nil {
		names = append(names, AsyncOperation)
		if h.Async.Rescue != nil && rng.IntN(4) == 0 {
			h.Async.Rescue(t)
		}
	}
	id := idem.ID{Scope: scopes[rng.IntN(len(scopes))], Operation: names[rng.IntN(len(names))], Key: keys[rng.IntN(len(keys))]}
	switch n := rng.IntN(10); {
	case n < 3:
		h.Age(t, id)
	case n < 5:
		h.AgeLease(t, id)
	case n < 7:
		h.Reap(t)
	case n < 8 && h.Sweep != nil:
		h.Sweep(t)
	case n < 9 && h.complete != nil:
		h.complete(t)
	case n == 9 && h.Migrate != nil && rng.IntN(4) == 0:
		h.Migrate(t)
	case n == 9 && h.Stall != nil && rng.IntN(3) == 0:
		h.Stall(t, rng)
	case n == 9 && h.Forget != nil && rng.IntN(3) == 0:
		h.Forget(t, id)
	case n == 9 && h.SnapshotCache != nil && rng.IntN(2) == 0:
		h.SnapshotCache(t)
	case n == 9 && h.LoseCache != nil:
		h.LoseCache(t, rng)
	}
}

// stallReach is how long after a stall ends a request may still meet
// it: on a connection whose messages the stall lost, or waiting for one
// that was being opened into it, until the engine's and the pool's
// bounds end the wait.
const stallReach = 5 * time.Second

// duringStall reports whether r was sent while the store had stopped
// answering, or soon enough after to meet what the stall left.
func (hist *History) duringStall(r *request) bool {
	return hist.nearStall(r.start, r.end)
}

// nearStall reports whether what ran from start to end met a stall, or
// began soon enough after one to meet what it left.
func (hist *History) nearStall(start, end time.Time) bool {
	hist.mu.Lock()
	defer hist.mu.Unlock()
	for _, s := range hist.stalls {
		ended := s[1]
		if ended.IsZero() { // still under way
			ended = end
		}
		if start.Before(ended.Add(stallReach)) && end.After(s[0]) {
			return true
		}
	}
	return false
}

// pick returns one of choices by weight.
func pick[E any](rng *rand.Rand, choices []E, weights []int) E {
	total := 0
	for _, w := range weights {
		total += w
	}
	n := rng.IntN(total)
	for i, w := range weights {
		if n < w {
			return choices[i]
		}
		n -= w
	}
	return choices[len(choices)-1]
}

// errFault is the error of a handler told to fail.
var errFault = errors.New("history: the handler failed as told")

// send plans one request from rng, sends it and records it.
func send[T any](t testing.TB, h Harness[T], hist *History, rng *rand.Rand, client, seq int, ops [2]*idem.Operation) {
	async := h.Async != nil && rng.IntN(4) == 0
	phased := !async && rng.IntN(2) == 1
	name := ops[0].Name
	switch {
	case async:
		name = AsyncOperation
	case phased:
		name = ops[1].Name
	}
	r := &request{client: client, seq: seq, phased: phased, async: async,
		id:      idem.ID{Scope: scopes[rng.IntN(len(scopes))], Operation: name, Key: keys[rng.IntN(len(keys))]},
		variant: pick(rng, []int{0, 1}, []int{85, 15}),
	}
	behaviours := []behaviour{succeed, fail, panicked, cancel, kill, slow, badSQL, workerDies, failAlways}
	weights := []int{70, 8, 4, 6, 0, 0, 0, 0, 0}
	if h.Kill != nil {
		weights[4] = 4
	}
	if hist.cfg.Slow && (phased || async) {
		weights[5] = 6
	}
	if h.Statement != nil {
		weights[6] = 6
	}
	if async {
		// No client waits on the handler of an async request: it does
		// not hang up on it; its worker dies instead.
		weights[3], weights[7], weights[8] = 0, 6, 2
	}
	r.behaviour = pick(rng, behaviours, weights)
	if phased || async {
		r.faultPhase = append([]string{""}, h.Points...)[rng.IntN(len(h.Points)+1)]
	}

	ctx, hangUp := context.WithCancel(context.Background())
	defer hangUp()
	handle := func(ctx context.Context, at *idem.Attempt[T]) (string, error) {
		token := fmt.Sprintf("c%d-r%d-%s-%d", client, seq, at.RecoveryPoint(), rng.Uint32())
		return runHandler(ctx, h, hist, r, at, token, at.RecoveryPoint() == r.faultPhase, hangUp, nil)
	}

	r.start = h.Now()
	a := h.Send(ctx, Request{ID: r.id, Phased: phased, Variant: r.variant,
		Async: async, Client: client, Seq: seq, Behaviour: string(r.behaviour), FaultPhase: r.faultPhase}, handle)
	r.end = h.Now()
	r.status, r.problem, r.replayed, r.body, r.token = a.Status, a.Problem, a.Replayed, a.Body, a.Token
	hist.mu.Lock()
	hist.requests = append(hist.requests, r)
	hist.mu.Unlock()
}

// errWorkerDied is the error of a run whose worker died, once the
// checker is done with the history.
var errWorkerDied = errors.New("history: the worker died")

// runHandler runs one handler invocation of r, an atomic attempt or one
// phase: it records its run, writes its effect and, where fault is set,
// does what the request's behaviour says.
func runHandler[T any](ctx context.Context, h Harness[T], hist *History, r *request, at *idem.Attempt[T], token string, fault bool,
	hangUp func(), die func(context.Context, *idem.Attempt[T])) (string, error) {
	rn := &run{req: r, generation: at.Generation(), derived: at.DerivedKey("charge"), phase: at.RecoveryPoint(), token: token, start: h.Now()}
	hist.mu.Lock()
	hist.runs = append(hist.runs, rn)
	hist.mu.Unlock()
	eff := Effect{Scope: r.id.Scope, Operation: r.id.Operation, Key: at.Key(), Generation: at.Generation(), Phase: at.RecoveryPoint(), Token: rn.token}
	if h.Transactional {
		if err := h.Effect(ctx, at, eff); err != nil {
			return "", err
		}
	}
	if r.behaviour == slow {
		// The phase's own work, which takes time: what the run is about.
		time.Sleep(hist.cfg.Lease * 4 / 10)
	}
	if fault {
		switch r.behaviour {
		case fail, failAlways:
			return "", errFault
		case panicked:
			panic("history: the handler panicked as told")
		case cancel:
			hangUp()
			<-ctx.Done() // the server notices the client has gone
			return "", ctx.Err()
		case kill:
			if err := h.Kill(ctx, at); err != nil {
				return "", err
			}
		case badSQL:
			return "", h.Statement(ctx, at)
		case workerDies:
			die(ctx, at)
			return "", errWorkerDied
		}
	}
	if !h.Transactional {
		if err := h.Effect(ctx, at, eff); err != nil {
			return "", err
		}
	}
	return rn.token, nil
}

// asyncWork is what the workers of op run: the stored request's phases,
// whose runs and effects are recorded as a client's are. A request's
// fault strikes once in each phase of its use, but for failAlways, which
// fails every run until its job runs out of attempts.
func asyncWork[T any](h Harness[T], hist *History, op *idem.Operation) AsyncWork[T] {
	var struck sync.Map // use and phase -> the fault struck there
	var runs atomic.Int64
	return AsyncWork[T]{
		Operation: op,
		Options:   idem.Options{Logger: hist.Logger(), Tracer: h.Tracer, StoreTimeout: h.StoreTimeout, DerivedKeysPerRequest: hist.perRequest},
		Phases: func(_ context.Context, raw []byte, die func(context.Context, *idem.Attempt[T])) (idem.PhaseFunc[T], error) {
			var req Request
			if err := json.Unmarshal(raw, &req); err != nil {
				return nil, err
			}
			// The run, as a request of its own that holds the key while
			// it runs (see inFlight).
			r := &request{client: req.Client, seq: req.Seq, id: req.ID, async: true, variant: req.Variant,
				behaviour: behaviour(req.Behaviour), faultPhase: req.FaultPhase, start: h.Now(), end: h.Now().Add(time.Hour)}
			hist.mu.Lock()
			hist.workerRuns = append(hist.workerRuns, r)
			hist.mu.Unlock()
			ended := func(at time.Time) {
				hist.mu.Lock()
				r.end = at
				hist.mu.Unlock()
			}
			// A dead worker's key stays held until its lease passes.
			dies := func(ctx context.Context, at *idem.Attempt[T]) {
				ended(h.Now().Add(op.Lease))
				die(ctx, at)
			}
			n := runs.Add(1)
			run := phases(op, func(ctx context.Context, at *idem.Attempt[T]) (string, error) {
				fault := at.RecoveryPoint() == r.faultPhase
				if fault && r.behaviour != failAlways {
					_, done := struck.LoadOrStore(use(r.id.Scope, r.id.Operation, r.id.Key, at.Generation())+" "+at.RecoveryPoint(), true)
					fault = !done
				}
				return runHandler(ctx, h, hist, r, at, fmt.Sprintf("w%d-c%d-r%d-%s", n, r.client, r.seq, at.RecoveryPoint()), fault, nil, dies)
			})
			return func(ctx context.Context, at *idem.Attempt[T]) (string, idem.Writer, error) {
				point, w, err := run(ctx, at)
				if err != nil || point == "" {
					ended(h.Now())
				}
				return point, w, err
			}, nil
		},
	}
}

// engineSend sends requests through an engine of the checker's own on
// h.Store, whose handlers answer a JSON body with the run's token.
func engineSend[T any](h Harness[T], hist *History, ops [2]*idem.Operation, asyncOp *idem.Operation) func(context.Context, Request, Handle[T]) Answer {
	e := idem.NewEngine(h.Store, idem.Options{Logger: hist.Logger(), Tracer: h.Tracer, StoreTimeout: h.StoreTimeout, DerivedKeysPerRequest: hist.perRequest, Scope: func(_ context.Context, r *http.Request) (string, error) {
		return r.Header.Get(scopeHeader), nil
	}})
	return func(ctx context.Context, req Request, handle Handle[T]) Answer {
		hr := httptest.NewRequest("POST", "/", nil)
		hr.Header.Set(idem.HeaderKey, req.ID.Key)
		hr.Header.Set(scopeHeader, req.ID.Scope)
		ctx = idem.WithRequest(ctx, hr)
		fingerprint := []byte(fmt.Sprintf("%s variant %d", req.ID.Key, req.Variant))
		var resp *idem.Response
		var err error
		switch {
		case req.Async:
			resp, err = e.ServeAsync(ctx, asyncOp, fingerprint, req, h.Async.Enqueue)
		case req.Phased:
			resp, err = e.ServePhasedRequest(ctx, ops[1], fingerprint, req, phases(ops[1], handle))
		default:
			resp, err = e.Serve(ctx, ops[0], fingerprint, func(ctx context.Context, at *idem.Attempt[T]) (idem.Writer, error) {
				token, err := handle(ctx, at)
				if err != nil {
					return nil, err
				}
				return respond(token), nil
			})
		}
		if err != nil {
			return Answer{Status: http.StatusInternalServerError, Problem: "handler-error"}
		}
		a := Answer{Status: resp.Status, Replayed: resp.Replayed, Body: resp.Body, Problem: ProblemName(resp.Header, resp.Body)}
		var body struct{ Token string }
		if json.Unmarshal(resp.Body, &body) == nil {
			a.Token = body.Token
		}
		return a
	}
}

// phases runs a phased request's phases with handle, answering a JSON
// body with the last run's token.
func phases[T any](op *idem.Operation, handle Handle[T]) idem.PhaseFunc[T] {
	return func(ctx context.Context, at *idem.Attempt[T]) (string, idem.Writer, error) {
		token, err := handle(ctx, at)
		if err != nil {
			return "", nil, err
		}
		if next := pointAfter(op.RecoveryPoints, at.RecoveryPoint()); next != "" {
			return next, nil, nil
		}
		return "", respond(token), nil
	}
}

func respond(token string) idem.Writer {
	return func(w http.ResponseWriter) error {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		return json.NewEncoder(w).Encode(map[string]string{"token": token})
	}
}

// completer returns what runs a completer of op once, on an engine of its
// own: it resumes the attempts whose lease the disturbances let pass, and
// the sweeper, clients' takeovers and other runs race it for them. Its
// phases record their runs and effects as a client's succeeding ones do.
func completer[T any](h Harness[T], hist *History, op *idem.Operation) func(testing.TB) {
	e := idem.NewEngine(h.Store, idem.Options{Logger: hist.Logger(), Tracer: h.Tracer, StoreTimeout: h.StoreTimeout, DerivedKeysPerRequest: !hist.perRequest})
	var seq atomic.Int64
	var mu sync.Mutex // one run at a time, as one instance's completer
	var current []*request
	c := idem.NewCompleter(e, []idem.Completable[T]{{Operation: op, Phases: func(_ context.Context, raw []byte) (idem.PhaseFunc[T], error) {
		var req Request
		if err := json.Unmarshal(raw, &req); err != nil {
			return nil, err
		}
		r := &request{client: -1, seq: int(seq.Add(1)), id: req.ID, phased: true, variant: req.Variant, behaviour: succeed, start: h.Now()}
		current = append(current, r)
		return phases(op, func(ctx context.Context, at *idem.Attempt[T]) (string, error) {
			return runHandler(ctx, h, hist, r, at, fmt.Sprintf("completer-%d-%s", r.seq, at.RecoveryPoint()), false, nil, nil)
		}), nil
	}}}, idem.CompleterOptions{CompleteAfter: time.Millisecond, BatchSize: 4})
	return func(t testing.TB) {
		mu.Lock()
		defer mu.Unlock()
		current = nil
		start := h.Now()
		run := c.RunOnce(context.Background())
		// A store that stopped answering, or has just started again, is
		// what a run may meet near a stall, as requests may: the next run
		// finds the attempts again.
		if run.Err != nil && !(errors.Is(run.Err, idem.ErrStoreUnavailable) && hist.nearStall(start, h.Now())) {
			t.Errorf("completer: %v", run.Err)
		}
		end := h.Now()
		hist.mu.Lock()
		for _, r := range current {
			r.end = end
			hist.completions = append(hist.completions, r)
		}
		hist.mu.Unlock()
	}
}

// pointAfter is the recovery point after point, or "" after the last.
func pointAfter(points []string, point string) string {
	i := 0
	if point != "" {
		i = slices.Index(points, point) + 1
	}
	if i < len(points) {
		return points[i]
	}
	return ""
}

// ProblemName is the name of the problem type a response's body holds
// (its URI without idem.ProblemBase), or "".
func ProblemName(header http.Header, body []byte) string {
	if !strings.HasPrefix(header.Get("Content-Type"), idem.ContentTypeProblem) {
		return ""
	}
	var p idem.Problem
	_ = json.Unmarshal(body, &p)
	return strings.TrimPrefix(p.Type, idem.ProblemBase)
}

// Check checks the history's invariants and returns what broke them:
//   - at most one committed execution per use of a key (scope, operation,
//     key, generation), and per phase of a phased one;
//   - every response from a handler, first or replayed, is the one its
//     use committed, byte for byte;
//   - derived keys are equal within a use, across every retry and
//     takeover, and distinct across uses; where derived per request,
//     within and across a use's requests;
//   - a 422 only when a request with the key and another fingerprint was
//     sent before it; a 409
//     only while another request with the key was in flight, or within a
//     lease of one that may have left its lease behind;
//   - no store outage (503) or misconfiguration where the store was
//     reachable and answered within the bound on ending an attempt, no 500
//     where the handler did not fail, and no error logged about ending an
//     attempt;
//   - an async request is answered 202 (pending or running) until its
//     response is stored, then replayed; never its handler's error, and
//     async-request-failed only where a request with the key fails on
//     every run; every accepted request reaches its response once the
//     clients are done (Async.Drain);
//   - no key is held once every client is done and every lease has passed.
func (hist *History) Check() []string {
	var bad []string
	add := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }

	committed := map[string]string{} // use and phase -> token
	committedTokens := map[string]bool{}
	for _, ef := range hist.effects {
		k := use(ef.Scope, ef.Operation, ef.Key, ef.Generation) + " phase " + fmt.Sprintf("%q", ef.Phase)
		if prev, ok := committed[k]; ok {
			add("two committed executions of %s: runs %s and %s", k, prev, ef.Token)
		}
		committed[k] = ef.Token
		committedTokens[ef.Token] = true
	}

	derivedOf := map[string]string{}
	useOf := map[string]string{}
	for _, rn := range hist.runs {
		u := use(rn.req.id.Scope, rn.req.id.Operation, rn.req.id.Key, rn.generation)
		if hist.perRequest && !rn.req.phased && !rn.req.async {
			// An atomic use's requests are told apart; a phased or async
			// use runs only the request that began it (another gets a 422).
			u += fmt.Sprintf(" variant %d", rn.req.variant)
		}
		if d, ok := derivedOf[u]; ok && d != rn.derived {
			add("%s derived %q in one run and %q in another (%s)", u, d, rn.derived, rn.req)
		}
		derivedOf[u] = rn.derived
		if other, ok := useOf[rn.derived]; ok && other != u {
			add("%s and %s derived the same key %q", other, u, rn.derived)
		}
		useOf[rn.derived] = u
	}

	byKey := map[idem.ID][]*request{}
	answered := map[string]*request{} // token -> its first answer
	generationOf := map[string]int64{}
	for _, rn := range hist.runs {
		generationOf[rn.token] = rn.generation
	}
	for _, r := range hist.requests {
		byKey[r.id] = append(byKey[r.id], r)
		if r.status == http.StatusCreated && !r.replayed {
			answered[r.token] = r
		}
	}
	// A forgotten use is never replayed once its forget is done, whatever
	// the replay filter's cache kept or lost.
	for _, r := range hist.requests {
		o := answered[r.token]
		if r.status != http.StatusCreated || !r.replayed || o == nil {
			continue
		}
		for _, f := range hist.forgets {
			if f.forgot && f.id == r.id && f.end.Before(r.start) && o.end.Before(f.start) {
				add("%s replayed generation %d, which a forget of its key ended at %s", r, generationOf[r.token], f.end.Format("15:04:05.000"))
				break
			}
		}
	}
	replayedAs := map[string]*request{} // token -> its first replay, where no first answer sent it
	for _, r := range hist.requests {
		switch {
		case r.async && r.status == http.StatusAccepted:
			var st idem.AsyncStatus
			if err := json.Unmarshal(r.body, &st); err != nil || (st.Status != idem.AsyncPending && st.Status != idem.AsyncRunning) {
				add("%s: 202 with a status neither pending nor running: %s", r, r.body)
			}
		case r.status == http.StatusAccepted:
			add("%s: 202 for an operation that is not async: %s", r, r.body)
		case r.async && r.status == http.StatusCreated && !r.replayed:
			add("%s: an async request's response sent at once, not 202 then the stored response: %s", r, r.body)
		case r.async && r.problem == "handler-error":
			add("%s: a handler's error sent to the client of an async request, whose handler runs on a worker", r)
		case r.async && r.problem == "async-request-failed":
			if !hist.failsEveryRun(r) {
				add("%s: its job ran out of attempts, though no request sent with the key fails every run", r)
			}
		case r.status == http.StatusCreated:
			o, ok := answered[r.token]
			if !ok && r.replayed {
				if o, ok = replayedAs[r.token]; !ok {
					replayedAs[r.token] = r
				}
			}
			if !committedTokens[r.token] {
				add("%s answered a response no committed run made: %s", r, r.body)
			} else if r.replayed && ok && string(o.body) != string(r.body) {
				add("%s replayed %s; the response first sent was %s", r, r.body, o.body)
			}
		case r.problem == "attempt-abandoned" && (r.phased || r.async):
			// The sweeper failed a lease the disturbances let pass.
		case r.status == http.StatusConflict:
			if !hist.inFlight(r, byKey[r.id]) {
				add("%s: 409 while no other request with the key was in flight; before it:%s", r, before(r, byKey[r.id], 3))
			}
		case r.status == http.StatusUnprocessableEntity:
			if !hist.sentOther(r, byKey[r.id]) {
				add("%s: 422 though no request with another fingerprint was sent with the key before it", r)
			}
		case r.problem == "handler-error":
			if r.behaviour != fail && r.behaviour != panicked && r.behaviour != badSQL {
				add("%s: the handler's error though it did not fail", r)
			}
		case r.status == idem.StatusClientClosed:
			if r.behaviour != cancel {
				add("%s: answered as a client cancel, though the client did not hang up", r)
			}
		case r.status == http.StatusServiceUnavailable && r.problem != "store-busy":
			// A request the machine stalled for as long as the engine's
			// bound on ending an attempt (its lease, at least a second)
			// meets a store that did not answer in that bound: its 503 is
			// the truthful answer, and the other invariants still hold it.
			if r.behaviour != kill && r.end.Sub(r.start) < max(hist.cfg.Lease, time.Second) && !hist.duringStall(r) {
				add("%s: a store outage, though the store was reachable: %s", r, r.body)
			}
		case r.status == http.StatusServiceUnavailable:
		case r.problem == "lease-overrun" && hist.duringStall(r):
			// A statement a stall held for longer than the lease and the
			// engine's bound after it cannot be told, from the client,
			// from one that ran that long (docs/problems.md#lease-overrun).
		default:
			add("%s: an answer outside the protocol: %s", r, r.body)
		}
	}
	for _, msg := range hist.logs.errors() {
		if strings.Contains(msg, "abort attempt") || strings.Contains(msg, "release lease") ||
			strings.Contains(msg, "misconfigured") || strings.Contains(msg, "roll back phase") {
			add("logged: %s", msg)
		}
	}
	return append(bad, hist.after...)
}

// inFlight reports whether another request with r's key was in flight
// while r was, or ended less than a lease before r began without being
// sure to have released its key.
func (hist *History) inFlight(r *request, same []*request) bool {
	for _, f := range hist.forgets {
		if f.id == r.id && f.start.Before(r.end) && f.end.After(r.start) {
			return true
		}
	}
	for _, o := range slices.Concat(hist.completions, hist.workerRuns) {
		if o.id == r.id && o.start.Before(r.end) && o.end.After(r.start) {
			return true
		}
	}
	for _, o := range same {
		if o == r {
			continue
		}
		if o.start.Before(r.end) && o.end.After(r.start) {
			return true
		}
		mayHold := o.behaviour == kill || o.behaviour == cancel || o.status == http.StatusConflict || o.status == http.StatusServiceUnavailable
		if mayHold && !o.end.Before(r.start.Add(-hist.cfg.Lease)) && o.end.Before(r.end) {
			return true
		}
	}
	return false
}

// failsEveryRun reports whether a request with r's key that fails on
// every run was sent before r ended: only such a request's job runs out
// of attempts.
func (hist *History) failsEveryRun(r *request) bool {
	return slices.ContainsFunc(hist.requests, func(o *request) bool {
		return o.id == r.id && o.behaviour == failAlways && o.start.Before(r.end)
	})
}

// before lists the last n requests with r's key that began before r.
func before(r *request, same []*request, n int) string {
	var b strings.Builder
	var earlier []*request
	for _, o := range same {
		if o != r && o.start.Before(r.start) {
			earlier = append(earlier, o)
		}
	}
	slices.SortFunc(earlier, func(a, b *request) int { return a.start.Compare(b.start) })
	for _, o := range earlier[max(0, len(earlier)-n):] {
		b.WriteString("\n\t\t" + o.String())
	}
	return b.String()
}

// sentOther reports whether a request with r's key and another
// fingerprint was sent before r ended: only such a request can have
// claimed the key (whether or not its handler got to run).
func (hist *History) sentOther(r *request, same []*request) bool {
	for _, o := range same {
		if o.variant != r.variant && o.start.Before(r.end) {
			return true
		}
	}
	return false
}

// Summary counts the answers, for the test's log.
func (hist *History) Summary() string {
	counts := map[string]int{}
	for _, r := range hist.requests {
		k := fmt.Sprint(r.status)
		if r.replayed {
			k += " replayed"
		}
		if r.problem != "" {
			k += " " + r.problem
		}
		counts[k]++
	}
	return fmt.Sprintf("%d requests, %d handler runs, %d committed effects, %d abandoned attempts the completer tried, %d runs of async requests on workers; answers %v",
		len(hist.requests), len(hist.runs), len(hist.effects), len(hist.completions), len(hist.workerRuns), counts)
}

// recorder keeps the engine's log records of level ERROR.
type recorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelError }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	msg := rec.Message
	rec.Attrs(func(a slog.Attr) bool {
		msg += " " + a.String()
		return true
	})
	r.mu.Lock()
	r.msgs = append(r.msgs, msg)
	r.mu.Unlock()
	return nil
}
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

func (r *recorder) errors() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.msgs...)
}
