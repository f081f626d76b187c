package idemtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idemgen/idemgen/idem"
)

// fakeAPI is a hand-written idempotent endpoint, right unless a fault is
// set, for checking that each check passes on the right behaviour and
// reports each wrong one.
type fakeAPI struct {
	// Faults.
	ignoreBody   bool // a key reused with another body replays
	noDedup      bool // every request runs
	keepFailures bool // a failed run's 500 is stored and replayed
	noReplayMark bool // replays lack Idempotent-Replayed

	// write, when set, is each run's own work, failed runs' included.
	write func()
	// keyOf, when set, reads the key from the request instead of the
	// Idempotency-Key header; "" is no key.
	keyOf func(r *http.Request, body []byte) string

	mu       sync.Mutex
	keys     map[string]*entry
	runs     atomic.Int64
	failNext atomic.Bool
}

type entry struct {
	body   string
	done   bool
	status int
	answer []byte
}

func (f *fakeAPI) hooks() Hooks {
	return Hooks{Runs: func() int { return int(f.runs.Load()) }, FailNext: func() { f.failNext.Store(true) }}
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	key := r.Header.Get("Idempotency-Key")
	if f.keyOf != nil {
		key = f.keyOf(r, body)
	}
	if key == "" {
		idem.WriteProblem(w, &idem.Problem{Type: idem.TypeMissingKey, Status: 400, Title: "no key"})
		return
	}
	f.mu.Lock()
	if f.keys == nil {
		f.keys = map[string]*entry{}
	}
	e := f.keys[key]
	switch {
	case f.noDedup || e == nil:
		e = &entry{body: string(body)}
		f.keys[key] = e
	case e.body != string(body) && !f.ignoreBody:
		f.mu.Unlock()
		idem.WriteProblem(w, &idem.Problem{Type: idem.TypeKeyReused, Status: 422, Title: "reused"})
		return
	case !e.done:
		f.mu.Unlock()
		idem.WriteProblem(w, &idem.Problem{Type: idem.TypeKeyInUse, Status: 409, Title: "in use"})
		return
	default:
		f.mu.Unlock()
		if !f.noReplayMark {
			w.Header().Set(idem.HeaderReplayed, "true")
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(e.status)
		w.Write(e.answer)
		return
	}
	f.mu.Unlock()

	n := f.runs.Add(1)
	if f.write != nil {
		f.write()
	}
	status, answer := 201, []byte(fmt.Sprintf(`{"id":"ord_%d"}`, n))
	if f.failNext.CompareAndSwap(true, false) {
		status, answer = 500, nil
	}
	f.mu.Lock()
	if status == 500 && !f.keepFailures {
		delete(f.keys, key)
	} else {
		e.done, e.status, e.answer = true, status, answer
	}
	f.mu.Unlock()
	if status == 500 {
		idem.WriteProblem(w, &idem.Problem{Type: idem.TypeInternal, Status: 500, Title: "failed"})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(answer)
}

// noTables is a Hooks.Tables without a database.
func noTables(context.Context) (*Tables, error) { return nil, nil }

var orderRequest = Request{
	Method: "POST",
	Path:   "/orders",
	Header: http.Header{"Content-Type": {"application/json"}},
	Body:   []byte(`{"amount_cents": 100, "currency": "EUR"}`),
}

func TestCheckPassesOnTheProtocol(t *testing.T) {
	f := &fakeAPI{}
	Check(t, f, orderRequest, f.hooks())
	// first 1, concurrent 1, the failure and its retry 2.
	if got := f.runs.Load(); got != 4 {
		t.Fatalf("the operation ran %d times, want 4", got)
	}
}

// Each check reports the fault it exists for.
func TestChecksReportFaults(t *testing.T) {
	for _, tc := range []struct {
		name  string
		api   *fakeAPI
		check func(*client, func() int, Hooks) error
		want  string
	}{
		{"replay unmarked", &fakeAPI{noReplayMark: true}, func(c *client, runs func() int, _ Hooks) error {
			first, err := checkFirst(t.Context(), c, keyValues{"k"}, runs)
			if err != nil {
				return err
			}
			return checkReplay(t.Context(), c, keyValues{"k"}, first, runs)
		}, "no Idempotent-Replayed: true"},
		{"no dedup on replay", &fakeAPI{noDedup: true}, func(c *client, runs func() int, _ Hooks) error {
			first, err := checkFirst(t.Context(), c, keyValues{"k"}, runs)
			if err != nil {
				return err
			}
			return checkReplay(t.Context(), c, keyValues{"k"}, first, runs)
		}, "want the first answer byte for byte"},
		{"changed body replays", &fakeAPI{ignoreBody: true}, func(c *client, runs func() int, _ Hooks) error {
			if _, err := checkFirst(t.Context(), c, keyValues{"k"}, runs); err != nil {
				return err
			}
			return checkChanged(t.Context(), c, keyValues{"k"}, []byte(`{"amount_cents": 101}`), runs)
		}, "want 422"},
		{"concurrent runs", &fakeAPI{noDedup: true}, func(c *client, runs func() int, _ Hooks) error {
			return checkConcurrent(t.Context(), c, keyValues{"k"}, Concurrency, runs)
		}, "requests at once with one key"},
		{"failure kept", &fakeAPI{keepFailures: true}, func(c *client, runs func() int, h Hooks) error {
			return checkErrorReleasesKey(t.Context(), c, keyValues{"k"}, h.FailNext, runs, noTables)
		}, "the failure must leave the key free"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.api)
			defer srv.Close()
			c := &client{url: srv.URL, req: orderRequest, http: srv.Client()}
			h := tc.api.hooks()
			err := tc.check(c, h.Runs, h)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("the check returned %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

// A first call that is not a 2xx says the request may be at fault.
func TestFirstNeedsAValidRequest(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		idem.WriteProblem(w, &idem.Problem{Type: idem.TypeInvalidRequest, Status: 400, Title: "bad"})
	}))
	defer srv.Close()
	c := &client{url: srv.URL, req: orderRequest, http: srv.Client()}
	_, err := checkFirst(t.Context(), c, keyValues{"k"}, func() int { return 0 })
	if err == nil || !strings.Contains(err.Error(), "is the request valid?") {
		t.Fatalf("checkFirst = %v", err)
	}
}

func TestChangeJSON(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"currency":"EUR","amount_cents":100}`, `{"amount_cents":101,"currency":"EUR"}`},
		{`{"price":1.5}`, `{"price":2.5}`},
		{`{"b":{"live":true},"a":"x"}`, `{"a":"x","b":{"live":false}}`},
		{`{"id":"ord_9","tags":["a"]}`, `{"id":"ord_0","tags":["a"]}`},
		{`{"when":"2024-01-01T00:00:00Z"}`, `{"when":"2024-01-01T00:00:00A"}`},
		{`[{"n":"Z"}]`, `[{"n":"A"}]`},
	} {
		got, err := ChangeJSON([]byte(tc.in))
		if err != nil {
			t.Fatalf("ChangeJSON(%s): %v", tc.in, err)
		}
		var a, b any
		json.Unmarshal(got, &a)
		json.Unmarshal([]byte(tc.want), &b)
		ga, _ := json.Marshal(a)
		gb, _ := json.Marshal(b)
		if !bytes.Equal(ga, gb) {
			t.Errorf("ChangeJSON(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
	for _, in := range []string{`{}`, `not json`, `{"a":null}`} {
		if _, err := ChangeJSON([]byte(in)); err == nil {
			t.Errorf("ChangeJSON(%s): no error", in)
		}
	}
}
