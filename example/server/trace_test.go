package server_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/idemgen/idemgen/example/server"
	"github.com/idemgen/idemgen/internal/pgtest"
)

// An async request's trace leads to its run on a worker: River's
// OpenTelemetry middleware puts the request's trace in the job it
// inserts, the span of the job's run links back to the request's span,
// and the layer's span of the run is a child of River's.
func TestExportTraceLeadsToItsRun(t *testing.T) {
	t.Parallel()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	srv, err := server.Start(context.Background(), server.Config{
		DatabaseURL:    pgtest.NewDatabase(t),
		AuthSecret:     testSecret,
		Logger:         slog.New(slog.DiscardHandler),
		TracerProvider: tp,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()

	req, err := http.NewRequest("POST", srv.URL+"/exports", strings.NewReader(`{"format": "csv"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "trace-1")
	authorize(req, "acct_1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("export: %d %s, want 202", resp.StatusCode, body)
	}

	named := func(name string) sdktrace.ReadOnlySpan {
		i := slices.IndexFunc(spans.Ended(), func(s sdktrace.ReadOnlySpan) bool { return s.Name() == name })
		if i < 0 {
			return nil
		}
		return spans.Ended()[i]
	}
	// A worker runs the export when River hands it one: nothing outside
	// the server signals it but the span's end. The bound stops a hang.
	deadline := time.Now().Add(time.Minute)
	for named("idem run createExport") == nil {
		if time.Now().After(deadline) {
			t.Fatal("no span of the export's run within a minute")
		}
		time.Sleep(20 * time.Millisecond)
	}
	request, work, run := named("idem createExport"), named("river.work/idem.createExport"), named("idem run createExport")
	if request == nil || work == nil {
		t.Fatalf("spans of the request (%v) or of River's work (%v) missing", request != nil, work != nil)
	}
	// The link is to the span current where the job was inserted: the
	// request's, or one of its steps'.
	byID := map[[8]byte]sdktrace.ReadOnlySpan{}
	for _, s := range spans.Ended() {
		byID[s.SpanContext().SpanID()] = s
	}
	within := func(id [8]byte) bool {
		for s := byID[id]; s != nil; s = byID[s.Parent().SpanID()] {
			if s.SpanContext().SpanID() == request.SpanContext().SpanID() {
				return true
			}
		}
		return false
	}
	if !slices.ContainsFunc(work.Links(), func(l sdktrace.Link) bool { return within(l.SpanContext.SpanID()) }) {
		t.Errorf("River's work span links to %v, not to the request's span %v or a span within it", work.Links(), request.SpanContext())
	}
	if run.Parent().SpanID() != work.SpanContext().SpanID() {
		t.Errorf("the run's span has parent %v, want River's work span %v", run.Parent().SpanID(), work.SpanContext().SpanID())
	}
}
