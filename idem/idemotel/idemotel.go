// Package idemotel reports the Idempotency-Key layer to OpenTelemetry: a
// counter of requests by operation and outcome, histograms of the time
// spent claiming keys and holding them, the janitor's counts, and a span
// per request with a child per step. Set its Tracer as idem.Options.Tracer
// and as the janitor's (pgstore.JanitorOptions.Tracer).
//
// It depends on OpenTelemetry's API only: without an SDK installed, the
// global providers are no-ops and it costs next to nothing.
//
// The scope and the key are never attribute values: they are unbounded,
// and a key may be a client's secret. Spans carry idem.key_hash instead
// (idem.KeyHash), which logs and `idemgen keys list` show too.
package idemotel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemgen/idemgen/idem"
)

// ScopeName is the instrumentation scope of the meter and the tracer.
const ScopeName = "github.com/idemgen/idemgen/idem"

// Attribute keys. The outcome is one of idem.Outcome's names.
const (
	AttrOperation  = attribute.Key("idem.operation")
	AttrOutcome    = attribute.Key("idem.outcome")
	AttrKeyHash    = attribute.Key("idem.key_hash")
	AttrAttempt    = attribute.Key("idem.attempt")
	AttrGeneration = attribute.Key("idem.generation")
	AttrPoint      = attribute.Key("idem.recovery_point")
	AttrLeaseLost  = attribute.Key("idem.lease_lost")
	AttrAction     = attribute.Key("idem.action")
	AttrTask       = attribute.Key("idem.task") // janitor or completer
	AttrFilter     = attribute.Key("idem.filter.result")
	// attrStatus and attrErrorType follow OpenTelemetry's semantic
	// conventions for HTTP and errors.
	attrStatus    = attribute.Key("http.response.status_code")
	attrErrorType = attribute.Key("error.type")
)

// Options configure New; the zero value uses OpenTelemetry's global
// providers.
type Options struct {
	MeterProvider  metric.MeterProvider
	TracerProvider trace.TracerProvider
}

// Tracer is an idem.Tracer, idem.StepTracer and idem.MaintenanceTracer
// that reports to OpenTelemetry.
type Tracer struct {
	tracer trace.Tracer

	requests  metric.Int64Counter
	lookup    metric.Float64Histogram
	held      metric.Float64Histogram
	leaseLost metric.Int64Counter
	filter    metric.Int64Counter

	abandoned  metric.Int64Gauge
	swept      metric.Int64Counter
	reaped     metric.Int64Counter
	completer  metric.Int64Counter
	runs       metric.Int64Counter
	workerRuns metric.Int64Counter
}

// The instruments' names, as an exporter shows them before its own
// renaming (Prometheus: idem_requests_total, idem_lookup_duration_seconds).
const (
	MetricRequests       = "idem.requests"
	MetricLookupDuration = "idem.lookup.duration"
	MetricHeldDuration   = "idem.attempt.duration"
	MetricLeaseLost      = "idem.lease.lost"
	MetricFilter         = "idem.filter.lookups"
	MetricAbandoned      = "idem.janitor.abandoned"
	MetricSwept          = "idem.janitor.swept"
	MetricReaped         = "idem.janitor.reaped"
	MetricCompleter      = "idem.janitor.completer"
	MetricJanitorRuns    = "idem.janitor.runs"
	MetricWorkerRuns     = "idem.async.runs"
)

// New returns a Tracer on the providers opts names.
func New(opts Options) (*Tracer, error) {
	mp, tp := opts.MeterProvider, opts.TracerProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	// The scope's version is the runtime's, so a rolling upgrade's two
	// releases are told apart in the metrics and spans.
	m := mp.Meter(ScopeName, metric.WithInstrumentationVersion(idem.Version()))
	t := &Tracer{tracer: tp.Tracer(ScopeName, trace.WithInstrumentationVersion(idem.Version()))}
	// Buckets for durations from a replay's lookup (a millisecond) to an
	// attempt that holds its key for a lease (a minute).
	buckets := metric.WithExplicitBucketBoundaries(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
	var err, e error
	add := func(e error) {
		if err == nil && e != nil {
			err = e
		}
	}
	t.requests, e = m.Int64Counter(MetricRequests, metric.WithUnit("{request}"),
		metric.WithDescription("Requests of annotated operations, by operation and outcome (idem.outcome: first, replay, conflict, mismatch, ...)."))
	add(e)
	t.lookup, e = m.Float64Histogram(MetricLookupDuration, metric.WithUnit("s"), buckets,
		metric.WithDescription("Time a request spent reading and claiming its key, before its handler ran or its answer was decided."))
	add(e)
	t.held, e = m.Float64Histogram(MetricHeldDuration, metric.WithUnit("s"), buckets,
		metric.WithDescription("Time a request's attempt held its key: the handler, or the phases, with their commits."))
	add(e)
	t.leaseLost, e = m.Int64Counter(MetricLeaseLost, metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts that lost their key because they outran their lease and another attempt or the sweeper took it."))
	add(e)
	t.filter, e = m.Int64Counter(MetricFilter, metric.WithUnit("{request}"),
		metric.WithDescription("Lookups of the store's replay filter (Redis), by idem.filter.result: hit (answered without PostgreSQL), miss, or failed (Redis down or slow; PostgreSQL answered)."))
	add(e)
	t.abandoned, e = m.Int64Gauge(MetricAbandoned, metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts abandoned partway (their lease passed long ago and no retry came), as the janitor's last run found them."))
	add(e)
	t.swept, e = m.Int64Counter(MetricSwept, metric.WithUnit("{attempt}"),
		metric.WithDescription("Abandoned attempts the janitor ended with the attempt-abandoned answer."))
	add(e)
	t.reaped, e = m.Int64Counter(MetricReaped, metric.WithUnit("{key}"),
		metric.WithDescription("Expired keys the janitor reaped, by idem.action: deleted, emptied to keep their generation, or deleted_emptied once emptied long enough."))
	add(e)
	t.completer, e = m.Int64Counter(MetricCompleter, metric.WithUnit("{attempt}"),
		metric.WithDescription("Abandoned attempts the completer drove to the end, by idem.action: completed or failed."))
	add(e)
	t.workerRuns, e = m.Int64Counter(MetricWorkerRuns, metric.WithUnit("{run}"),
		metric.WithDescription("Runs of async operations' accepted requests on workers, by operation and outcome (first or takeover: the response was stored; handler_error: the job is retried; ...)."))
	add(e)
	t.runs, e = m.Int64Counter(MetricJanitorRuns, metric.WithUnit("{run}"),
		metric.WithDescription("Runs of the janitor and the completer, by idem.task; error.type is set on runs that failed."))
	add(e)
	if err != nil {
		return nil, fmt.Errorf("idemotel: %w", err)
	}
	return t, nil
}

var (
	_ idem.Tracer            = (*Tracer)(nil)
	_ idem.StepTracer        = (*Tracer)(nil)
	_ idem.MaintenanceTracer = (*Tracer)(nil)
)

// TraceRequestStart starts the request's span, a child of the one in ctx
// (an HTTP server span, say).
func (t *Tracer) TraceRequestStart(ctx context.Context, d idem.TraceRequestStartData) context.Context {
	name := "idem " + d.Operation
	switch {
	case d.Completer:
		name = "idem complete " + d.Operation
	case d.Worker:
		name = "idem run " + d.Operation
	}
	ctx, _ = t.tracer.Start(ctx, name,
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(AttrOperation.String(d.Operation)))
	return ctx
}

// TraceRequestEnd counts the request and ends its span.
func (t *Tracer) TraceRequestEnd(ctx context.Context, d idem.TraceRequestEndData) {
	outcome := d.Outcome.String()
	switch {
	case d.Completer:
		// The completer's runs are counted by the janitor's counters.
	case d.Worker:
		t.workerRuns.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(
			AttrOperation.String(d.Operation),
			AttrOutcome.String(outcome))))
	default:
		t.requests.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(
			AttrOperation.String(d.Operation),
			AttrOutcome.String(outcome),
			attrStatus.Int(d.Status))))
	}
	op := metric.WithAttributeSet(attribute.NewSet(AttrOperation.String(d.Operation)))
	if d.Lookup > 0 {
		t.lookup.Record(ctx, d.Lookup.Seconds(), op)
	}
	if d.Held > 0 {
		t.held.Record(ctx, d.Held.Seconds(), metric.WithAttributeSet(attribute.NewSet(
			AttrOperation.String(d.Operation), AttrOutcome.String(outcome))))
	}
	if d.LeaseLost > 0 {
		t.leaseLost.Add(ctx, int64(d.LeaseLost), op)
	}
	if d.Filter != idem.FilterNone {
		t.filter.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(
			AttrOperation.String(d.Operation), AttrFilter.String(d.Filter.String()))))
	}

	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		span.End()
		return
	}
	span.SetAttributes(AttrOutcome.String(outcome), attrStatus.Int(d.Status))
	if hash := d.KeyHash(); hash != "" {
		span.SetAttributes(AttrKeyHash.String(hash))
	}
	if d.Attempt > 0 {
		span.SetAttributes(AttrAttempt.Int64(d.Attempt), AttrGeneration.Int64(d.Generation))
	}
	if d.RecoveryPoint != "" {
		span.SetAttributes(AttrPoint.String(d.RecoveryPoint))
	}
	if d.LeaseLost > 0 {
		span.SetAttributes(AttrLeaseLost.Int(d.LeaseLost))
	}
	if d.Filter != idem.FilterNone {
		span.SetAttributes(AttrFilter.String(d.Filter.String()))
	}
	if d.Err != nil {
		span.RecordError(d.Err)
	}
	// A client's mistake, a 409 or a replay is the layer doing its job;
	// only what fails on the server marks the span failed.
	if d.Outcome == idem.OutcomeHandlerError || d.Outcome == idem.OutcomeLeaseOverrun || d.Outcome == idem.OutcomeCommitFailed || d.Outcome.StoreTrouble() {
		span.SetAttributes(attrErrorType.String(outcome))
		span.SetStatus(codes.Error, outcome)
	}
	span.End()
}

// TraceStepStart starts the step's span, a child of the request's.
func (t *Tracer) TraceStepStart(ctx context.Context, d idem.TraceStepData) context.Context {
	attrs := []attribute.KeyValue{AttrOperation.String(d.Operation)}
	if d.RecoveryPoint != "" {
		attrs = append(attrs, AttrPoint.String(d.RecoveryPoint))
	}
	ctx, _ = t.tracer.Start(ctx, "idem "+d.Step.String(), trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	return ctx
}

// TraceStepEnd ends the step's span, recording its error.
func (t *Tracer) TraceStepEnd(ctx context.Context, _ idem.TraceStepData, _ time.Duration, err error) {
	span := trace.SpanFromContext(ctx)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// TraceMaintenance counts what a janitor run found and did.
func (t *Tracer) TraceMaintenance(ctx context.Context, d idem.TraceMaintenanceData) {
	task := AttrTask.String("janitor")
	if d.Completer {
		task = AttrTask.String("completer")
	} else {
		t.abandoned.Record(ctx, int64(d.Abandoned))
	}
	if d.Failed > 0 {
		t.swept.Add(ctx, int64(d.Failed))
	}
	if d.Deleted > 0 {
		t.reaped.Add(ctx, int64(d.Deleted), metric.WithAttributes(AttrAction.String("deleted")))
	}
	if d.Emptied > 0 {
		t.reaped.Add(ctx, int64(d.Emptied), metric.WithAttributes(AttrAction.String("emptied")))
	}
	if d.DeletedEmptied > 0 {
		t.reaped.Add(ctx, int64(d.DeletedEmptied), metric.WithAttributes(AttrAction.String("deleted_emptied")))
	}
	if d.Completed > 0 {
		t.completer.Add(ctx, int64(d.Completed), metric.WithAttributes(AttrAction.String("completed")))
	}
	if d.CompletionFailed > 0 {
		t.completer.Add(ctx, int64(d.CompletionFailed), metric.WithAttributes(AttrAction.String("failed")))
	}
	if d.Err != nil {
		t.runs.Add(ctx, 1, metric.WithAttributes(task, attrErrorType.String(errorType(d.Err))))
		return
	}
	t.runs.Add(ctx, 1, metric.WithAttributes(task))
}

// errorType is a failed run's error.type: low in cardinality, as the
// conventions ask.
func errorType(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return "timeout"
	}
	return "_OTHER"
}
