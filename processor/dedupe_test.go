package processor_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/dedupe"
	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/internal/verify"
	"github.com/onceflow/onceflow/processor"
)

func eventID(id int) []byte { return fmt.Appendf(nil, "ev-%d", id) }

// produceEvents writes input IDs in the given order, each with its event ID
// in the event-id header; an ID given twice is an event sent twice (same
// key, payload and event ID). A negative ID -n writes input n without an
// event ID.
func (pl *pipeline) produceEvents(t testing.TB, ids ...int) {
	t.Helper()
	cl := pl.c.Client(t, kgo.DefaultProduceTopic(pl.in))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rs := make([]*kgo.Record, 0, len(ids))
	for _, id := range ids {
		var hs []kgo.RecordHeader
		if id >= 0 {
			hs = []kgo.RecordHeader{{Key: processor.HeaderEventID, Value: eventID(id)}}
		} else {
			id = -id
		}
		v := verify.Append(nil, verify.Payload{ID: uint64(id), Seq: uint64(id / pl.sessions), ProducedAt: time.Now()}, 64)
		rs = append(rs, &kgo.Record{Key: []byte(sessionKey(id, pl.sessions)), Value: v, Headers: hs})
	}
	require.NoError(t, cl.ProduceSync(ctx, rs...).FirstErr())
}

// span returns from, from+1, ..., to-1, with every id%every == 0 sent twice
// in a row (every 0: never); and the number of duplicates.
func span(from, to, every int) (ids []int, dups int) {
	for id := from; id < to; id++ {
		ids = append(ids, id)
		if every > 0 && id%every == 0 {
			ids = append(ids, id)
			dups++
		}
	}
	return ids, dups
}

func dupsSkipped(rs ...*running) int64 {
	var n int64
	for _, r := range rs {
		n += r.p.Stats().DuplicatesSkipped
	}
	return n
}

// TestDedupeSkipsRepeatedEventIDs: events sent more than once (back to
// back, in one transaction; long after, across transactions; after a
// restart) produce their output once, and the skipped count is the number
// of duplicates sent. Records without an event ID are processed normally.
func TestDedupeSkipsRepeatedEventIDs(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		pl := newPipeline(t, c, 2, 3000, 100)
		dir := t.TempDir()
		reg := prometheus.NewRegistry()
		opts := func(reg prometheus.Registerer) []processor.Opt {
			o := append(pl.opts("i1", copyHandler), processor.WithDedupe(dir, nil))
			if reg != nil {
				o = append(o, processor.WithMetrics(reg))
			}
			return o
		}
		injected := 0
		// Back to back: the duplicate arrives while its original is in
		// flight or in the same open transaction.
		ids, n := span(0, 1000, 10)
		injected += n
		a := start(t, opts(reg)...)
		pl.produceEvents(t, ids...)
		pl.waitOutputs(t, 1000, 30*time.Second)

		// Long after: the originals are committed and in the store.
		ids, n = span(1000, 2000, 0)
		for id := 0; id < 1000; id += 7 {
			ids = append(ids, id)
			n++
		}
		injected += n
		// Inputs without an event ID are never deduplicated.
		for id := 2000; id < 2100; id++ {
			ids = append(ids, -id)
		}
		pl.produceEvents(t, ids...)
		pl.waitOutputs(t, 2100, 30*time.Second)
		require.NoError(t, a.stop(t))
		require.Equal(t, float64(a.p.Stats().DuplicatesSkipped), metricValue(t, reg, "onceflow_duplicates_skipped_total"))

		// After a restart on the same directory: duplicates of events
		// committed before it, and new back-to-back ones.
		ids, n = span(2100, pl.inputs, 5)
		for id := 1000; id < 2000; id += 11 {
			ids = append(ids, id)
			n++
		}
		injected += n
		pl.produceEvents(t, ids...)
		a2 := start(t, opts(nil)...)
		pl.waitDone(t, 60*time.Second)
		// The skipped records' offsets commit with the last outputs, or in
		// a later transaction: wait for the count, not just the outputs.
		require.Eventually(t, func() bool { return dupsSkipped(a, a2) >= int64(injected) }, 30*time.Second, 20*time.Millisecond)
		require.NoError(t, a2.stop(t))
		rep := pl.read(t)
		require.True(t, rep.ExactlyOnce(), rep.String())
		require.Equal(t, pl.inputs, rep.Outputs)
		require.Zero(t, rep.DLQ)
		require.Equal(t, int64(injected), dupsSkipped(a, a2))
		t.Logf("duplicates injected and skipped: %d; a=%+v", injected, a.p.Stats())
	})
}

// TestDedupeMarksFollowPartition: marks move with their partition. A
// processes and leaves; B, on an empty directory, gets the partitions and
// skips duplicates of A's events (restored from the changelog); A comes
// back on its own, now stale, directory and takes some partitions back
// (a tail restore), and duplicates of B's events are skipped too.
func TestDedupeMarksFollowPartition(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		pl := newPipeline(t, c, 4, 3000, 200)
		dirA, dirB := t.TempDir(), t.TempDir()
		ids, injected := span(0, 1000, 9)
		pl.produceEvents(t, ids...)
		a := start(t, append(pl.opts("a", copyHandler), processor.WithDedupe(dirA, nil))...)
		pl.waitOutputs(t, 1000, 30*time.Second)
		require.NoError(t, a.stop(t))

		b := start(t, append(pl.opts("b", copyHandler), processor.WithDedupe(dirB, nil))...)
		ids, n := span(1000, 2000, 0)
		for id := 0; id < 1000; id += 3 { // A's events again
			ids = append(ids, id)
			n++
		}
		injected += n
		pl.produceEvents(t, ids...)
		pl.waitOutputs(t, 2000, 60*time.Second) // after A's session timeout
		require.Eventually(t, func() bool { return dupsSkipped(a, b) >= int64(injected) }, 30*time.Second, 20*time.Millisecond)
		require.Positive(t, b.p.Stats().MarksRestored, "B rebuilt the marks from the changelog")

		a2 := start(t, append(pl.opts("a", copyHandler), processor.WithDedupe(dirA, nil))...)
		time.Sleep(2 * time.Second) // let the group rebalance
		ids, n = span(2000, pl.inputs, 0)
		for id := 0; id < 2000; id += 4 { // A's and B's events again
			ids = append(ids, id)
			n++
		}
		injected += n
		pl.produceEvents(t, ids...)
		pl.waitDone(t, 60*time.Second)
		require.Eventually(t, func() bool { return dupsSkipped(a, b, a2) >= int64(injected) }, 30*time.Second, 20*time.Millisecond)
		require.NoError(t, b.stop(t))
		require.NoError(t, a2.stop(t))
		rep := pl.read(t)
		require.True(t, rep.ExactlyOnce(), rep.String())
		require.Equal(t, pl.inputs, rep.Outputs)
		require.Equal(t, int64(injected), dupsSkipped(a, b, a2))
		t.Logf("skipped a=%d b=%d a2=%d; restored marks b=%d a2=%d", a.p.Stats().DuplicatesSkipped, b.p.Stats().DuplicatesSkipped,
			a2.p.Stats().DuplicatesSkipped, b.p.Stats().MarksRestored, a2.p.Stats().MarksRestored)
	})
}

// effects counts an external effect's runs per event.
type effects struct {
	mu   sync.Mutex
	runs map[string]int
}

func (e *effects) run(id []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.runs == nil {
		e.runs = make(map[string]int)
	}
	e.runs[string(id)]++
}

// counts returns how many events had their effect run once, and more often.
func (e *effects) counts() (once, more, most int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, n := range e.runs {
		if n == 1 {
			once++
		} else {
			more++
		}
		most = max(most, n)
	}
	return once, more, most
}

// onceHandler runs the effect with processor.Once, then emits; crash, if
// set, is called after the effect of the n-th record ran.
func onceHandler(e *effects, skipped *atomic.Int64, n int64, crash func()) processor.Handler {
	var seen atomic.Int64
	return func(ctx context.Context, r *kgo.Record, out processor.Emitter) error {
		ran, err := processor.Once(ctx, func(context.Context) error {
			e.run(processor.EventID(ctx))
			return nil
		})
		if err != nil {
			return err
		}
		if !ran {
			skipped.Add(1)
		}
		if crash != nil && seen.Add(1) == n {
			crash()
		}
		out.Emit(&kgo.Record{Value: r.Value})
		return nil
	}
}

// TestDedupeOnceAcrossCrash: an instance dies right after an external
// effect, before the transaction that would commit its record. Restarted
// on the same directory, the record is handled again but the effect is
// not: every effect runs once. Restarted elsewhere (an empty directory),
// the effects of the uncommitted records run again, at most twice in all;
// the output stays exactly once throughout. The aborted transactions leave
// no marks: the records handled again are not skipped as duplicates.
func TestDedupeOnceAcrossCrash(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		pl := newPipeline(t, c, 2, 3000, 100)
		ids, _ := span(0, 1000, 0)
		pl.produceEvents(t, ids...)
		dir := t.TempDir()
		var e effects
		var skipped atomic.Int64
		slow := func(h processor.Handler) processor.Handler {
			return func(ctx context.Context, r *kgo.Record, out processor.Emitter) error {
				time.Sleep(200 * time.Microsecond) // spread over several transactions
				return h(ctx, r, out)
			}
		}

		// Crash and restart on the same directory.
		var cut kafkatest.Cutter
		a := start(t, append(pl.opts("i1", slow(onceHandler(&e, &skipped, 400, cut.Cut))),
			processor.WithDedupe(dir, nil), processor.WithKgoOpts(cut.Opt()))...)
		require.Eventually(t, func() bool { o, m, _ := e.counts(); return o+m >= 400 }, 30*time.Second, 5*time.Millisecond)
		_ = a.stop(t)
		a2 := start(t, append(pl.opts("i1", onceHandler(&e, &skipped, 0, nil)), processor.WithDedupe(dir, nil))...)
		pl.waitOutputs(t, 1000, 60*time.Second)
		require.NoError(t, a2.stop(t))
		once, more, _ := e.counts()
		require.Equal(t, 1000, once)
		require.Zero(t, more, "restarted on its own directory, no effect runs twice")
		require.Positive(t, skipped.Load(), "records handled again after the crash found their effect done")
		require.Zero(t, dupsSkipped(a, a2), "aborted transactions leave no marks")

		// Crash and move to an empty directory.
		ids, _ = span(1000, 2000, 0)
		pl.produceEvents(t, ids...)
		var cut2 kafkatest.Cutter
		a3 := start(t, append(pl.opts("i1", slow(onceHandler(&e, &skipped, 400, cut2.Cut))),
			processor.WithDedupe(dir, nil), processor.WithKgoOpts(cut2.Opt()))...)
		require.Eventually(t, func() bool { o, m, _ := e.counts(); return o+m >= 1400 }, 30*time.Second, 5*time.Millisecond)
		_ = a3.stop(t)
		b := start(t, append(pl.opts("i1", onceHandler(&e, &skipped, 0, nil)), processor.WithDedupe(t.TempDir(), nil))...)
		pl.waitOutputs(t, 2000, 60*time.Second)

		// Normal path: each effect exactly once.
		ids, _ = span(2000, pl.inputs, 0)
		pl.produceEvents(t, ids...)
		pl.waitDone(t, 60*time.Second)
		require.NoError(t, b.stop(t))
		once, more, most := e.counts()
		require.Equal(t, pl.inputs, once+more)
		require.LessOrEqual(t, most, 2, "an effect runs at most twice")
		require.Positive(t, more, "the new owner repeated effects of uncommitted records")
		for id := 2000; id < pl.inputs; id++ {
			e.mu.Lock()
			n := e.runs[string(eventID(id))]
			e.mu.Unlock()
			require.Equal(t, 1, n, "event %d after the crashes", id)
		}
		rep := pl.read(t)
		require.True(t, rep.ExactlyOnce(), rep.String())
		require.Equal(t, pl.inputs, rep.Outputs)
		require.Zero(t, dupsSkipped(a, a2, a3, b))
		t.Logf("effects: %d once, %d twice", once, more)
	})
}

// TestDedupeAbortLeavesNoMarks: transactions aborted by refused offset
// commits leave no marks: every record is handled again and output once,
// none is skipped as a duplicate of itself.
func TestDedupeAbortLeavesNoMarks(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		if c.Fake == nil {
			t.Skip("needs kfake fault injection (TestDedupeOnceAcrossCrash covers aborts on a real broker)")
		}
		pl := newPipeline(t, c, 2, 3000, 100)
		ids, injected := span(0, pl.inputs, 13)
		pl.produceEvents(t, ids...)
		c.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.TxnOffsetCommit}, Err: kerr.UnknownServerError, Count: 3})
		r := start(t, append(pl.opts("i1", copyHandler), processor.WithDedupe(t.TempDir(), nil))...)
		pl.waitDone(t, 60*time.Second)
		require.Eventually(t, func() bool { return dupsSkipped(r) >= int64(injected) }, 30*time.Second, 20*time.Millisecond)
		require.NoError(t, r.stop(t))
		rep := pl.read(t)
		require.True(t, rep.ExactlyOnce(), rep.String())
		require.Equal(t, pl.inputs, rep.Outputs)
		require.Positive(t, r.p.Stats().Aborts, "the fault must have aborted transactions")
		require.Equal(t, int64(injected), r.p.Stats().DuplicatesSkipped)
	})
}

// TestDedupeExpiry: an ID is remembered for the TTL, and marks restored
// from the changelog keep their original time.
func TestDedupeExpiry(t *testing.T) {
	c := kafkatest.New(t)
	pl := newPipeline(t, c, 1, 10, 10)
	// The processor's clock (WithClock) drives the mark times and the
	// dedupe store's expiry.
	clock := &fakeClock{now: time.Now()}
	advance := clock.advance
	dopts := &dedupe.Options{TTL: time.Hour, BucketWidth: time.Minute}
	var outputs atomic.Int64
	h := func(ctx context.Context, r *kgo.Record, out processor.Emitter) error {
		outputs.Add(1)
		return copyHandler(ctx, r, out)
	}
	// waitOut waits until n outputs are committed and the marks of their
	// transactions applied: IDs still pending in the partition are skipped
	// whatever the clock says (they are seconds old at most).
	waitOut := func(r *running, n int64) {
		t.Helper()
		require.Eventually(t, func() bool { return r.p.Stats().Outputs >= n }, 30*time.Second, 5*time.Millisecond)
	}
	a := start(t, append(pl.opts("i1", h), processor.WithClock(clock), processor.WithDedupe(t.TempDir(), dopts))...)
	pl.produceEvents(t, 0, 1)
	waitOut(a, 2)
	advance(30 * time.Minute)
	pl.produceEvents(t, 0, 2) // 0 inside the TTL: skipped
	waitOut(a, 3)
	advance(40 * time.Minute)
	pl.produceEvents(t, 1, 3) // 1 past the TTL: handled again
	waitOut(a, 5)
	require.NoError(t, a.stop(t))
	require.Equal(t, int64(1), a.p.Stats().DuplicatesSkipped)

	// A fresh directory restores the marks with their times: 0 and 1 were
	// marked 70 minutes ago (0 was skipped, not marked again, at 30), 1
	// again, 2 and 3 within the hour.
	b := start(t, append(pl.opts("i1", h), processor.WithClock(clock), processor.WithDedupe(t.TempDir(), dopts))...)
	pl.produceEvents(t, 0, 1, 2, 3, 4)
	waitOut(b, 2) // 0 and 4
	require.Eventually(t, func() bool { return b.p.Stats().DuplicatesSkipped == 3 }, 30*time.Second, 5*time.Millisecond)
	require.NoError(t, b.stop(t))
	require.Positive(t, b.p.Stats().MarksRestored)
	// Committed outputs, not handler calls: a transaction aborted by a
	// rebalance (b's group settling on a cluster) runs its records'
	// handlers again, and only what commits is exactly once.
	require.Equal(t, int64(7), a.p.Stats().Outputs+b.p.Stats().Outputs)
	require.GreaterOrEqual(t, outputs.Load(), int64(7))
	c.Settle(t, 10*time.Second, pl.out)
	require.Len(t, c.ReadCommitted(t, pl.out), 7)

	cfg, err := c.Admin.DescribeTopicConfigs(context.Background(), pl.group+"-"+pl.in+"-dedupe")
	require.NoError(t, err)
	rc, err := cfg.On(pl.group+"-"+pl.in+"-dedupe", nil)
	require.NoError(t, err)
	got := map[string]string{}
	for _, kv := range rc.Configs {
		if kv.Value != nil {
			got[kv.Key] = *kv.Value
		}
	}
	require.Equal(t, "compact,delete", got["cleanup.policy"])
	require.Equal(t, fmt.Sprint((time.Hour + time.Minute).Milliseconds()), got["retention.ms"])
}

// TestDedupeEventIDs: a custom event ID function; an over-long ID goes to
// the dead-letter topic with its reason; a dead-lettered event counts as
// processed; Once without an event ID just runs; Once outside a dedupe
// handler fails.
func TestDedupeEventIDs(t *testing.T) {
	c := kafkatest.New(t)
	pl := newPipeline(t, c, 1, 6, 6)
	var ran atomic.Int64
	h := func(ctx context.Context, r *kgo.Record, out processor.Emitter) error {
		if p, _ := verify.Decode(r.Value); p.ID == 3 {
			return processor.Permanent(fmt.Errorf("poison"))
		}
		ok, err := processor.Once(ctx, func(context.Context) error { ran.Add(1); return nil })
		if err != nil || !ok {
			return processor.Permanent(fmt.Errorf("once: %v %v", ok, err))
		}
		return copyHandler(ctx, r, out)
	}
	// The event ID is the value's payload ID, as text, except for input
	// 5, whose ID is over-long, and input 4, which has none.
	idOf := func(r *kgo.Record) []byte {
		p, _ := verify.Decode(r.Value)
		switch p.ID {
		case 4:
			return nil
		case 5:
			return []byte(strings.Repeat("x", 40))
		}
		return fmt.Appendf(nil, "%d", p.ID)
	}
	r := start(t, append(pl.opts("i1", h), processor.WithDedupe(t.TempDir(), &dedupe.Options{MaxIDLen: 32}),
		processor.WithEventID(idOf))...)
	pl.produce(t, 0, 6)
	pl.produce(t, 0, 5) // 0-3 repeat (3 was dead-lettered); 4 has no ID and is handled again
	require.Eventually(t, func() bool { return r.p.Stats().DuplicatesSkipped == 4 && r.p.Stats().DeadLettered == 2 }, 30*time.Second, 5*time.Millisecond)
	require.NoError(t, r.stop(t))
	rep := pl.read(t)
	require.Equal(t, 5, rep.Outputs, rep.String()) // 0-2, 4, and 4 again
	require.Equal(t, 1, rep.Duplicates, rep.String())
	require.Equal(t, 2, rep.DLQ)
	require.Equal(t, int64(5), ran.Load())
	reasons := map[string]int{}
	for _, d := range c.ReadCommitted(t, pl.dlq) {
		reasons[header(d, processor.HeaderReason)]++
		if header(d, processor.HeaderReason) == "event-id-too-long" {
			require.Contains(t, header(d, processor.HeaderError), "40 bytes")
		}
	}
	require.Equal(t, map[string]int{"event-id-too-long": 1, "permanent": 1}, reasons)

	_, err := processor.Once(context.Background(), func(context.Context) error { return nil })
	require.ErrorIs(t, err, processor.ErrNoDedupe)
}

func TestDedupeInvalidOptions(t *testing.T) {
	base := validOpts()
	_, err := processor.New(append(base, processor.WithDedupe("d", nil))...)
	require.NoError(t, err)
	cases := map[string][]processor.Opt{
		"WithEventID needs WithDedupe": {processor.WithEventID(func(*kgo.Record) []byte { return nil })},
		"a directory is required":      {processor.WithDedupe("", nil)},
		"different directories":        {processor.WithDedupe("d", nil), processor.WithStateStore("d", nil)},
		"BucketWidth":                  {processor.WithDedupe("d", &dedupe.Options{TTL: time.Minute, BucketWidth: time.Hour})},
		"MaxIDLen":                     {processor.WithDedupe("d", &dedupe.Options{MaxIDLen: 64 << 10})},
		"opts.Clock must be nil":       {processor.WithDedupe("d", &dedupe.Options{Clock: dedupe.ClockFunc(time.Now)})},
	}
	for want, bad := range cases {
		_, err := processor.New(append(base[:len(base):len(base)], bad...)...)
		require.ErrorIs(t, err, processor.ErrInvalidOption, want)
		require.Contains(t, err.Error(), want)
	}
	// What dedupe.Options.Validate rejects, for the user's options or for
	// the store's (whose MaxIDLen adds the processor's key prefix), fails
	// with its error.
	for _, o := range []*dedupe.Options{{TTL: time.Minute, BucketWidth: time.Hour}, {MaxIDLen: 64<<10 + 1}, {MaxIDLen: 64 << 10}} {
		_, err := processor.New(append(base[:len(base):len(base)], processor.WithDedupe("d", o))...)
		require.ErrorIs(t, err, processor.ErrInvalidOption)
		require.ErrorIs(t, err, dedupe.ErrInvalidOptions)
	}
}

// fakeClock is a processor.Clock whose time moves only when told to; its
// timers run on real time.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}
