package processor_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/internal/verify"
	"github.com/onceflow/onceflow/processor"
)

// idOf is the input ID a test record carries.
func idOf(r *kgo.Record) uint64 {
	p, _ := verify.Decode(r.Value)
	return p.ID
}

// TestPanicsToDLQ: user code that panics fails its record permanently
// instead of crashing the process (issue 33, finding 4: a handler's panic
// killed the process from its session worker). Each of the four kinds of
// user code the processor calls panics on one record: the handler (a
// nil map write, a runtime error, reached through Once), the
// WithSessionKey function, the WithPermanentErrors classifier and the
// WithEventID function. Each record goes to the dead-letter topic with
// reason "panic" and the panic's value, place and stack in HeaderError;
// the rest goes on, exactly once, and the panics are counted.
func TestPanicsToDLQ(t *testing.T) {
	c := kafkatest.New(t)
	pl := newPipeline(t, c, 2, 200, 20)
	pl.produce(t, 0, pl.inputs)
	const handlerID, keyID, classifierID, eventID = 50, 60, 70, 80
	var nilMap map[string]int
	h := func(ctx context.Context, r *kgo.Record, out processor.Emitter) error {
		switch idOf(r) {
		case handlerID:
			_, err := processor.Once(ctx, func(context.Context) error {
				nilMap["boom"]++ // the panic, in an effect of the handler
				return nil
			})
			return err
		case classifierID:
			return errors.New("classify me")
		}
		return copyHandler(ctx, r, out)
	}
	reg := prometheus.NewRegistry()
	r := start(t, append(pl.opts("i1", h),
		processor.WithSessionKey(func(r *kgo.Record) []byte {
			if idOf(r) == keyID {
				panic(fmt.Sprintf("no session for %d", keyID))
			}
			return r.Key
		}),
		processor.WithPermanentErrors(func(err error) bool {
			if err.Error() == "classify me" {
				panic("the classifier gave up")
			}
			return false
		}),
		processor.WithDedupe(t.TempDir(), nil),
		processor.WithEventID(func(r *kgo.Record) []byte {
			if idOf(r) == eventID {
				panic(errors.New("no event ID"))
			}
			return nil // processed normally
		}),
		processor.WithMetrics(reg),
	)...)
	rep := pl.waitDone(t, 60*time.Second)
	require.NoError(t, r.stop(t))
	rep = pl.read(t)
	require.True(t, rep.ExactlyOnce(), rep.String())
	require.Equal(t, 4, rep.DLQ, rep.String())
	require.Equal(t, pl.inputs-4, rep.Outputs)

	errs := map[uint64]string{}
	for _, d := range c.ReadCommitted(t, pl.dlq) {
		require.Equal(t, "panic", header(d, processor.HeaderReason))
		errs[idOf(d)] = header(d, processor.HeaderError)
	}
	require.Len(t, errs, 4)
	for id, want := range map[uint64][]string{
		handlerID:    {"handler panicked: assignment to entry in nil map (at github.com/onceflow/onceflow/processor_test.TestPanicsToDLQ.", "processor/panics_test.go:", "processor.OnceNamed"},
		keyID:        {"WithSessionKey function panicked: no session for 60 (at github.com/onceflow/onceflow/processor_test.TestPanicsToDLQ.", "processor/panics_test.go:"},
		classifierID: {"WithPermanentErrors classifier panicked: the classifier gave up (at ", "processor/panics_test.go:"},
		eventID:      {"WithEventID function panicked: no event ID (at ", "processor/panics_test.go:"},
	} {
		for _, w := range want {
			require.Contains(t, errs[id], w, "record %d", id)
		}
		// The stack is the user's: the processor's and the
		// runtime's frames are trimmed.
		require.NotContains(t, errs[id], "runtime.gopanic", "record %d", id)
		require.NotContains(t, errs[id], "processor.callHandler", "record %d", id)
		require.NotContains(t, errs[id], "processor.(*dispatcher)", "record %d", id)
	}
	s := r.p.Stats()
	require.EqualValues(t, 4, s.Panics)
	require.EqualValues(t, 4, s.DeadLettered)
	require.EqualValues(t, 4, metricValue(t, reg, "onceflow_records_dead_lettered_total", "reason", "panic"))
}

// TestPanicWithoutDLQ: without a dead-letter topic a handler's panic
// stops Run with an error wrapping ErrHandlerPanic and ErrNoDLQ whose
// *PanicError holds the stack; the record is not committed, so a restart
// with a fixed handler handles it and the run as a whole is exactly-once.
func TestPanicWithoutDLQ(t *testing.T) {
	c := kafkatest.New(t)
	pl := newPipeline(t, c, 1, 100, 10)
	pl.produce(t, 0, pl.inputs)
	const bad = 50
	h := func(ctx context.Context, r *kgo.Record, out processor.Emitter) error {
		if idOf(r) == bad {
			panic("boom")
		}
		return copyHandler(ctx, r, out)
	}
	r := start(t, append(pl.opts("i1", h), processor.WithDLQTopic(""))...)
	err := r.wait(t, 30*time.Second)
	require.ErrorIs(t, err, processor.ErrHandlerPanic)
	require.ErrorIs(t, err, processor.ErrNoDLQ)
	var pe *processor.PanicError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "boom", pe.Value)
	require.Contains(t, pe.Stack, "processor/panics_test.go:")
	require.Regexp(t, `^processor: record `+pl.in+`/0@50: handler panicked: boom \(at github.com/onceflow/onceflow/processor_test.TestPanicWithoutDLQ.func1, processor/panics_test.go:\d+\); processor: record needs a dead-letter topic but none is configured$`, err.Error())
	rep := pl.read(t)
	require.Zero(t, rep.Duplicates, rep.String())
	require.NotZero(t, rep.Lost, "the panicking record was not committed")
	require.Zero(t, r.p.Stats().Panics, "counted as dead letters only")

	// Fixed, the job goes on from what was committed.
	r2 := start(t, pl.opts("i1", copyHandler)...)
	rep = pl.waitDone(t, 60*time.Second)
	require.NoError(t, r2.stop(t))
	rep = pl.read(t)
	require.True(t, rep.ExactlyOnce(), rep.String())
	require.Zero(t, rep.DLQ)
	require.Equal(t, pl.inputs, rep.Outputs)
	require.Zero(t, r2.p.Stats().Panics)
}
