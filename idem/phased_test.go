package idem_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/memstore"
)

var payOp = &idem.Operation{Name: "createPayment", TTL: time.Hour, Lease: time.Minute, RecoveryPoints: []string{"payment_created", "charge_created"}}

// phases is a phased handler that counts its phase runs and can be told to
// fail, panic or block in one of them.
type phases struct {
	mu    sync.Mutex
	runs  map[string]int // by the point a phase starts from
	fail  map[string]error
	panic map[string]bool
	block map[string]chan struct{} // closed by the test to let the phase go on
	keys  []string                 // derived keys seen, in order
}

func newPhases() *phases {
	return &phases{runs: map[string]int{}, fail: map[string]error{}, panic: map[string]bool{}, block: map[string]chan struct{}{}}
}

func (p *phases) run(started chan<- struct{}) idem.PhaseFunc[memstore.NoTx] {
	return func(ctx context.Context, at *idem.Attempt[memstore.NoTx]) (string, idem.Writer, error) {
		point := at.RecoveryPoint()
		p.mu.Lock()
		p.runs[point]++
		p.keys = append(p.keys, at.DerivedKey("charge"))
		err, boom, wait := p.fail[point], p.panic[point], p.block[point]
		p.mu.Unlock()
		if wait != nil {
			if started != nil {
				started <- struct{}{}
			}
			<-wait
		}
		if boom {
			panic("phase " + point)
		}
		if err != nil {
			return "", nil, err
		}
		switch point {
		case "":
			return "payment_created", nil, nil
		case "payment_created":
			return "charge_created", nil, nil
		}
		return "", func(w http.ResponseWriter) error {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(201)
			_, err := w.Write([]byte(`{"id":"pay_1","status":"succeeded"}`))
			return err
		}, nil
	}
}

func (p *phases) count(point string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.runs[point]
}

func servePhased(t *testing.T, e *idem.Engine[memstore.NoTx], key, fp string, run idem.PhaseFunc[memstore.NoTx]) (*idem.Response, error) {
	t.Helper()
	r := httptest.NewRequest("POST", "/payments", nil)
	if key != "" {
		r.Header.Set(idem.HeaderKey, key)
	}
	return e.ServePhased(idem.WithRequest(context.Background(), r), payOp, []byte(fp), run)
}

func TestPhasedRunsEachPhaseOnceAndReplays(t *testing.T) {
	e := idem.NewEngine(memstore.New(memstore.Options{}), idem.Options{Logger: quiet})
	p := newPhases()
	first, err := servePhased(t, e, "k1", "fp", p.run(nil))
	if err != nil || first.Status != 201 || first.Replayed {
		t.Fatalf("first: %+v, %v", first, err)
	}
	replay, err := servePhased(t, e, "k1", "fp", p.run(nil))
	if err != nil || replay.Status != 201 || !replay.Replayed || string(replay.Body) != string(first.Body) {
		t.Fatalf("replay: %+v, %v", replay, err)
	}
	for _, point := range []string{"", "payment_created", "charge_created"} {
		if n := p.count(point); n != 1 {
			t.Errorf("phase from %q ran %d times, want 1", point, n)
		}
	}
	if r, _ := servePhased(t, e, "k1", "other", p.run(nil)); r.Status != 422 {
		t.Fatalf("reused key: %d, want 422", r.Status)
	}
}

// A Go error or a panic in a phase answers with the error and releases the
// lease; the retry resumes at the failed phase, not at the start, and its
// derived key is the first attempt's.
func TestPhasedFailureResumesAtFailedPhase(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(p *phases)
		check func(t *testing.T, err error)
	}{
		{"error", func(p *phases) { p.fail["payment_created"] = errors.New("provider unreachable") }, func(t *testing.T, err error) {
			if err == nil || !strings.Contains(err.Error(), "provider unreachable") {
				t.Fatalf("err = %v, want the phase's error", err)
			}
		}},
		{"panic", func(p *phases) { p.panic["payment_created"] = true }, func(t *testing.T, err error) {
			var pe *idem.PanicError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want a PanicError", err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := idem.NewEngine(memstore.New(memstore.Options{}), idem.Options{Logger: quiet})
			p := newPhases()
			tc.setup(p)
			resp, err := servePhased(t, e, "k1", "fp", p.run(nil))
			if resp != nil {
				t.Fatalf("failed attempt answered %d %s; want the error for a 500", resp.Status, resp.Body)
			}
			tc.check(t, err)

			p.mu.Lock()
			p.fail, p.panic = map[string]error{}, map[string]bool{}
			p.mu.Unlock()
			resp, err = servePhased(t, e, "k1", "fp", p.run(nil))
			if err != nil || resp.Status != 201 || resp.Replayed {
				t.Fatalf("retry: %+v, %v", resp, err)
			}
			if n := p.count(""); n != 1 {
				t.Errorf("first phase ran %d times; the retry should resume after it", n)
			}
			if n := p.count("payment_created"); n != 2 {
				t.Errorf("failed phase ran %d times, want 2 (failed, then retried)", n)
			}
			for _, k := range p.keys {
				if k != p.keys[0] {
					t.Fatalf("derived keys differ across the retry: %q", p.keys)
				}
			}
		})
	}
}

// While a phase runs, a duplicate gets 409 at once and a different request
// with the key 422; neither runs a phase.
func TestPhasedDuplicateWhileRunning(t *testing.T) {
	e := idem.NewEngine(memstore.New(memstore.Options{}), idem.Options{Logger: quiet})
	p := newPhases()
	release := make(chan struct{})
	p.block["payment_created"] = release
	started := make(chan struct{})
	done := make(chan *idem.Response)
	go func() {
		r := httptest.NewRequest("POST", "/payments", nil)
		r.Header.Set(idem.HeaderKey, "k1")
		resp, _ := e.ServePhased(idem.WithRequest(context.Background(), r), payOp, []byte("fp"), p.run(started))
		done <- resp
	}()
	<-started
	if r, _ := servePhased(t, e, "k1", "fp", p.run(nil)); r.Status != 409 || r.Header.Get("Retry-After") == "" {
		t.Fatalf("duplicate while running: %d %v, want 409 with Retry-After", r.Status, r.Header)
	}
	if r, _ := servePhased(t, e, "k1", "other", p.run(nil)); r.Status != 422 {
		t.Fatalf("other request while running: %d, want 422", r.Status)
	}
	close(release)
	if resp := <-done; resp == nil || resp.Status != 201 {
		t.Fatalf("first attempt: %+v", resp)
	}
	if n := p.count("payment_created"); n != 1 {
		t.Fatalf("phase ran %d times, want 1", n)
	}
}

// A phase that returns a point it has passed, or none, is a programming
// error: a 500, and the key is released for a fixed handler to resume.
func TestPhasedBadStep(t *testing.T) {
	for _, tc := range []struct {
		name, next, want string
	}{
		{"backwards", "payment_created", `expected one of the points after it, ["charge_created"]`},
		{"unknown", "refund_created", "refund_created"},
		{"none", "", "neither a recovery point nor a response"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := idem.NewEngine(memstore.New(memstore.Options{}), idem.Options{Logger: quiet})
			p := newPhases()
			good := p.run(nil)
			bad := func(ctx context.Context, at *idem.Attempt[memstore.NoTx]) (string, idem.Writer, error) {
				if at.RecoveryPoint() == "payment_created" {
					return tc.next, nil, nil
				}
				return good(ctx, at)
			}
			_, err := servePhased(t, e, "k1", "fp", bad)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one saying %q", err, tc.want)
			}
			resp, err := servePhased(t, e, "k1", "fp", good)
			if err != nil || resp.Status != 201 || p.count("") != 1 {
				t.Fatalf("fixed retry: %+v, %v, first phase ran %d times", resp, err, p.count(""))
			}
		})
	}
}

func TestPhasedWithoutKeyRunsEveryPhase(t *testing.T) {
	store := memstore.New(memstore.Options{})
	e := idem.NewEngine(store, idem.Options{Logger: quiet})
	op := *payOp
	op.KeyOptional = true
	p := newPhases()
	for range 2 {
		r := httptest.NewRequest("POST", "/payments", nil)
		resp, err := e.ServePhased(idem.WithRequest(context.Background(), r), &op, []byte("fp"), p.run(nil))
		if err != nil || resp.Status != 201 || resp.Replayed {
			t.Fatalf("keyless: %+v, %v", resp, err)
		}
	}
	if p.count("") != 2 || p.count("charge_created") != 2 || store.Len() != 0 {
		t.Fatalf("runs %v, %d keys stored; want every phase twice and nothing stored", p.runs, store.Len())
	}
	if p.keys[0] == p.keys[3] {
		t.Fatal("two requests without a key got the same derived key")
	}
}

func TestDerivedKeys(t *testing.T) {
	store := memstore.New(memstore.Options{})
	derive := func(e *idem.Engine[memstore.NoTx], scope, op, key, name string) string {
		t.Helper()
		var got string
		r := httptest.NewRequest("POST", "/x", nil)
		r.Header.Set(idem.HeaderKey, key)
		r.Header.Set("X-Scope", scope)
		_, err := e.Serve(idem.WithRequest(context.Background(), r), &idem.Operation{Name: op, TTL: time.Hour, Lease: time.Minute}, []byte(name),
			func(ctx context.Context, at *idem.Attempt[memstore.NoTx]) (idem.Writer, error) {
				got = at.DerivedKey(name)
				return nil, errors.New("roll back, so the key can run again")
			})
		if err == nil || got == "" {
			t.Fatalf("derive: %v, %q", err, got)
		}
		return got
	}
	scope := func(_ context.Context, r *http.Request) (string, error) { return r.Header.Get("X-Scope"), nil }
	e := idem.NewEngine(store, idem.Options{Logger: quiet, Scope: scope})
	base := derive(e, "acct_1", "createPayment", "k1", "charge")
	if again := derive(e, "acct_1", "createPayment", "k1", "charge"); again != base {
		t.Fatalf("derived key changed on retry: %q then %q", base, again)
	}
	// Another engine on the same store (another process on the same
	// database) derives the same key.
	if other := derive(idem.NewEngine(store, idem.Options{Logger: quiet, Scope: scope}), "acct_1", "createPayment", "k1", "charge"); other != base {
		t.Fatalf("derived key differs across engines on one store: %q, %q", base, other)
	}
	seen := map[string]string{base: "base"}
	for name, k := range map[string]string{
		"other scope":     derive(e, "acct_2", "createPayment", "k1", "charge"),
		"other operation": derive(e, "acct_1", "createRefund", "k1", "charge"),
		"other key":       derive(e, "acct_1", "createPayment", "k2", "charge"),
		"other name":      derive(e, "acct_1", "createPayment", "k1", "refund"),
		// Boundaries between the parts must not shift into each other.
		"shifted": derive(e, "acct_1c", "reatePayment", "k1", "charge"),
	} {
		if prev, dup := seen[k]; dup {
			t.Errorf("%s derives the same key as %s", name, prev)
		}
		seen[k] = name
	}
	// A key long enough that random base64 never contains it by chance:
	// "k1" would, in about one run in a hundred.
	const clientKey = "order-7f3a9c2e-1b4d"
	if k := derive(e, "acct_1", "createPayment", clientKey, "charge"); strings.Contains(k, clientKey) || len(k) < 40 {
		t.Errorf("derived key %q echoes the client's key or is short", k)
	}
	// A configured secret replaces the store's.
	if k := derive(idem.NewEngine(store, idem.Options{Logger: quiet, Scope: scope, Secret: []byte("configured")}), "acct_1", "createPayment", "k1", "charge"); k == base {
		t.Error("Options.Secret did not change the derived key")
	}
}
