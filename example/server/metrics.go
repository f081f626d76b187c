package server

import (
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/idemgen/idemgen/idem/idemotel"
)

// telemetry is the example's OpenTelemetry: the idempotency layer's
// metrics, and the janitor's, exported for Prometheus to scrape at
// GET /metrics. Its registry is its own, so that two servers in one
// process (as in tests) count apart.
type telemetry struct {
	tracer   *idemotel.Tracer
	provider *sdkmetric.MeterProvider
	metrics  http.Handler
}

func newTelemetry() (*telemetry, error) {
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, fmt.Errorf("start the Prometheus exporter: %w", err)
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	tracer, err := idemotel.New(idemotel.Options{MeterProvider: provider})
	if err != nil {
		return nil, err
	}
	return &telemetry{
		tracer:   tracer,
		provider: provider,
		metrics:  promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
	}, nil
}
