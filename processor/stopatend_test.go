package processor_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/internal/verify"
	"github.com/onceflow/onceflow/processor"
)

// bounded starts a processor with WithStopAtEnd.
func bounded(t *testing.T, opts ...processor.Opt) *running {
	t.Helper()
	return start(t, append(opts, processor.WithStopAtEnd())...)
}

// gated returns a copy handler that holds records with IDs from on until
// release is called.
func gated(from int) (h processor.Handler, release func()) {
	gate := make(chan struct{})
	var once sync.Once
	return func(ctx context.Context, r *kgo.Record, out processor.Emitter) error {
		if p, err := verify.Decode(r.Value); err == nil && p.ID >= uint64(from) {
			select {
			case <-gate:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return copyHandler(ctx, r, out)
	}, func() { once.Do(func() { close(gate) }) }
}

// committedAt returns the group's committed offset of every input
// partition (-1: none) and the inputs' last stable offsets.
func (pl *pipeline) committedAt(t *testing.T) (committed, ends map[int32]int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs, err := pl.c.Admin.FetchOffsets(ctx, pl.group)
	require.NoError(t, err)
	lso, err := pl.c.Admin.ListCommittedOffsets(ctx, pl.in)
	require.NoError(t, err)
	require.NoError(t, lso.Error())
	committed, ends = map[int32]int64{}, map[int32]int64{}
	lso.Each(func(o kadm.ListedOffset) {
		ends[o.Partition] = o.Offset
		committed[o.Partition] = -1
		if c, ok := offs.Lookup(pl.in, o.Partition); ok {
			committed[o.Partition] = c.At
		}
	})
	return committed, ends
}

// TestStopAtEndCrashRerun: a bounded load crashes halfway (its connections
// cut: an open transaction, no leave); the rerun, under the same instance
// ID, finishes the load and returns by itself, the output holds every input
// exactly once and the group ends committed at the input's end offsets, as
// an uninterrupted run would. A third run right after returns at once and
// produces nothing. Without the watcher the rerun would never return
// (wait fails); with a watcher that stopped at the first commit, or that
// compared with the ends before the crash-free run's, outputs would be
// lost or the offsets short.
func TestStopAtEndCrashRerun(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		pl := newPipeline(t, c, 3, 3000, 100)
		pl.produce(t, 0, pl.inputs)
		// The second half waits until the crash: it happens mid-load.
		held, release := gated(pl.inputs / 2)
		var cut kafkatest.Cutter
		a := bounded(t, append(pl.opts("i1", held), processor.WithKgoOpts(cut.Opt()))...)
		pl.waitOutputs(t, 500, 30*time.Second)
		cut.Cut()
		release()
		select {
		case <-a.done:
			t.Fatalf("the crashed bounded run returned (%v) before its input was done", a.err)
		default:
		}

		b := bounded(t, pl.opts("i1", copyHandler)...)
		require.NoError(t, b.wait(t, 60*time.Second), "the rerun did not finish by itself")
		require.NotZero(t, b.p.Stats().Outputs, "the rerun had nothing left to do: no crash mid-load")
		committed, ends := pl.committedAt(t)
		require.Equal(t, ends, committed, "the rerun ended short of (or past) the input's end")
		rep := pl.read(t)
		require.True(t, rep.ExactlyOnce(), rep.String())
		require.Equal(t, pl.inputs, rep.Outputs)

		began := time.Now()
		again := bounded(t, pl.opts("i1", copyHandler)...)
		require.NoError(t, again.wait(t, 10*time.Second))
		t.Logf("a run after a finished one returned in %v", time.Since(began).Round(time.Millisecond))
		st := again.p.Stats()
		require.Zero(t, st.Consumed+st.Outputs+st.Commits, "a run after a finished one did work: %+v", st)
		require.Equal(t, pl.inputs, pl.read(t).Outputs)
		_ = a.stop(t)
	})
}

// TestStopAtEndGroup: three bounded instances share a two-partition input,
// so one of them owns nothing. One is stopped halfway (its partitions move
// to the others). Each of the other two returns only once the whole group
// has committed the input up to its end: the one that owned nothing
// waits too, and what the stopped one left is finished by its partitions'
// new owner. A watcher that looked at the instance's own partitions would
// let the idle one return at once and, with it, lose nothing only by luck;
// this test checks the group's offsets at the moment each returns.
func TestStopAtEndGroup(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		pl := newPipeline(t, c, 2, 3000, 100)
		pl.produce(t, 0, pl.inputs)
		// The second half waits until a has stopped: it stops mid-load.
		held, release := gated(pl.inputs / 2)
		a := bounded(t, pl.opts("a", held)...)
		b := bounded(t, pl.opts("b", held)...)
		idle := bounded(t, pl.opts("c", held)...)
		pl.waitOutputs(t, 300, 30*time.Second)
		require.NoError(t, a.stop(t))
		release()

		for _, r := range []*running{b, idle} {
			require.NoError(t, r.wait(t, 90*time.Second))
			committed, ends := pl.committedAt(t)
			for p, end := range ends {
				require.GreaterOrEqual(t, committed[p], end, "an instance returned before partition %d was done", p)
			}
		}
		rep := pl.read(t)
		require.True(t, rep.ExactlyOnce(), rep.String())
		require.Equal(t, pl.inputs, rep.Outputs)
	})
}

// TestStopAtEndInvisibleTail: the input was written by a transactional
// producer (every committed transaction ends with a marker, which takes an
// offset), ends with an aborted transaction, and has a partition that
// holds nothing. The processor never sees the markers and the aborted
// records, so it commits at its last record + 1, short of the last stable
// offset: a bounded run must take the offsets in between for done (the
// watcher reads them, read_committed) rather than wait forever; and a
// second run must see that at once. Without that check (done only at
// committed >= end) both runs hang and wait fails.
func TestStopAtEndInvisibleTail(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		pl := newPipeline(t, c, 3, 1000, 50)
		txnID := kafkatest.Name(t, "upstream")
		cl := c.Client(t, kgo.TransactionalID(txnID), kgo.DefaultProduceTopic(pl.in),
			kgo.RecordPartitioner(kgo.ManualPartitioner()))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		send := func(from, to int, commit kgo.TransactionEndTry) {
			require.NoError(t, cl.BeginTransaction())
			for id := from; id < to; id++ {
				v := verify.Append(nil, verify.Payload{ID: uint64(id), Seq: uint64(id / pl.sessions), ProducedAt: time.Now()}, 64)
				// Partitions 0 and 1 only: 2 stays empty.
				r := &kgo.Record{Key: []byte(sessionKey(id, pl.sessions)), Value: v, Partition: int32(id % pl.sessions % 2)}
				cl.Produce(ctx, r, func(_ *kgo.Record, err error) { require.NoError(t, err) })
			}
			require.NoError(t, cl.Flush(ctx))
			require.NoError(t, cl.EndTransaction(ctx, commit))
		}
		send(0, pl.inputs/2, kgo.TryCommit)
		send(pl.inputs/2, pl.inputs, kgo.TryCommit)
		send(pl.inputs, pl.inputs+100, kgo.TryAbort) // not inputs: never visible
		c.AwaitStable(t, pl.in)

		r := bounded(t, pl.opts("i1", copyHandler)...)
		require.NoError(t, r.wait(t, 60*time.Second), "a bounded run over an input ending in markers did not return")
		rep := pl.read(t)
		require.True(t, rep.ExactlyOnce(), rep.String())
		require.Equal(t, pl.inputs, rep.Outputs)
		committed, ends := pl.committedAt(t)
		for p := range int32(2) {
			require.Less(t, committed[p], ends[p], "partition %d: the test needs an invisible tail", p)
		}
		require.Equal(t, int64(-1), committed[2], "nothing to commit in the empty partition")

		again := bounded(t, pl.opts("i1", copyHandler)...)
		require.NoError(t, again.wait(t, 10*time.Second))
		require.Zero(t, again.p.Stats().Consumed)
	})
}

// TestStopAtEndStateDedupeDLQ: a bounded run with session state, dedupe
// and dead letters stops when its input is done, every record accounted
// for once (outputs or dead letters), duplicates skipped, and the state's
// counters in step in the changelog and the local store.
func TestStopAtEndStateDedupeDLQ(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		pl := newPipeline(t, c, 2, 2000, 50)
		per := pl.inputs / pl.sessions
		ids, dups := span(0, pl.inputs, 10)
		pl.produceEvents(t, ids...)
		// The last record of every fifth session is poison: the counter
		// handler sees every earlier one in step.
		poison := func(p verify.Payload) bool { return int(p.Seq) == per-1 && p.ID%5 == 0 }
		counter := counterHandler(0)
		h := func(ctx context.Context, r *kgo.Record, out processor.Emitter) error {
			if p, err := verify.Decode(r.Value); err == nil && poison(p) {
				return processor.Permanent(errors.New("poison"))
			}
			return counter(ctx, r, out)
		}
		stateDir := t.TempDir()
		r := bounded(t, append(pl.opts("i1", h), processor.WithStateStore(stateDir, nil),
			processor.WithDedupe(t.TempDir(), nil))...)
		require.NoError(t, r.wait(t, 60*time.Second))
		require.Equal(t, int64(dups), r.p.Stats().DuplicatesSkipped)
		rep := pl.read(t)
		require.True(t, rep.ExactlyOnce(), rep.String())
		require.Equal(t, pl.sessions/5, rep.DLQ)
		require.Equal(t, pl.inputs, rep.Outputs+rep.DLQ)

		want := map[string]uint64{}
		for s := range pl.sessions {
			n := uint64(per)
			if s%5 == 0 {
				n-- // its last record was poison
			}
			want[sessionKey(s, pl.sessions)+"/count"] = n
		}
		require.Equal(t, want, pl.finalCounts(t), "changelog")
		require.Equal(t, want, storeCounts(t, stateDir, pl, 2), "local store")
	})
}

// TestStopAtEndPositionRegression: with WithPositionGuard, a group
// coordinator that serves an older position than was committed (finding
// 7, simulated by committing offset 0 over a finished load) makes the
// processor resume from the position log, with nothing to do and so
// nothing to commit to the coordinator. A rerun must still see that the
// load is done (the watcher reads the log too) and emit nothing again;
// with the coordinator's offsets alone it waited forever.
func TestStopAtEndPositionRegression(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		pl := newPipeline(t, c, 2, 500, 20)
		pl.produce(t, 0, pl.inputs)
		guarded := func() []processor.Opt { return append(pl.opts("i1", copyHandler), processor.WithPositionGuard()) }
		require.NoError(t, bounded(t, guarded()...).wait(t, 60*time.Second))
		require.Eventually(t, func() bool { return pl.holder(t, "i1") == "" }, 30*time.Second, 100*time.Millisecond,
			"the stopped instance's member stayed")

		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		stale := kadm.Offsets{}
		for p := range int32(2) {
			stale.Add(kadm.Offset{Topic: pl.in, Partition: p, At: 0, LeaderEpoch: -1})
		}
		resps, err := c.Admin.CommitOffsets(ctx, pl.group, stale)
		require.NoError(t, err)
		require.NoError(t, resps.Error())

		again := bounded(t, guarded()...)
		require.NoError(t, again.wait(t, 30*time.Second), "a rerun over a regressed coordinator did not see the load done")
		require.Zero(t, again.p.Stats().Outputs)
		rep := pl.read(t)
		require.True(t, rep.ExactlyOnce(), rep.String())
		require.Equal(t, pl.inputs, rep.Outputs)
	})
}
