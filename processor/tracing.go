package processor

import (
	"context"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// tracerName is the instrumentation scope of the processor's spans.
const tracerName = "github.com/onceflow/onceflow/processor"

// Span names.
const (
	spanHandle = "onceflow.handle"
	spanCommit = "onceflow.commit"
)

// propagator carries W3C trace context (traceparent, tracestate) in record
// headers.
var propagator = propagation.TraceContext{}

// headerCarrier adapts record headers to propagation.TextMapCarrier. Set
// replaces a header of the same key, so an output that copied its input's
// headers carries the handle span, not the input's.
type headerCarrier struct{ hs *[]kgo.RecordHeader }

func (c headerCarrier) Get(key string) string {
	for _, h := range *c.hs {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

func (c headerCarrier) Set(key, value string) {
	for i, h := range *c.hs {
		if h.Key == key {
			(*c.hs)[i].Value = []byte(value)
			return
		}
	}
	*c.hs = append(*c.hs, kgo.RecordHeader{Key: key, Value: []byte(value)})
}

func (c headerCarrier) Keys() []string {
	keys := make([]string, len(*c.hs))
	for i, h := range *c.hs {
		keys[i] = h.Key
	}
	return keys
}

// startHandle starts the handle span of it, as a child of the context in
// the input record's headers. The loop of the record's attempts runs under
// it; retries are span events.
func startHandle(ctx context.Context, tr trace.Tracer, it *item) (context.Context, trace.Span) {
	r := it.rec
	ctx = propagator.Extract(ctx, headerCarrier{&r.Headers})
	return tr.Start(ctx, spanHandle, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
		attribute.String("messaging.system", "kafka"),
		attribute.String("messaging.destination.name", r.Topic),
		attribute.Int("messaging.destination.partition.id", int(r.Partition)),
		attribute.Int64("messaging.kafka.offset", r.Offset),
	))
}

// endHandle records the outcome, injects the span's context into the
// outputs and the dead-letter record and ends the span.
func endHandle(ctx context.Context, span trace.Span, it *item, reason string, err error) {
	span.SetAttributes(attribute.Int("onceflow.attempt", int(it.attempts)))
	if reason != "" {
		span.SetAttributes(attribute.String("onceflow.dlq.reason", reason))
		span.SetStatus(codes.Error, reason)
		if err != nil {
			span.RecordError(err)
		}
	}
	for _, r := range it.outputs {
		propagator.Inject(ctx, headerCarrier{&r.Headers})
	}
	if it.dlq != nil {
		propagator.Inject(ctx, headerCarrier{&it.dlq.Headers})
	}
	span.End()
}

// abandonHandle ends the span of a record that went stale (revoked or
// rewound), was dead-lettered as stuck by the loop, or was cut short by
// shutdown: it produced nothing from this attempt.
func abandonHandle(span trace.Span, it *item) {
	span.SetAttributes(attribute.Int("onceflow.attempt", int(it.attempts)), attribute.Bool("onceflow.abandoned", true))
	span.End()
}

// retryEvent records a failed attempt that will be retried.
func retryEvent(span trace.Span, attempt int, err error) {
	span.AddEvent("retry", trace.WithAttributes(
		attribute.Int("onceflow.attempt", attempt),
		attribute.String("exception.message", err.Error()),
	))
}

// startCommitSpan starts the span of t's commit, t holding work of n
// input partitions; without a tracer, none.
func startCommitSpan(ctx context.Context, tracer trace.Tracer, t *transaction, n int) (context.Context, trace.Span) {
	if tracer == nil {
		return ctx, nil
	}
	return tracer.Start(ctx, spanCommit, trace.WithAttributes(
		attribute.Int64("onceflow.outputs", t.counts.outputs),
		attribute.Int64("onceflow.dead_letters", t.counts.deadLetters),
		attribute.Int("onceflow.partitions", n),
	))
}

// endCommit records the outcome and, for a committed transaction, the input
// partitions whose offsets it committed ("topic/partition"), which tells
// how long each partition went between commits.
func endCommit(span trace.Span, committed bool, sent map[tp]bool, err error) {
	if span == nil {
		return
	}
	span.SetAttributes(attribute.Bool("onceflow.committed", committed))
	if committed && span.IsRecording() {
		parts := make([]string, 0, len(sent))
		for k := range sent {
			parts = append(parts, k.topic+"/"+strconv.Itoa(int(k.partition)))
		}
		slices.Sort(parts)
		span.SetAttributes(attribute.StringSlice("onceflow.committed_partitions", parts))
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "commit failed")
	} else if !committed {
		span.SetStatus(codes.Error, "aborted")
	}
	span.End()
}
