package processor

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// BenchmarkDispatchTrackCompleteMetrics is BenchmarkDispatchTrackComplete
// with metrics on: the per-record path must cost the same.
func BenchmarkDispatchTrackCompleteMetrics(b *testing.B) {
	benchDispatch(b, WithMetrics(prometheus.NewRegistry()))
}

// BenchmarkDispatchTrackCompleteTraced is BenchmarkDispatchTrackComplete
// with every record traced (always sampled, spans batched to a no-op
// exporter): the per-record cost of tracing.
func BenchmarkDispatchTrackCompleteTraced(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	defer tp.Shutdown(b.Context())
	benchDispatch(b, WithTracerProvider(tp))
}
