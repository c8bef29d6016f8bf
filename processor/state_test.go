package processor_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/internal/verify"
	"github.com/onceflow/onceflow/processor"
	"github.com/onceflow/onceflow/statestore"
)

// counterHandler keeps a per-session counter in state and fails
// permanently if it is not exactly the record's position in its session:
// any lost, doubled or aborted-but-kept write shows up as a dead letter.
func counterHandler(faultPct int) processor.Handler {
	return func(ctx context.Context, r *kgo.Record, out processor.Emitter) error {
		if rand.IntN(100) < faultPct {
			return errors.New("transient")
		}
		p, err := verify.Decode(r.Value)
		if err != nil {
			return processor.Permanent(err)
		}
		st := processor.StateFrom(ctx)
		key := append(append([]byte{}, r.Key...), "/count"...)
		v, ok, err := st.Get(key)
		if err != nil {
			return err
		}
		var n uint64
		if ok {
			n = binary.BigEndian.Uint64(v)
		}
		if n != p.Seq {
			return processor.Permanent(fmt.Errorf("state out of step: session %s count %d, record seq %d", r.Key, n, p.Seq))
		}
		st.Set(key, binary.BigEndian.AppendUint64(nil, n+1))
		out.Emit(&kgo.Record{Value: r.Value})
		return nil
	}
}

func fastRetry() processor.Opt {
	return processor.WithRetryPolicy(processor.RetryPolicy{Initial: time.Millisecond, Max: 5 * time.Millisecond, Multiplier: 2, Jitter: -1, MaxElapsed: -1})
}

// finalCounts folds the changelog: the last committed value per key.
func (pl *pipeline) finalCounts(t *testing.T) map[string]uint64 {
	out := make(map[string]uint64)
	for _, r := range pl.c.ReadCommitted(t, pl.group+"-"+pl.in+"-changelog") {
		if r.Value == nil {
			delete(out, string(r.Key))
			continue
		}
		out[string(r.Key)] = binary.BigEndian.Uint64(r.Value)
	}
	return out
}

func (pl *pipeline) checkCounts(t *testing.T, counts map[string]uint64) {
	t.Helper()
	per := pl.inputs / pl.sessions
	require.Len(t, counts, pl.sessions)
	for s := 0; s < pl.sessions; s++ {
		require.Equal(t, uint64(per), counts[sessionKey(s, pl.sessions)+"/count"], "session %d", s)
	}
}

// storeCounts reads the counters from a stopped processor's local store.
func storeCounts(t *testing.T, dir string, pl *pipeline, partitions int32) map[string]uint64 {
	s, err := statestore.Open(dir, nil)
	require.NoError(t, err)
	defer s.Close()
	out := make(map[string]uint64)
	for p := int32(0); p < partitions; p++ {
		require.NoError(t, s.Scan(statestore.Partition{Topic: pl.in, Partition: p}, nil, func(k, v []byte) bool {
			out[string(k)] = binary.BigEndian.Uint64(v)
			return true
		}))
	}
	return out
}

// TestStateCrashRestore: state changes exactly once per committed record
// under transient faults and an abrupt crash. The replacement first runs on
// a fresh directory (a rebuild from the changelog), then on the crashed
// instance's own directory (a tail restore).
func TestStateCrashRestore(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		pl := newPipeline(t, c, 2, 6000, 200)
		third := pl.inputs / 3
		pl.produce(t, 0, third)
		dirA, dirB := t.TempDir(), t.TempDir()
		var cut kafkatest.Cutter
		a := start(t, append(pl.opts("i1", counterHandler(10)), fastRetry(),
			processor.WithStateStore(dirA, nil), processor.WithKgoOpts(cut.Opt()))...)
		pl.waitOutputs(t, third/2, 30*time.Second)
		cut.Cut()
		_ = a.stop(t)

		pl.produce(t, third, 2*third)
		b := start(t, append(pl.opts("i1", counterHandler(10)), fastRetry(), processor.WithStateStore(dirB, nil))...)
		pl.waitOutputs(t, 2*third, 60*time.Second)
		require.NoError(t, b.stop(t))
		require.Positive(t, b.p.Stats().StateRestored, "a fresh directory is rebuilt from the changelog")

		pl.produce(t, 2*third, pl.inputs)
		a2 := start(t, append(pl.opts("i1", counterHandler(10)), fastRetry(), processor.WithStateStore(dirA, nil))...)
		rep := pl.waitDone(t, 60*time.Second)
		require.NoError(t, a2.stop(t))
		rep = pl.read(t)
		require.True(t, rep.ExactlyOnce(), rep.String())
		require.Zero(t, rep.DLQ, "no record may see its session's state out of step")
		pl.checkCounts(t, pl.finalCounts(t))
		pl.checkCounts(t, storeCounts(t, dirA, pl, 2))
		t.Logf("restored: b=%d a2=%d", b.p.Stats().StateRestored, a2.p.Stats().StateRestored)
	})
}

// TestStateFollowsPartition: partitions move to a second instance and come
// back when it leaves; the state moves with them.
func TestStateFollowsPartition(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		pl := newPipeline(t, c, 4, 6000, 300)
		pl.produce(t, 0, 2000)
		slow := func(h processor.Handler) processor.Handler {
			return func(ctx context.Context, r *kgo.Record, out processor.Emitter) error {
				time.Sleep(100 * time.Microsecond)
				return h(ctx, r, out)
			}
		}
		a := start(t, append(pl.opts("i1", slow(counterHandler(0))), processor.WithStateStore(t.TempDir(), nil))...)
		pl.waitOutputs(t, 500, 30*time.Second)
		b := start(t, append(pl.opts("i2", slow(counterHandler(0))), processor.WithStateStore(t.TempDir(), nil))...)
		pl.produce(t, 2000, 4000)
		pl.waitOutputs(t, 3000, 60*time.Second)
		require.NoError(t, b.stop(t))
		pl.produce(t, 4000, pl.inputs)
		pl.waitDone(t, 90*time.Second)
		require.NoError(t, a.stop(t))
		rep := pl.read(t)
		require.True(t, rep.ExactlyOnce(), rep.String())
		require.Zero(t, rep.DLQ, "no record may see its session's state out of step")
		pl.checkCounts(t, pl.finalCounts(t))
	})
}

// TestBookingExample: "book a flight to London" then "set the destination
// to Paris", many interleaved sessions, transient faults: every session
// ends with Paris, and no correction ever ran before its booking.
func TestBookingExample(t *testing.T) {
	c := kafkatest.New(t)
	pl := newPipeline(t, c, 2, 2000, 1000) // two records per session
	pl.produce(t, 0, pl.inputs)
	h := func(ctx context.Context, r *kgo.Record, out processor.Emitter) error {
		if rand.IntN(100) < 20 {
			return errors.New("transient")
		}
		p, _ := verify.Decode(r.Value)
		st := processor.StateFrom(ctx)
		key := append(append([]byte{}, r.Key...), "/destination"...)
		switch p.Seq {
		case 0:
			st.Set(key, []byte("London"))
		case 1:
			if v, ok, err := st.Get(key); err != nil || !ok || string(v) != "London" {
				return processor.Permanent(fmt.Errorf("correction before booking: %q %v %v", v, ok, err))
			}
			st.Set(key, []byte("Paris"))
		}
		out.Emit(&kgo.Record{Value: r.Value})
		return nil
	}
	dir := t.TempDir()
	r := start(t, append(pl.opts("i1", h), fastRetry(), processor.WithStateStore(dir, nil))...)
	pl.waitDone(t, 60*time.Second)
	require.NoError(t, r.stop(t))
	rep := pl.read(t)
	require.True(t, rep.ExactlyOnce(), rep.String())
	require.Zero(t, rep.DLQ)
	s, err := statestore.Open(dir, nil)
	require.NoError(t, err)
	defer s.Close()
	paris := 0
	for p := int32(0); p < 2; p++ {
		require.NoError(t, s.Scan(statestore.Partition{Topic: pl.in, Partition: p}, nil, func(_, v []byte) bool {
			require.Equal(t, "Paris", string(v))
			paris++
			return true
		}))
	}
	require.Equal(t, pl.sessions, paris)
}
