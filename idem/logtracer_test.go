package idem_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/memstore"
)

// logRecords keeps what a logger was given.
type logRecords struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecords) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r.Clone())
	return nil
}
func (l *logRecords) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecords) WithGroup(string) slog.Handler      { return l }

func (l *logRecords) all() []slog.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]slog.Record(nil), l.recs...)
}

func attrs(r slog.Record) map[string]string {
	m := map[string]string{}
	r.Attrs(func(a slog.Attr) bool {
		m[a.Key] = a.Value.String()
		return true
	})
	return m
}

// outcomeTracer records the outcomes a Tracer is told of.
type outcomeTracer struct {
	mu   sync.Mutex
	ends []idem.TraceRequestEndData
}

func (o *outcomeTracer) TraceRequestStart(ctx context.Context, _ idem.TraceRequestStartData) context.Context {
	return ctx
}
func (o *outcomeTracer) TraceRequestEnd(_ context.Context, d idem.TraceRequestEndData) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ends = append(o.ends, d)
}

// Each request is one log record carrying its outcome, the key's hash and
// never the key; the record's level follows whose the trouble is.
func TestLogTracerOneRecordPerRequest(t *testing.T) {
	log := &logRecords{}
	traced := &outcomeTracer{}
	e := idem.NewEngine(memstore.New(memstore.Options{}), idem.Options{Logger: slog.New(log), Tracer: traced})
	op := &idem.Operation{Name: "createOrder", TTL: time.Hour, Lease: time.Minute}
	calls := 0
	key := http.Header{idem.HeaderKey: {"the-secret-key"}}
	for _, h := range []http.Header{key, key, {}, {idem.HeaderKey: {"a\x01b"}}} {
		if _, err := serve(t, e, op, h, created(&calls)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := serve(t, e, op, http.Header{idem.HeaderKey: {"k2"}}, func(context.Context, *idem.Attempt[memstore.NoTx]) (idem.Writer, error) {
		return nil, errors.New("boom")
	}); err == nil {
		t.Fatal("handler error not returned")
	}
	recs := log.all()
	want := []struct {
		outcome string
		level   slog.Level
	}{{"first", slog.LevelDebug}, {"replay", slog.LevelDebug}, {"missing_key", slog.LevelInfo}, {"invalid_key", slog.LevelInfo}, {"handler_error", slog.LevelDebug}}
	if len(recs) != len(want) || len(traced.ends) != len(want) {
		t.Fatalf("%d records and %d traced ends, want %d of each", len(recs), len(traced.ends), len(want))
	}
	for i, w := range want {
		a := attrs(recs[i])
		if a["outcome"] != w.outcome || recs[i].Level != w.level || a["operation"] != "createOrder" {
			t.Errorf("record %d: %v %s %v; want outcome %s at %v", i, recs[i].Level, recs[i].Message, a, w.outcome, w.level)
		}
		if traced.ends[i].Outcome.String() != w.outcome {
			t.Errorf("traced end %d: %v, want %s", i, traced.ends[i].Outcome, w.outcome)
		}
		for k, v := range a {
			if strings.Contains(v, "the-secret-key") {
				t.Errorf("record %d: %s holds the key", i, k)
			}
		}
	}
	hash := idem.KeyHash(idem.ID{Operation: "createOrder", Key: "the-secret-key"})
	if a := attrs(recs[0]); a["key_hash"] != hash || a["attempt"] != "1" || a["generation"] != "1" {
		t.Errorf("first call's record %v, want key_hash %s, attempt 1, generation 1", a, hash)
	}
	if a := attrs(recs[4]); a["error"] != "boom" {
		t.Errorf("handler error's record %v, want its error", a)
	}
}

// A store that is down fails every request: that is one line per window,
// with the count of those not logged, not one per request.
func TestLogTracerStorm(t *testing.T) {
	log := &logRecords{}
	tracer := idem.NewLogTracer(slog.New(log), idem.LogTracerOptions{Window: time.Hour})
	ctx := context.Background()
	outage := idem.TraceRequestEndData{Operation: "createOrder", Outcome: idem.OutcomeStoreUnavailable, Status: 503, Err: errors.New("dial tcp: connection refused")}
	for range 1000 {
		tracer.TraceRequestEnd(tracer.TraceRequestStart(ctx, idem.TraceRequestStartData{Operation: "createOrder"}), outage)
	}
	// Another operation's outage is a storm of its own.
	other := outage
	other.Operation = "createPayment"
	tracer.TraceRequestEnd(ctx, other)
	// Client mistakes are not storms: each is logged, at Info.
	for range 3 {
		tracer.TraceRequestEnd(ctx, idem.TraceRequestEndData{Operation: "createOrder", Outcome: idem.OutcomeMismatch, Status: 422})
	}
	recs := log.all()
	if len(recs) != 5 {
		t.Fatalf("%d records, want 1 per storm and 3 mismatches", len(recs))
	}
	if recs[0].Level != slog.LevelError || attrs(recs[0])["outcome"] != "store_unavailable" || attrs(recs[1])["operation"] != "createPayment" {
		t.Errorf("storm records: %v %v", attrs(recs[0]), attrs(recs[1]))
	}

}

// Every outcome has a name, and the names are distinct.
func TestOutcomeNames(t *testing.T) {
	seen := map[string]bool{}
	for _, o := range idem.Outcomes() {
		name := o.String()
		if name == "none" || seen[name] {
			t.Errorf("outcome %d named %q", o, name)
		}
		seen[name] = true
	}
	if len(seen) != 25 {
		t.Errorf("%d outcomes, want 25", len(seen))
	}
}
