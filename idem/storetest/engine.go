package storetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/idemgen/idemgen/idem"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// state puts a key into one of the states a key can be in, using the
// store directly, and returns a function that ends whatever it holds open.
type state[T any] struct {
	name   string
	phased bool // the state belongs to a phased operation
	setup  func(t *testing.T, h Harness[T], id idem.ID) (done func())
}

func nothing() {}

func states[T any]() []state[T] {
	return []state[T]{
		{name: "absent", setup: func(*testing.T, Harness[T], idem.ID) func() { return nothing }},
		{name: "uncommitted claim", setup: func(t *testing.T, h Harness[T], id idem.ID) func() {
			txn := mustClaim(t, h, id, claim)
			return func() { _ = txn.Abort(context.Background()) }
		}},
		{name: "completed", setup: func(t *testing.T, h Harness[T], id idem.ID) func() {
			complete(t, mustClaim(t, h, id, claim), response(200, `{"stored":true}`))
			return nothing
		}},
		{name: "completed past TTL", setup: func(t *testing.T, h Harness[T], id idem.ID) func() {
			complete(t, mustClaim(t, h, id, claim), response(200, `{"stored":true}`))
			h.Expire(t, id)
			return nothing
		}},
		{name: "emptied by the reaper", setup: func(t *testing.T, h Harness[T], id idem.ID) func() {
			txn := mustClaim(t, h, id, claim)
			if r, ok := txn.(idem.DerivationRecorder); ok {
				r.RecordDerivation()
			}
			complete(t, txn, response(200, `{"stored":true}`))
			h.Expire(t, id)
			h.Reap(t)
			return nothing
		}},
		{name: "live lease", phased: true, setup: func(t *testing.T, h Harness[T], id idem.ID) func() {
			l := mustLease(t, h, id, idem.Claim{Fingerprint: fpA, TTL: time.Hour, Lease: 10 * time.Second})
			advance(t, mustPhase(t, l), "a")
			return nothing
		}},
		{name: "running phase", phased: true, setup: func(t *testing.T, h Harness[T], id idem.ID) func() {
			l := mustLease(t, h, id, idem.Claim{Fingerprint: fpA, TTL: time.Hour, Lease: 10 * time.Second})
			ph := mustPhase(t, l)
			return func() { _ = ph.Abort(context.Background()) }
		}},
		{name: "expired lease", phased: true, setup: func(t *testing.T, h Harness[T], id idem.ID) func() {
			l := mustLease(t, h, id, claim)
			advance(t, mustPhase(t, l), "a")
			h.ExpireLease(t, id)
			return nothing
		}},
		{name: "in flight past TTL, lease live", phased: true, setup: func(t *testing.T, h Harness[T], id idem.ID) func() {
			// The lease outlives the TTL here, so that only the TTL passes.
			l := mustLease(t, h, id, idem.Claim{Fingerprint: fpA, TTL: time.Hour, Lease: 3 * time.Hour})
			advance(t, mustPhase(t, l), "a")
			h.Expire(t, id)
			return nothing
		}},
		{name: "in flight past TTL, lease expired", phased: true, setup: func(t *testing.T, h Harness[T], id idem.ID) func() {
			l := mustLease(t, h, id, claim)
			advance(t, mustPhase(t, l), "a")
			h.Expire(t, id)
			h.ExpireLease(t, id)
			return nothing
		}},
	}
}

// answer is what the engine must answer a request in a state: the status,
// whether the handler runs, and the Retry-After of a 409.
type answer struct {
	status     int
	runs       bool
	retryAfter string
}

// testEngineAnswers asserts the engine's answer for every state a key can
// be in, with the same and with a different request, so that every store
// answers alike.
func testEngineAnswers[T any](t *testing.T, newHarness func(t *testing.T) Harness[T]) {
	run := answer{status: 201, runs: true}
	replay := answer{status: 200}
	inUse := answer{status: 409, retryAfter: "1"}
	reused := answer{status: 422}
	want := map[string][2]answer{ // same request, different request
		"absent":                            {run, run},
		"uncommitted claim":                 {inUse, inUse}, // its request is not visible yet
		"completed":                         {replay, reused},
		"completed past TTL":                {run, run}, // a new generation
		"emptied by the reaper":             {run, run}, // a new generation
		"live lease":                        {{status: 409, retryAfter: "10"}, reused},
		"running phase":                     {{status: 409, retryAfter: "10"}, reused},
		"expired lease":                     {run, reused}, // a takeover
		"in flight past TTL, lease live":    {{status: 409, retryAfter: "30"}, reused},
		"in flight past TTL, lease expired": {run, reused}, // a takeover, not a new generation
	}
	for _, st := range states[T]() {
		for i, fp := range [][]byte{fpA, fpB} {
			name := st.name + "/same request"
			if i == 1 {
				name = st.name + "/different request"
			}
			t.Run(name, func(t *testing.T) {
				h := newHarness(t)
				key := id("k1")
				done := st.setup(t, h, key)
				defer done()
				resp, runs := serve(t, h, st.phased, key, fp)
				w := want[st.name][i]
				if resp.Status != w.status || runs != w.runs {
					t.Fatalf("answer %d %s (handler ran: %v), want %d (runs: %v)", resp.Status, resp.Body, runs, w.status, w.runs)
				}
				if got := resp.Header.Get("Retry-After"); got != w.retryAfter {
					t.Errorf("Retry-After %q, want %q", got, w.retryAfter)
				}
				if w.status == 200 && (!resp.Replayed || string(resp.Body) != `{"stored":true}`) {
					t.Errorf("replay %+v, want the stored response marked replayed", resp)
				}
			})
		}
	}
}

// serve sends one request with fingerprint fp through the engine, as an
// atomic or a phased operation with one recovery point, and reports
// whether its handler ran.
func serve[T any](t *testing.T, h Harness[T], phased bool, id idem.ID, fp []byte) (*idem.Response, bool) {
	t.Helper()
	e := idem.NewEngine(h.Store, idem.Options{Logger: quiet, Scope: func(context.Context, *http.Request) (string, error) { return id.Scope, nil }})
	r := httptest.NewRequest("POST", "/", nil)
	r.Header.Set(idem.HeaderKey, id.Key)
	ctx := idem.WithRequest(context.Background(), r)
	op := &idem.Operation{Name: id.Operation, TTL: time.Hour, Lease: time.Minute}
	ran := false
	created := func(w http.ResponseWriter) error {
		w.WriteHeader(http.StatusCreated)
		return nil
	}
	var resp *idem.Response
	var err error
	if phased {
		op.RecoveryPoints = []string{"a"}
		resp, err = e.ServePhased(ctx, op, fp, func(ctx context.Context, at *idem.Attempt[T]) (string, idem.Writer, error) {
			ran = true
			return "", created, nil
		})
	} else {
		resp, err = e.Serve(ctx, op, fp, func(ctx context.Context, at *idem.Attempt[T]) (idem.Writer, error) {
			ran = true
			return created, nil
		})
	}
	if err != nil {
		t.Fatalf("serve: %v", err)
	}
	return resp, ran
}

// testDerivedKeys checks that derived keys stay the same through a retry
// and a takeover of one generation of a key, and change when the key is
// reused after its TTL.
func testDerivedKeys[T any](t *testing.T, h Harness[T]) {
	e := idem.NewEngine(h.Store, idem.Options{Logger: quiet, Scope: func(context.Context, *http.Request) (string, error) { return "acct_1", nil }})
	op := &idem.Operation{Name: "createPayment", TTL: time.Hour, Lease: time.Minute, RecoveryPoints: []string{"charged"}}
	type seen struct {
		key        string
		generation int64
	}
	// send runs the payment once; the phase after "charged" fails when
	// told to, which releases the key for a retry to take over.
	send := func(failLast bool) (*idem.Response, []seen) {
		t.Helper()
		var got []seen
		r := httptest.NewRequest("POST", "/payments", nil)
		r.Header.Set(idem.HeaderKey, "pay-1")
		resp, err := e.ServePhased(idem.WithRequest(context.Background(), r), op, fpA, func(ctx context.Context, at *idem.Attempt[T]) (string, idem.Writer, error) {
			got = append(got, seen{at.DerivedKey("charge"), at.Generation()})
			if at.RecoveryPoint() == "" {
				return "charged", nil, nil
			}
			if failLast {
				return "", nil, errors.New("the provider timed out")
			}
			return "", func(w http.ResponseWriter) error { w.WriteHeader(http.StatusCreated); return nil }, nil
		})
		if failLast && err == nil {
			t.Fatalf("failing attempt: %+v, want its error", resp)
		}
		if !failLast && (err != nil || resp.Status != 201) {
			t.Fatalf("attempt: %+v, %v, want 201", resp, err)
		}
		return resp, got
	}
	_, first := send(true)
	_, retry := send(false) // takes over after "charged"
	if len(first) != 2 || len(retry) != 1 {
		t.Fatalf("phases run: %d then %d, want 2 then 1 (the retry resumes)", len(first), len(retry))
	}
	if first[0] != first[1] || retry[0] != first[0] || first[0].generation != 1 {
		t.Fatalf("within generation 1: %+v then %+v, want one derived key throughout", first, retry)
	}
	h.Expire(t, idem.ID{Scope: "acct_1", Operation: "createPayment", Key: "pay-1"})
	_, reused := send(false)
	if len(reused) != 2 || reused[0].generation != 2 || reused[0].key == first[0].key || reused[0] != reused[1] {
		t.Fatalf("after the TTL: %+v, want generation 2 with a new derived key (generation 1's was %q)", reused, first[0].key)
	}
}

// testDerivedKeysAfterReap checks that the reaper cannot make a key's next
// use repeat the derived keys of an earlier one: a key whose attempts
// derived a key keeps its generation through the reaper, atomic or phased,
// while derived keys stay the same through every retry of one use.
func testDerivedKeysAfterReap[T any](t *testing.T, newHarness func(t *testing.T) Harness[T]) {
	for _, phased := range []bool{false, true} {
		name := "atomic"
		if phased {
			name = "phased"
		}
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			key := idem.ID{Scope: "acct_1", Operation: "createPayment", Key: "pay-1"}
			e := idem.NewEngine(h.Store, idem.Options{Logger: quiet, Scope: func(context.Context, *http.Request) (string, error) { return key.Scope, nil }})
			op := &idem.Operation{Name: key.Operation, TTL: time.Hour, Lease: time.Minute}
			if phased {
				op.RecoveryPoints = []string{"charged"}
			}
			// send runs one attempt, which derives the provider's key and
			// then fails or answers 201; it returns the key and generation.
			send := func(fail bool) (string, int64) {
				t.Helper()
				var derived string
				var generation int64
				r := httptest.NewRequest("POST", "/payments", nil)
				r.Header.Set(idem.HeaderKey, key.Key)
				ctx := idem.WithRequest(context.Background(), r)
				created := func(w http.ResponseWriter) error { w.WriteHeader(http.StatusCreated); return nil }
				var resp *idem.Response
				var err error
				if phased {
					resp, err = e.ServePhased(ctx, op, fpA, func(ctx context.Context, at *idem.Attempt[T]) (string, idem.Writer, error) {
						derived, generation = at.DerivedKey("charge"), at.Generation()
						if fail {
							return "", nil, errors.New("the provider timed out")
						}
						return "", created, nil
					})
				} else {
					resp, err = e.Serve(ctx, op, fpA, func(ctx context.Context, at *idem.Attempt[T]) (idem.Writer, error) {
						derived, generation = at.DerivedKey("charge"), at.Generation()
						if fail {
							return nil, errors.New("the provider timed out")
						}
						return created, nil
					})
				}
				if fail != (err != nil) || (!fail && resp.Status != http.StatusCreated) {
					t.Fatalf("attempt (fail: %v): %+v, %v", fail, resp, err)
				}
				return derived, generation
			}
			first, gen1 := send(false)
			h.Expire(t, key)
			h.Reap(t)
			if rec := lookup(t, h, key); !rec.Found || rec.Generation != 1 || rec.Response != nil {
				t.Fatalf("after the reaper: %+v, want the emptied row of generation 1, kept because its attempt derived a key", rec)
			}
			failed, genFailed := send(true)
			retried, gen2 := send(false)
			if gen1 != 1 || genFailed != 2 || gen2 != 2 {
				t.Fatalf("generations %d, then %d and %d, want 1, then 2 for both attempts of the second use", gen1, genFailed, gen2)
			}
			if failed != retried {
				t.Fatalf("the second use's retry derived %q, its failed attempt %q: want one key per use", retried, failed)
			}
			if retried == first {
				t.Fatalf("the second use, after the reaper, derived the first use's key %q", first)
			}
			// Twice more through the reaper: never a key seen before.
			seen := map[string]bool{first: true, retried: true}
			for range 2 {
				h.Expire(t, key)
				h.Reap(t)
				k, _ := send(false)
				if seen[k] {
					t.Fatalf("a later use derived %q, a key of an earlier use", k)
				}
				seen[k] = true
			}
		})
	}
}

// DerivedKeyDiffersPerRequest checks Options.DerivedKeysPerRequest (Run
// runs it too): a
// request that reuses a key after a failed attempt with another body
// derives keys of its own, while a retry of the failed request derives
// the failed attempt's again; without the option they are the same, which
// is what the option is for. An attempt that takes over a phased use
// derives as the use began, whichever way its own engine is set.
func DerivedKeyDiffersPerRequest[T any](t *testing.T, newHarness func(t *testing.T) Harness[T]) {
	const scope = "acct_1"
	for _, phased := range []bool{false, true} {
		name := "atomic"
		if phased {
			name = "phased"
		}
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			engine := func(perRequest bool) *idem.Engine[T] {
				return idem.NewEngine(h.Store, idem.Options{Logger: quiet, DerivedKeysPerRequest: perRequest,
					Scope: func(context.Context, *http.Request) (string, error) { return scope, nil }})
			}
			op := &idem.Operation{Name: "createPayment", TTL: time.Hour, Lease: time.Minute}
			if phased {
				op.RecoveryPoints = []string{"charged"}
			}
			// send runs one attempt of key with fingerprint fp, which
			// derives the provider's key, then fails or answers 201.
			send := func(e *idem.Engine[T], key string, fp []byte, fail bool) string {
				t.Helper()
				var derived string
				r := httptest.NewRequest("POST", "/payments", nil)
				r.Header.Set(idem.HeaderKey, key)
				ctx := idem.WithRequest(context.Background(), r)
				created := func(w http.ResponseWriter) error { w.WriteHeader(http.StatusCreated); return nil }
				var resp *idem.Response
				var err error
				if phased {
					resp, err = e.ServePhased(ctx, op, fp, func(ctx context.Context, at *idem.Attempt[T]) (string, idem.Writer, error) {
						derived = at.DerivedKey("charge")
						if fail {
							return "", nil, errors.New("the provider timed out")
						}
						return "", created, nil
					})
				} else {
					resp, err = e.Serve(ctx, op, fp, func(ctx context.Context, at *idem.Attempt[T]) (idem.Writer, error) {
						derived = at.DerivedKey("charge")
						if fail {
							return nil, errors.New("the provider timed out")
						}
						return created, nil
					})
				}
				if fail != (err != nil) || (!fail && resp.Status != http.StatusCreated) {
					t.Fatalf("attempt of %s (fail: %v): %+v, %v", key, fail, resp, err)
				}
				return derived
			}

			on, off := engine(true), engine(false)
			failed := send(on, "pay-1", fpA, true)
			if again := send(on, "pay-1", fpA, true); again != failed {
				t.Errorf("a retry of the failed request derived %q, the failed attempt %q: want the same key", again, failed)
			}
			if !phased {
				if other := send(on, "pay-1", fpB, false); other == failed {
					t.Errorf("another request under the key after the failed attempt derived its key %q", failed)
				}
				// Without the option, the other request gets the failed
				// attempt's key: the test can tell.
				if send(off, "pay-2", fpA, true) != send(off, "pay-2", fpB, false) {
					t.Errorf("without DerivedKeysPerRequest another request derived a key of its own; the test no longer shows what the option does")
				}
				return
			}
			// A failed phase leaves its use in flight, which only the same
			// request may resume: another is refused, and derives nothing.
			r := httptest.NewRequest("POST", "/payments", nil)
			r.Header.Set(idem.HeaderKey, "pay-1")
			resp, err := on.ServePhased(idem.WithRequest(context.Background(), r), op, fpB, func(context.Context, *idem.Attempt[T]) (string, idem.Writer, error) {
				t.Error("another request ran under a phased use in flight")
				return "", nil, nil
			})
			if err != nil || resp.Status != http.StatusUnprocessableEntity {
				t.Errorf("another request under the failed phased use: %+v, %v; want 422", resp, err)
			}
			// A phased use holds its row while a retry may take it over:
			// the attempt that does derives as the use began.
			for _, began := range []bool{false, true} {
				key := fmt.Sprintf("pay-takeover-%v", began)
				first, then := engine(began), engine(!began)
				var derived []string
				for i, e := range []*idem.Engine[T]{first, then} {
					r := httptest.NewRequest("POST", "/payments", nil)
					r.Header.Set(idem.HeaderKey, key)
					resp, err := e.ServePhased(idem.WithRequest(context.Background(), r), op, fpA, func(ctx context.Context, at *idem.Attempt[T]) (string, idem.Writer, error) {
						derived = append(derived, at.DerivedKey("charge"))
						if at.RecoveryPoint() == "" {
							return "charged", nil, nil
						}
						if i == 0 {
							return "", nil, errors.New("the provider timed out")
						}
						return "", func(w http.ResponseWriter) error { w.WriteHeader(http.StatusCreated); return nil }, nil
					})
					if (i == 0) != (err != nil) {
						t.Fatalf("attempt %d of %s: %+v, %v", i, key, resp, err)
					}
				}
				if len(derived) != 3 || derived[0] != derived[1] || derived[2] != derived[0] {
					t.Errorf("a use begun with DerivedKeysPerRequest %v, taken over by an engine with %v, derived %q: want one key", began, !began, derived)
				}
			}
		})
	}
}
