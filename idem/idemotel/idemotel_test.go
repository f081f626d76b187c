package idemotel_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/idemotel"
	"github.com/idemgen/idemgen/idem/pgstore"
	"github.com/idemgen/idemgen/idem/redisfilter"
	"github.com/idemgen/idemgen/internal/pgtest"
	"github.com/idemgen/idemgen/internal/redistest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// otelKit is an engine on a real Postgres store that reports to an SDK
// with an in-memory reader and span recorder.
type otelKit struct {
	engine *idem.Engine[pgx.Tx]
	tracer *idemotel.Tracer
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
}

func newKit(t *testing.T, pool *pgxpool.Pool) *otelKit {
	t.Helper()
	k := &otelKit{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	k.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(k.spans))
	tracer, err := idemotel.New(idemotel.Options{
		MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(k.reader)),
		TracerProvider: k.tp,
	})
	if err != nil {
		t.Fatal(err)
	}
	k.tracer = tracer
	k.engine = idem.NewEngine(pgstore.New(pool, pgstore.Options{}), idem.Options{Tracer: tracer, Logger: slog.New(slog.DiscardHandler)})
	return k
}

func newPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := pgstore.Migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	return pool
}

func request(ctx context.Context, key string) context.Context {
	r := httptest.NewRequest("POST", "/orders", nil)
	if key != "" {
		r.Header.Set(idem.HeaderKey, key)
	}
	return idem.WithRequest(ctx, r.WithContext(ctx))
}

func created(body string) idem.Writer {
	return func(w http.ResponseWriter) error {
		w.WriteHeader(http.StatusCreated)
		_, err := io.WriteString(w, body)
		return err
	}
}

var (
	atomicOp = &idem.Operation{Name: "createOrder", TTL: time.Hour, Lease: time.Minute}
	phasedOp = &idem.Operation{Name: "createPayment", TTL: time.Hour, Lease: time.Minute, RecoveryPoints: []string{"charged"}}
)

// outcomes drives one request of each outcome the engine can give on a
// reachable store, counting the handler's runs, and returns how many of
// each it expects.
func outcomes(t *testing.T, e *idem.Engine[pgx.Tx]) map[string]int {
	t.Helper()
	ctx := context.Background()
	runs := 0
	ok := func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (idem.Writer, error) {
		runs++
		return created(`{"id":1}`), nil
	}
	serve := func(key, fp string, h idem.Handler[pgx.Tx]) *idem.Response {
		t.Helper()
		resp, err := e.Serve(request(ctx, key), atomicOp, []byte(fp), h)
		if err != nil {
			return &idem.Response{Status: 500}
		}
		return resp
	}
	if got := serve("k1", "a", ok).Status; got != 201 {
		t.Fatalf("first call: %d", got)
	}
	if resp := serve("k1", "a", ok); resp.Status != 201 || !resp.Replayed {
		t.Fatalf("replay: %+v", resp)
	}
	if got := serve("k1", "b", ok).Status; got != 422 {
		t.Fatalf("another request with the key: %d, want 422", got)
	}
	// A 409: a second request while the first holds the key.
	holding, release := make(chan struct{}), make(chan struct{})
	first := make(chan int)
	go func() {
		first <- serve("k2", "a", func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (idem.Writer, error) {
			close(holding)
			<-release
			return ok(ctx, at)
		}).Status
	}()
	<-holding
	if got := serve("k2", "a", ok).Status; got != 409 {
		t.Fatalf("while the first runs: %d, want 409", got)
	}
	close(release)
	if got := <-first; got != 201 {
		t.Fatalf("the held first call: %d", got)
	}
	if got := serve("", "a", ok).Status; got != 400 {
		t.Fatalf("no key: %d, want 400", got)
	}
	if got := serve("bad\x01key", "a", ok).Status; got != 400 {
		t.Fatalf("invalid key: %d, want 400", got)
	}
	if got := serve("k3", "a", func(context.Context, *idem.Attempt[pgx.Tx]) (idem.Writer, error) {
		return nil, errors.New("the payment provider refused")
	}).Status; got != 500 {
		t.Fatalf("handler error: %d, want 500", got)
	}
	// A phased attempt whose phase fails releases its lease, so that the
	// retry takes over, past the point it reached.
	phase := func(fail bool) idem.PhaseFunc[pgx.Tx] {
		return func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (string, idem.Writer, error) {
			if at.RecoveryPoint() == "" {
				return "charged", nil, nil
			}
			if fail {
				return "", nil, errors.New("crashed after the charge")
			}
			runs++
			return "", created(`{"id":2}`), nil
		}
	}
	if _, err := e.ServePhased(request(ctx, "p1"), phasedOp, []byte("a"), phase(true)); err == nil {
		t.Fatal("failing phase: no error")
	}
	if resp, err := e.ServePhased(request(ctx, "p1"), phasedOp, []byte("a"), phase(false)); err != nil || resp.Status != 201 {
		t.Fatalf("takeover: %+v, %v", resp, err)
	}
	if runs != 3 {
		t.Fatalf("the handler ran %d times, want 3 (k1, k2, p1)", runs)
	}
	return map[string]int{
		"createOrder first": 2, "createOrder replay": 1, "createOrder mismatch": 1, "createOrder conflict": 1,
		"createOrder missing_key": 1, "createOrder invalid_key": 1, "createOrder handler_error": 1,
		"createPayment handler_error": 1, "createPayment takeover": 1,
	}
}

// counts reads the idem.requests counter by operation and outcome, and
// fails on an attribute that holds the scope or a key.
func counts(t *testing.T, reader *sdkmetric.ManualReader) (map[string]int, metricdata.ResourceMetrics) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name == idemotel.ScopeName && sm.Scope.Version != idem.Version() {
			t.Errorf("the metrics' scope version is %q, want the runtime's, %q", sm.Scope.Version, idem.Version())
		}
		for _, m := range sm.Metrics {
			if m.Name != idemotel.MetricRequests {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				op, _ := dp.Attributes.Value(idemotel.AttrOperation)
				outcome, _ := dp.Attributes.Value(idemotel.AttrOutcome)
				got[op.AsString()+" "+outcome.AsString()] += int(dp.Value)
				for _, kv := range dp.Attributes.ToSlice() {
					if v := kv.Value.Emit(); strings.HasPrefix(v, "k1") || strings.HasPrefix(v, "p1") {
						t.Errorf("attribute %s holds a key: %q", kv.Key, v)
					}
				}
			}
		}
	}
	return got, rm
}

// Each outcome of a request is counted once, by operation and outcome,
// with its status; the time spent on the key and holding it is recorded.
func TestMetricsPerOutcome(t *testing.T) {
	k := newKit(t, newPool(t))
	want := outcomes(t, k.engine)

	// An unreachable store's 503, from an engine on the same tracer.
	down, err := pgxpool.New(context.Background(), "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=5")
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	e := idem.NewEngine(pgstore.New(down, pgstore.Options{}), idem.Options{Tracer: k.tracer, Logger: slog.New(slog.DiscardHandler)})
	if resp, err := e.Serve(request(context.Background(), "k9"), atomicOp, []byte("a"), nil); err != nil || resp.Status != 503 {
		t.Fatalf("unreachable store: %+v, %v", resp, err)
	}
	want["createOrder store_unavailable"] = 1

	// What the route's gate refuses counts too.
	gate := idem.Gate{Operation: "createOrder", Accept: []string{"application/json"}, JSON: []string{"application/json"}, Limit: 10, Tracer: k.tracer}
	for _, tc := range []struct{ ct, body, outcome string }{
		{"text/plain", "hello", "createOrder unsupported_media_type"},
		{"application/json", `{"too": "large for ten bytes"}`, "createOrder body_too_large"},
	} {
		r := httptest.NewRequest("POST", "/orders", strings.NewReader(tc.body))
		r.Header.Set("Content-Type", tc.ct)
		if gate.Pass(httptest.NewRecorder(), r) {
			t.Fatalf("the gate let %s through", tc.outcome)
		}
		want[tc.outcome] = 1
	}

	got, rm := counts(t, k.reader)
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s: counted %d, want %d", k, got[k], n)
		}
	}
	for k, n := range got {
		if want[k] == 0 {
			t.Errorf("%s: counted %d, want none", k, n)
		}
	}
	// Every request that ran an attempt recorded the time it held the
	// key; every one that reached the store, its lookup.
	var held, lookups uint64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch m.Name {
			case idemotel.MetricHeldDuration:
				for _, dp := range m.Data.(metricdata.Histogram[float64]).DataPoints {
					held += dp.Count
				}
			case idemotel.MetricLookupDuration:
				for _, dp := range m.Data.(metricdata.Histogram[float64]).DataPoints {
					lookups += dp.Count
				}
			}
		}
	}
	// Attempts: k1, k2, k3 (failed), p1 twice.
	if held != 5 {
		t.Errorf("%d attempt durations recorded, want 5", held)
	}
	// Lookups: every keyed request on the reachable store (k1 three
	// times, k2 twice, k3, p1 twice); the unreachable one failed before.
	if lookups != 8 {
		t.Errorf("%d lookup durations recorded, want 8", lookups)
	}
}

// A request's span is a child of the caller's, with a child per step:
// lookup (which claims a free key in the same statement), the attempt,
// whose context the handler gets, and the commit. A replay, a 409 and a
// 422 are a lookup alone. The key is never an attribute; its hash is.
func TestTraceSpans(t *testing.T) {
	k := newKit(t, newPool(t))
	tr := k.tp.Tracer("test")
	ok := func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (idem.Writer, error) {
		_, span := tr.Start(ctx, "charge card")
		span.End()
		return created(`{"id":1}`), nil
	}
	call := func(name, key, fp string, h idem.Handler[pgx.Tx]) int {
		ctx, parent := tr.Start(context.Background(), name)
		defer parent.End()
		resp, err := k.engine.Serve(request(ctx, key), atomicOp, []byte(fp), h)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return resp.Status
	}
	if got := call("first", "secret-key-1", "a", ok); got != 201 {
		t.Fatalf("first: %d", got)
	}
	if got := call("replay", "secret-key-1", "a", ok); got != 201 {
		t.Fatalf("replay: %d", got)
	}
	if got := call("mismatch", "secret-key-1", "b", ok); got != 422 {
		t.Fatalf("mismatch: %d", got)
	}
	holding, release, done := make(chan struct{}), make(chan struct{}), make(chan int)
	go func() {
		done <- call("holder", "secret-key-2", "a", func(ctx context.Context, at *idem.Attempt[pgx.Tx]) (idem.Writer, error) {
			close(holding)
			<-release
			return created("{}"), nil
		})
	}()
	<-holding
	if got := call("conflict", "secret-key-2", "a", ok); got != 409 {
		t.Fatalf("conflict: %d", got)
	}
	close(release)
	<-done

	spans := k.spans.Ended()
	byID := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byID[s.SpanContext().SpanID().String()] = s
		for _, kv := range s.Attributes() {
			if strings.Contains(kv.Value.Emit(), "secret-key") {
				t.Errorf("span %q attribute %s holds the key", s.Name(), kv.Key)
			}
		}
	}
	// tree returns the names under the caller's span called name: the
	// request's span, then its children in order, with its outcome.
	tree := func(name string) (string, []string, attribute.Set) {
		for _, root := range spans {
			if root.Name() != name {
				continue
			}
			var req sdktrace.ReadOnlySpan
			for _, s := range spans {
				if s.Parent().SpanID() == root.SpanContext().SpanID() {
					req = s
				}
			}
			if req == nil {
				t.Fatalf("%s: no request span under it", name)
			}
			var children []string
			for _, s := range spans {
				if s.Parent().SpanID() == req.SpanContext().SpanID() {
					children = append(children, s.Name())
					for _, g := range spans {
						if g.Parent().SpanID() == s.SpanContext().SpanID() {
							children = append(children, s.Name()+"/"+g.Name())
						}
					}
				}
			}
			return req.Name(), children, attribute.NewSet(req.Attributes()...)
		}
		t.Fatalf("no span %s", name)
		return "", nil, attribute.Set{}
	}
	for _, tc := range []struct {
		call, outcome string
		steps         string
	}{
		{"first", "first", "idem lookup,idem attempt,idem attempt/charge card,idem commit"},
		{"replay", "replay", "idem lookup"},
		{"mismatch", "mismatch", "idem lookup"},
		{"conflict", "conflict", "idem lookup"},
	} {
		name, children, attrs := tree(tc.call)
		if name != "idem createOrder" {
			t.Errorf("%s: request span %q, want idem createOrder", tc.call, name)
		}
		if got := strings.Join(children, ","); got != tc.steps {
			t.Errorf("%s: steps %q, want %q", tc.call, got, tc.steps)
		}
		if v, _ := attrs.Value(idemotel.AttrOutcome); v.AsString() != tc.outcome {
			t.Errorf("%s: outcome %q, want %q", tc.call, v.AsString(), tc.outcome)
		}
		if v, _ := attrs.Value(idemotel.AttrKeyHash); len(v.AsString()) != 12 {
			t.Errorf("%s: key hash %q", tc.call, v.AsString())
		}
	}
}

// The janitor's and the completer's runs are counted by what they did;
// a completer's run leaves the janitor's count of abandoned attempts as
// the last sweep found it.
func TestMaintenanceCounts(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	tracer, err := idemotel.New(idemotel.Options{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tracer.TraceMaintenance(ctx, idem.TraceMaintenanceData{Abandoned: 3, Failed: 2, Deleted: 5, Emptied: 1})
	tracer.TraceMaintenance(ctx, idem.TraceMaintenanceData{Completer: true, Completed: 2, CompletionFailed: 1})
	tracer.TraceMaintenance(ctx, idem.TraceMaintenanceData{Completer: true, Err: context.DeadlineExceeded})
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch data := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range data.DataPoints {
					name := m.Name
					for _, kv := range dp.Attributes.ToSlice() {
						name += " " + kv.Value.Emit()
					}
					got[name] += dp.Value
				}
			case metricdata.Gauge[int64]:
				for _, dp := range data.DataPoints {
					got[m.Name] = dp.Value
				}
			}
		}
	}
	want := map[string]int64{
		idemotel.MetricAbandoned:                          3,
		idemotel.MetricSwept:                              2,
		idemotel.MetricReaped + " deleted":                5,
		idemotel.MetricReaped + " emptied":                1,
		idemotel.MetricCompleter + " completed":           2,
		idemotel.MetricCompleter + " failed":              1,
		idemotel.MetricJanitorRuns + " janitor":           1,
		idemotel.MetricJanitorRuns + " completer":         1,
		idemotel.MetricJanitorRuns + " timeout completer": 1,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %d, want %d", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// The replay filter's lookups are counted by result: the first replay
// misses and fills it, the next ones hit; without Redis, they fail.
func TestFilterMetrics(t *testing.T) {
	srv := redistest.Start(t)
	// A long timeout: a first call that dials Redis on a loaded machine
	// must not count as failed.
	cache, err := redisfilter.New(srv.Client(t), redisfilter.Options{Backoff: time.Nanosecond, Timeout: 10 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	k := newKit(t, newPool(t))
	k.engine = idem.NewEngine(pgstore.New(newPool(t), pgstore.Options{ReplayCache: cache}), idem.Options{Tracer: k.tracer, Logger: slog.New(slog.DiscardHandler)})
	serve := func() {
		t.Helper()
		if _, err := k.engine.Serve(request(context.Background(), "k1"), atomicOp, []byte("fp"), func(context.Context, *idem.Attempt[pgx.Tx]) (idem.Writer, error) {
			return created(`{}`), nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	for range 4 { // first, a replay that fills, two hits
		serve()
	}
	srv.Stop()
	serve()
	var rm metricdata.ResourceMetrics
	if err := k.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != idemotel.MetricFilter {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				result, _ := dp.Attributes.Value(idemotel.AttrFilter)
				got[result.AsString()] += dp.Value
			}
		}
	}
	if want := map[string]int64{"miss": 2, "hit": 2, "failed": 1}; !maps.Equal(got, want) {
		t.Fatalf("%s: %v, want %v", idemotel.MetricFilter, got, want)
	}
}

// A worker's run of an accepted request is counted as a run, by its
// outcome, not as a request: its client's request was counted when it
// was accepted.
func TestWorkerRunsCounted(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	tracer, err := idemotel.New(idemotel.Options{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tracer.TraceRequestEnd(tracer.TraceRequestStart(ctx, idem.TraceRequestStartData{Operation: "createExport"}),
		idem.TraceRequestEndData{Operation: "createExport", Outcome: idem.OutcomeAccepted, Status: 202})
	for _, o := range []idem.Outcome{idem.OutcomeHandlerError, idem.OutcomeFirst} {
		tracer.TraceRequestEnd(tracer.TraceRequestStart(ctx, idem.TraceRequestStartData{Operation: "createExport", Worker: true}),
			idem.TraceRequestEndData{Operation: "createExport", Outcome: o, Worker: true})
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if data, ok := m.Data.(metricdata.Sum[int64]); ok {
				for _, dp := range data.DataPoints {
					name := m.Name
					if v, ok := dp.Attributes.Value(idemotel.AttrOutcome); ok {
						name += " " + v.Emit()
					}
					got[name] += dp.Value
				}
			}
		}
	}
	want := map[string]int64{
		idemotel.MetricRequests + " accepted":        1,
		idemotel.MetricWorkerRuns + " handler_error": 1,
		idemotel.MetricWorkerRuns + " first":         1,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %d, want %d (all: %v)", k, got[k], v, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
