package server

import (
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/riverqueue/river/rivertype"
	"github.com/riverqueue/rivercontrib/otelriver"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemgen/idemgen/idem/idemotel"
)

// telemetry is the example's OpenTelemetry: the idempotency layer's
// metrics, and the janitor's and River's, exported for Prometheus to
// scrape at GET /metrics; its spans go to the TracerProvider given (the
// global one by default). Its registry is its own, so that two servers
// in one process (as in tests) count apart.
type telemetry struct {
	tracer   *idemotel.Tracer
	provider *sdkmetric.MeterProvider
	metrics  http.Handler
	// river is River's OpenTelemetry middleware: it puts the trace of the
	// request that inserts a job in the job, and links the span of the
	// job's run to it, so that an async request's trace leads to its run.
	river rivertype.Middleware
}

func newTelemetry(tp trace.TracerProvider) (*telemetry, error) {
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, fmt.Errorf("start the Prometheus exporter: %w", err)
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	tracer, err := idemotel.New(idemotel.Options{MeterProvider: provider, TracerProvider: tp})
	if err != nil {
		return nil, err
	}
	return &telemetry{
		tracer:   tracer,
		provider: provider,
		metrics:  promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
		river: otelriver.NewMiddleware(&otelriver.MiddlewareConfig{
			EnableTracePropagation: true, EnableWorkSpanJobKindSuffix: true, MeterProvider: provider, TracerProvider: tp,
		}),
	}, nil
}
