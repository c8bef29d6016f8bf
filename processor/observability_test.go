package processor_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/internal/verify"
	"github.com/onceflow/onceflow/processor"
)

// metricValue sums the samples of the named family whose labels include
// the given name=value pairs.
func metricValue(t *testing.T, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	require.NoError(t, err)
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					found = found || (lp.GetName() == labels[i] && lp.GetValue() == labels[i+1])
				}
				if !found {
					continue metric
				}
			}
			switch {
			case m.GetCounter() != nil:
				sum += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				sum += m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				sum += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return sum
}

// TestMetricsAgreeWithStats: after a run with retries and dead letters,
// the Prometheus counters equal Stats and the verified output counts.
func TestMetricsAgreeWithStats(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		pl := newPipeline(t, c, 3, 2000, 100)
		pl.produce(t, 0, pl.inputs)
		var mu sync.Mutex
		failed := make(map[uint64]bool) // ids that failed once
		h := func(ctx context.Context, r *kgo.Record, out processor.Emitter) error {
			p, err := verify.Decode(r.Value)
			if err != nil {
				return processor.Permanent(err)
			}
			switch {
			case p.ID%101 == 0:
				return processor.Permanent(errors.New("poison"))
			case p.ID%13 == 0:
				mu.Lock()
				first := !failed[p.ID]
				failed[p.ID] = true
				mu.Unlock()
				if first {
					return errors.New("transient")
				}
			}
			return copyHandler(ctx, r, out)
		}
		reg := prometheus.NewRegistry()
		opts := append(pl.opts("i1", h), processor.WithMetrics(reg), processor.WithRetryPolicy(processor.RetryPolicy{
			Initial: time.Millisecond, Max: time.Millisecond, Multiplier: 1, Jitter: -1, MaxAttempts: 5,
		}))
		r := start(t, opts...)
		pl.waitDone(t, 60*time.Second)
		// The client's own metrics (kprom) are on the same registry while
		// its client lives.
		mfs, err := reg.Gather()
		require.NoError(t, err)
		kafka := 0
		for _, mf := range mfs {
			if strings.HasPrefix(mf.GetName(), "onceflow_kafka_") {
				kafka++
			}
		}
		require.Positive(t, kafka, "kprom metrics missing")
		require.NoError(t, r.stop(t))
		rep := pl.read(t)
		require.True(t, rep.ExactlyOnce(), rep.String())
		require.Positive(t, rep.DLQ)

		s := r.p.Stats()
		val := func(name string, labels ...string) int64 {
			return int64(metricValue(t, reg, "onceflow_"+name, labels...))
		}
		require.Equal(t, s.Consumed, val("records_consumed_total"))
		require.Equal(t, s.SkippedDone, val("records_skipped_done_total"))
		require.Equal(t, s.Outputs, val("records_produced_total"))
		require.Equal(t, int64(rep.Outputs), val("records_produced_total"))
		require.Equal(t, s.DeadLettered, val("records_dead_lettered_total"))
		require.Equal(t, int64(rep.DLQ), val("records_dead_lettered_total", "reason", "permanent"))
		require.Zero(t, val("records_dead_lettered_total", "reason", "stuck"))
		require.Equal(t, s.Retries, val("retries_total"))
		require.Positive(t, s.Retries)
		require.Equal(t, s.Commits, val("transactions_committed_total"))
		require.Equal(t, s.Commits, val("commit_duration_seconds"), "one latency sample per committed transaction")
		require.Equal(t, s.Aborts, val("transactions_aborted_total"))
		require.Equal(t, s.Fenced, val("fenced_total"))
		require.Equal(t, s.Rebuilds, val("client_rebuilds_total"))
		require.Equal(t, s.Rebalances, val("rebalances_total"))
		require.Positive(t, s.Rebalances)
		require.Equal(t, s.Reprocessed, val("records_reprocessed_total"))
		require.Equal(t, s.StateRestored, val("state_restored_records_total"))
		require.Equal(t, "i1", labelOf(t, reg, "onceflow_records_consumed_total", "instance"))
		// Everything was handled: no unfinished records, no lag.
		require.Zero(t, val("inflight_records"))
		require.Zero(t, val("consumer_lag_records"))

		// Our own metrics follow the Prometheus conventions.
		problems, err := testutil.GatherAndLint(reg)
		require.NoError(t, err)
		for _, p := range problems {
			require.True(t, strings.HasPrefix(p.Metric, "onceflow_kafka_"), "lint: %s: %s", p.Metric, p.Text)
		}
	})
}

func labelOf(t *testing.T, g prometheus.Gatherer, name, label string) string {
	mfs, err := g.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, lp := range mf.GetMetric()[0].GetLabel() {
				if lp.GetName() == label {
					return lp.GetValue()
				}
			}
		}
	}
	return ""
}

// TestTracePropagation follows one record from its producer's span to its
// output: the handle span is a child of the producer's span, the output
// carries the handle span's context, and the dead letter carries its own.
func TestTracePropagation(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		pl := newPipeline(t, c, 2, 20, 20)
		sr := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
		t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

		ctx, producer := tp.Tracer("test").Start(context.Background(), "produce")
		rs := make([]*kgo.Record, 0, pl.inputs)
		for i := range pl.inputs {
			r := &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)}
			if i == 7 || i == 13 {
				propagation.TraceContext{}.Inject(ctx, kgoCarrier{r})
			}
			rs = append(rs, r)
		}
		producer.End()
		cl := c.Client(t, kgo.DefaultProduceTopic(pl.in))
		require.NoError(t, cl.ProduceSync(context.Background(), rs...).FirstErr())

		var handlerSpan trace.SpanContext
		h := func(ctx context.Context, r *kgo.Record, out processor.Emitter) error {
			switch string(r.Value) {
			case "v7":
				handlerSpan = trace.SpanContextFromContext(ctx)
			case "v13":
				return processor.Permanent(errors.New("poison"))
			}
			out.Emit(&kgo.Record{Value: r.Value, Headers: r.Headers})
			return nil
		}
		r := start(t, append(pl.opts("i1", h), processor.WithTracerProvider(tp))...)
		var outs, dlqs []*kgo.Record
		require.Eventually(t, func() bool {
			outs, dlqs = c.ReadCommitted(t, pl.out), c.ReadCommitted(t, pl.dlq)
			return len(outs) == pl.inputs-1 && len(dlqs) == 1
		}, 60*time.Second, 200*time.Millisecond)
		require.NoError(t, r.stop(t))

		var out *kgo.Record
		for _, o := range outs {
			if string(o.Value) == "v7" {
				out = o
			}
		}
		require.NotNil(t, out)
		outSC := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), kgoCarrier{out}))
		dlqSC := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), kgoCarrier{dlqs[0]}))
		in := producer.SpanContext()
		require.Equal(t, in.TraceID(), outSC.TraceID())
		require.Equal(t, in.TraceID(), dlqSC.TraceID())
		require.Equal(t, handlerSpan.SpanID(), outSC.SpanID(), "the output carries the handle span")
		require.NotEqual(t, outSC.SpanID(), dlqSC.SpanID())

		handles, commits := 0, 0
		var handle sdktrace.ReadOnlySpan
		committedParts := map[string]bool{} // named by the committed transactions' spans
		for _, s := range sr.Ended() {
			switch s.Name() {
			case "onceflow.handle":
				handles++
				if s.SpanContext().SpanID() == outSC.SpanID() {
					handle = s
				}
			case "onceflow.commit":
				commits++
				for _, a := range s.Attributes() {
					if a.Key == "onceflow.committed_partitions" {
						for _, p := range a.Value.AsStringSlice() {
							committedParts[p] = true
						}
					}
				}
			}
		}
		require.NotNil(t, handle, "handle span of the traced record not recorded")
		require.Equal(t, in.SpanID(), handle.Parent().SpanID(), "handle span is a child of the producer's span")
		require.GreaterOrEqual(t, handles, pl.inputs)
		require.Positive(t, commits)
		require.Equal(t, map[string]bool{pl.in + "/0": true, pl.in + "/1": true}, committedParts,
			"the commit spans name the input partitions they committed")
		attrs := map[string]string{}
		for _, a := range handle.Attributes() {
			attrs[string(a.Key)] = a.Value.Emit()
		}
		require.Equal(t, pl.in, attrs["messaging.destination.name"])
		require.Equal(t, "1", attrs["onceflow.attempt"])
	})
}

// kgoCarrier is a propagation carrier over a record's headers, as a
// producing application would write one.
type kgoCarrier struct{ r *kgo.Record }

func (c kgoCarrier) Get(key string) string { return header(c.r, key) }
func (c kgoCarrier) Set(key, val string) {
	c.r.Headers = append(c.r.Headers, kgo.RecordHeader{Key: key, Value: []byte(val)})
}
func (c kgoCarrier) Keys() []string {
	var ks []string
	for _, h := range c.r.Headers {
		ks = append(ks, h.Key)
	}
	return ks
}

// TestLagWhilePaused: with fetching paused behind a blocked handler, the
// lag gauge follows the end offset (new records arrive meanwhile) minus the
// next offset to fetch, and drops to 0 once everything is handled.
func TestLagWhilePaused(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		pl := newPipeline(t, c, 1, 300, 300)
		pl.produce(t, 0, 200)
		release := make(chan struct{})
		h := func(ctx context.Context, r *kgo.Record, out processor.Emitter) error {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
			return copyHandler(ctx, r, out)
		}
		reg := prometheus.NewRegistry()
		r := start(t, append(pl.opts("i1", h), processor.WithMetrics(reg), processor.WithMaxBuffered(5, 5), processor.WithLagRefresh(100*time.Millisecond))...)
		part := []string{"topic", pl.in, "partition", "0"}
		gauge := func(name string) float64 { return metricValue(t, reg, "onceflow_"+name, part...) }
		waitGauge := func(name string, want float64) {
			t.Helper()
			require.Eventually(t, func() bool { return gauge(name) == want }, 30*time.Second, 20*time.Millisecond,
				"%s: want %v, have %v", name, want, gauge(name))
		}
		// Paused at 5 buffered records: the next offset to fetch is 5.
		waitGauge("buffered_records", 5)
		waitGauge("inflight_records", 5)
		waitGauge("consumer_lag_records", 200-5)
		require.Positive(t, gauge("oldest_unfinished_age_seconds"))
		// New records while paused: only the listed end offsets see them.
		pl.produce(t, 200, 300)
		waitGauge("consumer_lag_records", 300-5)
		require.Equal(t, 5.0, gauge("buffered_records"), "still paused")

		close(release)
		pl.waitDone(t, 60*time.Second)
		waitGauge("consumer_lag_records", 0)
		waitGauge("inflight_records", 0)
		waitGauge("oldest_unfinished_age_seconds", 0)
		require.NoError(t, r.stop(t))
		rep := pl.read(t)
		require.True(t, rep.ExactlyOnce(), rep.String())
	})
}
