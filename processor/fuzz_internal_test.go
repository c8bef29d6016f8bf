package processor

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// FuzzTraceHeaders feeds arbitrary input headers (trace context or not,
// duplicated, any key) through the handle span: extraction never panics,
// a valid context survives a round trip through headers, the handle span
// is its child, and every output names the handle span as its parent.
func FuzzTraceHeaders(f *testing.F) {
	tp := sdktrace.NewTracerProvider()
	tr := tp.Tracer("fuzz")
	f.Fuzz(func(t *testing.T, traceparent, tracestate, otherKey string, otherValue []byte, dup string) {
		in := []kgo.RecordHeader{
			{Key: otherKey, Value: otherValue},
			{Key: "traceparent", Value: []byte(traceparent)},
			{Key: "tracestate", Value: []byte(tracestate)},
		}
		if dup != "" {
			in = append(in, kgo.RecordHeader{Key: "traceparent", Value: []byte(dup)})
		}
		parent := trace.SpanContextFromContext(propagator.Extract(context.Background(), headerCarrier{&in}))
		if parent.IsValid() {
			var hs []kgo.RecordHeader
			propagator.Inject(trace.ContextWithRemoteSpanContext(context.Background(), parent), headerCarrier{&hs})
			again := trace.SpanContextFromContext(propagator.Extract(context.Background(), headerCarrier{&hs}))
			require.True(t, parent.Equal(again), "%v != %v", parent, again)
		}

		it := &item{rec: &kgo.Record{Topic: "in", Headers: in}}
		out := &kgo.Record{Headers: append([]kgo.RecordHeader(nil), in...)} // a handler copying its input's headers
		it.outputs = []*kgo.Record{out}
		ctx, span := startHandle(context.Background(), tr, it)
		sc := span.SpanContext()
		if parent.IsValid() {
			require.Equal(t, parent.TraceID(), sc.TraceID(), "the handle span continues the input's trace")
		}
		endHandle(ctx, span, it, "", nil)
		got := trace.SpanContextFromContext(propagator.Extract(context.Background(), headerCarrier{&out.Headers}))
		require.Equal(t, sc.TraceID(), got.TraceID())
		require.Equal(t, sc.SpanID(), got.SpanID(), "an output's parent is the handle span")
	})
}

// FuzzDeadLetterHeaders builds dead-letter records from arbitrary input
// records, errors and counts, including input headers that collide with
// ours, and reads the headers back as a consumer of the dead-letter topic
// and the loop's per-reason counter do: each reads what was written.
func FuzzDeadLetterHeaders(f *testing.F) {
	f.Fuzz(func(t *testing.T, topic string, partition int32, offset int64, reason, errText string,
		attempts int, first int64, inKey string, inValue []byte) {
		in := &kgo.Record{Topic: topic, Partition: partition, Offset: offset, Key: []byte("k"), Value: []byte("v"),
			Headers: []kgo.RecordHeader{{Key: inKey, Value: inValue}, {Key: HeaderReason, Value: []byte("forged")}}}
		var err error
		if errText != "" {
			err = errors.New(errText)
		}
		var firstFailure time.Time
		if first != 0 {
			firstFailure = time.Unix(0, first)
		}
		dlq := deadLetter("dlq", &item{rec: in}, reason, err, attempts, firstFailure)

		require.Equal(t, "dlq", dlq.Topic)
		require.Equal(t, in.Key, dlq.Key)
		require.Equal(t, in.Value, dlq.Value)
		require.Equal(t, in.Headers, dlq.Headers[len(dlq.Headers)-len(in.Headers):], "input headers follow, unchanged")
		require.Equal(t, topic, headerValue(dlq, HeaderSourceTopic))
		require.Equal(t, reason, headerValue(dlq, HeaderReason), "the first header wins over a forged one")
		require.Equal(t, errText, headerValue(dlq, HeaderError))
		p, perr := strconv.ParseInt(headerValue(dlq, HeaderSourcePartition), 10, 32)
		require.NoError(t, perr)
		require.Equal(t, int64(partition), p)
		o, perr := strconv.ParseInt(headerValue(dlq, HeaderSourceOffset), 10, 64)
		require.NoError(t, perr)
		require.Equal(t, offset, o)
		a, perr := strconv.Atoi(headerValue(dlq, HeaderAttempts))
		require.NoError(t, perr)
		require.Equal(t, attempts, a)
		if firstFailure.IsZero() {
			require.Empty(t, headerValue(dlq, HeaderFirstFailure))
		} else {
			ft, perr := time.Parse(time.RFC3339Nano, headerValue(dlq, HeaderFirstFailure))
			require.NoError(t, perr)
			require.True(t, firstFailure.Equal(ft), "%v != %v", firstFailure, ft)
		}
		i := reasonIndex(headerValue(dlq, HeaderReason))
		require.True(t, i >= 0 && i < len(dlqReasons))
	})
}
