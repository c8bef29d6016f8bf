package processor

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
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

// BenchmarkHandleSpan is one record's tracing alone, on one goroutine:
// the handle span started from the input's headers, its context injected
// into one output and the span ended (always sampled, batched to a no-op
// exporter).
func BenchmarkHandleSpan(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	defer tp.Shutdown(b.Context())
	tr := tp.Tracer(tracerName)
	it := &item{rec: &kgo.Record{Topic: "in", Key: []byte("k")}, outputs: []*kgo.Record{{}}}
	b.ReportAllocs()
	for b.Loop() {
		ctx, span := startHandle(b.Context(), tr, it)
		it.outputs[0].Headers = it.outputs[0].Headers[:0]
		endHandle(ctx, span, it, "", nil)
	}
}
