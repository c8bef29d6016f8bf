package processor_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/processor"
)

// BenchmarkObservabilityOverhead runs 20,000 records through a copy
// handler on kfake (4 partitions, 1,000 sessions) with instrumentation
// off, with metrics, and with metrics and tracing (every record sampled,
// spans batched to a no-op exporter), and reports records/s:
//
//	go test -run '^$' -bench ObservabilityOverhead -benchtime 3x ./processor/
func BenchmarkObservabilityOverhead(b *testing.B) {
	const records = 20_000
	for _, mode := range []string{"off", "metrics", "metrics+tracing"} {
		b.Run(mode, func(b *testing.B) {
			var total time.Duration
			for b.Loop() {
				b.StopTimer()
				c := kafkatest.New(b)
				pl := &pipeline{c: c, in: c.CreateTopic(b, "in", 4, nil), out: c.CreateTopic(b, "out", 4, nil),
					dlq: c.CreateTopic(b, "dlq", 1, nil), group: kafkatest.Name(b, "app"), inputs: records, sessions: 1000}
				pl.produce(b, 0, records)
				opts := pl.opts("i1", copyHandler)
				var tp *sdktrace.TracerProvider
				if mode != "off" {
					opts = append(opts, processor.WithMetrics(prometheus.NewRegistry()))
				}
				if mode == "metrics+tracing" {
					tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
					opts = append(opts, processor.WithTracerProvider(tp))
				}
				p, err := processor.New(opts...)
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				b.StartTimer()
				t0 := time.Now()
				go func() { done <- p.Run(ctx) }()
				for p.Stats().Outputs < records {
					time.Sleep(time.Millisecond)
				}
				total += time.Since(t0)
				b.StopTimer()
				cancel()
				if err := <-done; err != nil {
					b.Fatal(err)
				}
				if tp != nil {
					_ = tp.Shutdown(context.Background())
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(records*b.N)/total.Seconds(), "records/s")
		})
	}
}
