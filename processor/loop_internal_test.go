package processor

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/offsetmeta"
)

// loopHarness drives one lifetime's loop steps by hand against a
// fakeClient: fetch, dispatch, completion, commit, abort and revoke are
// tested without a broker.
type loopHarness struct {
	t *testing.T
	p *Processor
	l *lifetime
	c *fakeClient
}

func newLoopHarness(t *testing.T, h Handler, opts ...Opt) *loopHarness {
	t.Helper()
	p, err := New(append([]Opt{WithBrokers("x"), WithGroup("g"), WithInstanceID("i"), WithInputTopics("in"),
		WithOutputTopic("out"), WithDLQTopic("dlq"), WithHandler(h)}, opts...)...)
	require.NoError(t, err)
	r := newRun(p)
	l := r.newLifetime(context.Background())
	c := newFakeClient()
	stopGate := l.connect(c)
	t.Cleanup(func() {
		l.ps.staleAll()
		r.pool.Stop()
		stopGate()
		l.ps.restores.close()
		c.mu.Lock()
		defer c.mu.Unlock()
		require.Empty(t, c.violations, "the pipeline's invariants")
	})
	return &loopHarness{t: t, p: p, l: l, c: c}
}

// records returns input records at offsets [from, to) of sessions s0..s(n-1).
func records(from, to int64, sessions int) []*kgo.Record {
	var rs []*kgo.Record
	for o := from; o < to; o++ {
		rs = append(rs, &kgo.Record{Topic: "in", Offset: o, Key: fmt.Appendf(nil, "s%d", o%int64(sessions)), Value: fmt.Appendf(nil, "%d", o)})
	}
	return rs
}

// intake hands records of in/0 to the loop as one fetch.
func (h *loopHarness) intake(recs ...*kgo.Record) {
	h.t.Helper()
	require.NoError(h.t, h.l.ps.intake(fetchesOf("in", 0, recs), h.l.now))
}

// settle drains completions until cond holds.
func (h *loopHarness) settle(cond func() bool) {
	h.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		require.NoError(h.t, h.l.ps.drain(h.l.c.open, h.l.now))
		if cond() {
			return
		}
		select {
		case <-h.l.comps.wake:
		case <-deadline:
			h.t.Fatalf("loop did not settle: %d unfinished, %d held", h.l.ps.unfinished(), len(h.part().held))
		}
	}
}

func (h *loopHarness) idle() bool { return h.l.ps.unfinished() == 0 }

func (h *loopHarness) part() *partition { return h.l.ps.all[tp{"in", 0}] }

// commit commits as the loop does: the next transaction fills while the
// open one ends, unless the lifetime cannot overlap them.
func (h *loopHarness) commit() {
	h.t.Helper()
	ctx := context.Background()
	if !h.l.canOverlap() {
		require.NoError(h.t, h.l.commit(ctx))
		return
	}
	if !h.l.c.open.used {
		return
	}
	require.NoError(h.t, h.l.startCommit(ctx))
	h.whileEnding()
}

// whileEnding runs the loop's steps until the running end is taken.
func (h *loopHarness) whileEnding() {
	h.t.Helper()
	ctx := context.Background()
	deadline := time.After(10 * time.Second)
	for h.l.c.ending != nil {
		select {
		case <-h.l.comps.wake:
		case <-deadline:
			h.t.Fatal("the transaction's end did not finish")
		}
		h.l.now = h.l.cfg.clock.Now()
		require.NoError(h.t, h.l.ps.drain(h.l.c.open, h.l.now))
		require.NoError(h.t, h.l.ps.checkStuck(h.l.c.open, h.l.now))
		require.NoError(h.t, h.l.c.open.gate.releaseIfReady())
		require.NoError(h.t, h.l.takeCommit(ctx, false))
	}
}

// commitWhile commits with the transaction's end held until meanwhile has
// run and the loop has had a moment to admit what finished.
func (h *loopHarness) commitWhile(meanwhile func()) {
	h.t.Helper()
	h.c.ending = make(chan struct{})
	go func() {
		meanwhile()
		time.Sleep(20 * time.Millisecond)
		close(h.c.ending)
	}()
	h.commit()
	h.c.ending = nil
}

// awaitCommitted waits until in/0 is committed up to offset n.
func (h *loopHarness) awaitCommitted(n int64) {
	h.t.Helper()
	require.Eventually(h.t, func() bool {
		h.c.mu.Lock()
		defer h.c.mu.Unlock()
		return h.c.offsets[tp{"in", 0}].Offset == n
	}, 30*time.Second, time.Millisecond)
}

// awaitEnding waits until a transaction's end is in its offset commit.
func (h *loopHarness) awaitEnding() {
	h.t.Helper()
	require.Eventually(h.t, func() bool {
		h.c.mu.Lock()
		defer h.c.mu.Unlock()
		return h.c.committing
	}, 10*time.Second, time.Millisecond, "a transaction ends")
}

// requireSessionOrder checks the committed outputs of inputs [0, n) of
// records(…, sessions): each once, in order per session.
func (h *loopHarness) requireSessionOrder(n, sessions int64) {
	h.t.Helper()
	out := h.outputValues()
	for s := range sessions {
		var want []string
		for o := s; o < n; o += sessions {
			want = append(want, fmt.Sprint(o))
		}
		require.Equal(h.t, want, out[fmt.Sprintf("s%d", s)], "session s%d: each output once, in order", s)
	}
}

// committed returns the committed offset of in/0 and the finished ranges
// its metadata holds.
func (h *loopHarness) committed() (int64, []offsetmeta.Range) {
	h.t.Helper()
	off, meta, ok := h.c.committed("in", 0)
	require.True(h.t, ok, "in/0 was not committed")
	done, err := offsetmeta.Decode(off, meta)
	require.NoError(h.t, err)
	return off, done
}

// outputValues returns the values of committed outputs per key, in order.
func (h *loopHarness) outputValues() map[string][]string {
	out := make(map[string][]string)
	for _, r := range h.c.outputs {
		if r.Topic == "out" {
			out[string(r.Key)] = append(out[string(r.Key)], string(r.Value))
		}
	}
	return out
}

func copyToOutput(_ context.Context, r *kgo.Record, out Emitter) error {
	out.Emit(&kgo.Record{Value: r.Value})
	return nil
}

// blocker is a handler that blocks the records whose offsets it holds
// until they are released.
type blocker struct {
	mu    sync.Mutex
	gates map[int64]chan struct{}
}

func newBlocker(offsets ...int64) *blocker {
	b := &blocker{gates: make(map[int64]chan struct{})}
	for _, o := range offsets {
		b.gates[o] = make(chan struct{})
	}
	return b
}

func (b *blocker) release(o int64) { close(b.gates[o]) }

func (b *blocker) handle(ctx context.Context, r *kgo.Record, out Emitter) error {
	b.mu.Lock()
	g := b.gates[r.Offset]
	b.mu.Unlock()
	if g != nil {
		select {
		case <-g:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return copyToOutput(ctx, r, out)
}

func TestLoopCommitsFinishedRecordsInSessionOrder(t *testing.T) {
	h := newLoopHarness(t, copyToOutput)
	h.intake(records(0, 100, 7)...)
	h.settle(h.idle)
	h.commit()
	off, done := h.committed()
	require.Equal(t, int64(100), off)
	require.Empty(t, done)
	out := h.outputValues()
	for s := range 7 {
		var want []string
		for o := int64(s); o < 100; o += 7 {
			want = append(want, fmt.Sprint(o))
		}
		require.Equal(t, want, out[fmt.Sprintf("s%d", s)], "session s%d", s)
	}
	require.Equal(t, int64(100), h.p.Stats().Outputs)
}

func TestLoopCommitPointStopsAtUnfinishedRecord(t *testing.T) {
	b := newBlocker(3)
	h := newLoopHarness(t, b.handle)
	h.intake(records(0, 20, 5)...)
	// Everything but offset 3 and the later records of its session (8,
	// 13, 18), which wait behind it.
	h.settle(func() bool { return h.l.ps.unfinished() == 4 && h.part().done == 20-4-3 })
	h.commit()
	off, done := h.committed()
	require.Equal(t, int64(3), off)
	require.Equal(t, []offsetmeta.Range{{Start: 4, End: 8}, {Start: 9, End: 13}, {Start: 14, End: 18}, {Start: 19, End: 20}}, done)

	b.release(3)
	h.settle(h.idle)
	h.commit()
	off, done = h.committed()
	require.Equal(t, int64(20), off)
	require.Empty(t, done)
	require.Equal(t, []string{"3", "8", "13", "18"}, h.outputValues()["s3"])
}

func TestLoopAbortRewindsAndRedoesOnce(t *testing.T) {
	h := newLoopHarness(t, copyToOutput)
	h.intake(records(0, 10, 2)...)
	h.settle(h.idle)
	h.commit()
	h.intake(records(10, 20, 2)...)
	h.settle(h.idle)
	h.c.abortNext = true
	h.commit()
	require.Equal(t, 1, h.c.aborts)
	p := h.part()
	require.Equal(t, int64(10), p.next, "rewound to the last commit")
	require.Equal(t, int64(10), h.p.Stats().Reprocessed)

	// The consumer refetches from the committed offset; records below the
	// rewound position are filtered.
	h.intake(records(5, 20, 2)...)
	h.settle(h.idle)
	h.commit()
	off, _ := h.committed()
	require.Equal(t, int64(20), off)
	var all []string
	for _, r := range h.c.outputs {
		all = append(all, string(r.Value))
	}
	require.Len(t, all, 20, "each record's output is committed once: %v", all)
	s := h.p.Stats()
	require.Equal(t, int64(20), s.Consumed, "records fetched again after the rewind are not consumed again")
	require.Equal(t, int64(1), s.Aborts)
	require.Equal(t, map[string]int64{"refused": 1}, s.AbortsBy)
	require.Equal(t, []string{"0", "2", "4", "6", "8", "10", "12", "14", "16", "18"}, h.outputValues()["s0"])
}

func TestLoopFailedProduceAbortsTransaction(t *testing.T) {
	h := newLoopHarness(t, copyToOutput)
	h.c.failNext = fmt.Errorf("record too large")
	h.intake(records(0, 4, 1)...)
	h.settle(h.idle)
	h.commit()
	require.Zero(t, h.c.commits, "a failed produce must not commit its input's offset")
	require.Equal(t, 1, h.c.aborts)
	require.Equal(t, map[string]int64{"produce": 1}, h.p.Stats().AbortsBy, "a failed produce's abort is counted")
	h.intake(records(0, 4, 1)...)
	h.settle(h.idle)
	h.commit()
	off, _ := h.committed()
	require.Equal(t, int64(4), off)
	require.Len(t, h.c.outputs, 4)
}

func TestLoopHoldsCompletionsWhenMetadataIsFull(t *testing.T) {
	b := newBlocker(0)
	// 64 bytes of metadata hold 22 runs; with s0 (even offsets) waiting
	// behind offset 0, every finished odd offset is a run of its own.
	h := newLoopHarness(t, b.handle, WithMaxCommitMetadataBytes(64), WithMaxBuffered(200, 1000))
	h.intake(records(0, 100, 2)...)
	h.settle(func() bool { return len(h.part().held) == 50-22 })
	h.l.ps.backpressure()
	require.True(t, h.c.isPaused("in", 0), "fetching pauses while completions are held")
	h.commit()
	off, meta, _ := h.c.committed("in", 0)
	require.Equal(t, int64(0), off)
	require.LessOrEqual(t, len(meta), 64)
	_, done := h.committed()
	require.Len(t, done, 22)

	b.release(0)
	h.settle(func() bool { return h.idle() && len(h.part().held) == 0 })
	h.l.ps.backpressure()
	require.False(t, h.c.isPaused("in", 0))
	h.commit()
	off, done = h.committed()
	require.Equal(t, int64(100), off)
	require.Empty(t, done)
	var odd []string
	for o := 1; o < 100; o += 2 {
		odd = append(odd, fmt.Sprint(o))
	}
	require.Equal(t, odd, h.outputValues()["s1"], "held completions keep their session's order")
}

func TestLoopRevokeDropsInFlightWork(t *testing.T) {
	b := newBlocker(2)
	h := newLoopHarness(t, b.handle)
	h.intake(records(0, 6, 3)...)
	h.settle(func() bool { return h.l.ps.unfinished() == 2 }) // 2, and 5 behind it
	h.l.group.onRevoked(context.Background(), nil, map[string][]int32{"in": {0}})
	require.NoError(t, h.l.handleEvents())
	require.Nil(t, h.part(), "a revoked partition is forgotten")
	b.release(2)
	// Its completion arrives stale and is not produced.
	deadline := time.After(5 * time.Second)
	for h.l.obs.stats.activeSessions.Load() > 0 {
		select {
		case <-deadline:
			t.Fatal("sessions did not end")
		case <-time.After(time.Millisecond):
		}
	}
	require.NoError(t, h.l.ps.drain(h.l.c.open, h.l.now))
	h.commit()
	_, _, ok := h.c.committed("in", 0)
	require.False(t, ok, "a revoked partition's offsets are not committed")
	for _, r := range h.c.outputs {
		require.NotEqual(t, "2", string(r.Value))
	}
}

// TestLoopRevokeAbortsTransactionWithItsWork: a transaction that holds
// finished work of a partition revoked since (or lost, or lost and
// assigned again) would commit those outputs without the partition's
// offset, and its next owner would redo them: it aborts instead, and the
// work of the partition that stayed is redone from the last commit.
func TestLoopRevokeAbortsTransactionWithItsWork(t *testing.T) {
	h := newLoopHarness(t, copyToOutput)
	h.intake(records(0, 4, 2)...)
	require.NoError(t, h.l.ps.intake(fetchesOf("in", 1, records(0, 4, 2)), h.l.now))
	h.settle(func() bool {
		return h.l.ps.unfinished() == 0 && h.part().done == 0 && h.l.ps.all[tp{"in", 1}].done == 0
	})
	require.True(t, h.l.c.open.used)
	h.l.group.onRevoked(context.Background(), nil, map[string][]int32{"in": {1}})
	require.NoError(t, h.l.handleEvents())
	h.commit()
	require.Zero(t, h.c.commits, "outputs of a revoked partition must not commit without its offset")
	require.Empty(t, h.c.outputs)
	require.Equal(t, map[string]int64{"revoked": 1}, h.p.Stats().AbortsBy)
	require.Equal(t, int64(-1), h.part().next, "in/0 is redone from its last commit (none): its state starts again")
	require.Equal(t, 1, h.c.rewinds)
}

func TestLoopSkipsRecordsFinishedByEarlierTransaction(t *testing.T) {
	h := newLoopHarness(t, copyToOutput)
	// As if the previous owner committed offset 2 with 3..5 and 7 done.
	h.l.group.assigned[tp{"in", 0}] = committedInfo{offset: 2, done: []offsetmeta.Range{{Start: 3, End: 6}, {Start: 7, End: 8}}}
	h.intake(records(2, 10, 3)...)
	h.settle(h.idle)
	h.commit()
	off, done := h.committed()
	require.Equal(t, int64(10), off)
	require.Empty(t, done)
	var got []string
	for _, r := range h.c.outputs {
		got = append(got, string(r.Value))
	}
	require.ElementsMatch(t, []string{"2", "6", "8", "9"}, got)
	require.Equal(t, int64(4), h.p.Stats().SkippedDone)
}

func TestLoopAdmitsIntoNextTransactionWhileOneEnds(t *testing.T) {
	b := newBlocker(2)
	h := newLoopHarness(t, b.handle)
	h.intake(records(0, 8, 4)...) // s2: 2 and 6, waiting behind 2
	h.settle(func() bool { return h.l.ps.unfinished() == 2 })
	// Offsets 2 and 6 finish while the transaction ends; whether the loop
	// admits them before or after its end, they belong to the next
	// transaction.
	h.commitWhile(func() { b.release(2) })
	off, done := h.committed()
	require.Equal(t, int64(2), off)
	require.Equal(t, []offsetmeta.Range{{Start: 3, End: 6}, {Start: 7, End: 8}}, done)
	require.Len(t, h.c.outputs, 6, "the ending transaction holds what finished before it began")
	require.Equal(t, int64(6), h.p.Stats().Outputs)

	h.settle(h.idle)
	h.commit()
	off, done = h.committed()
	require.Equal(t, int64(8), off)
	require.Empty(t, done)
	require.Len(t, h.c.outputs, 8)
	require.Equal(t, []string{"2", "6"}, h.outputValues()["s2"])
	require.Equal(t, int64(8), h.p.Stats().Outputs)
}

func TestLoopAbortWhileEndingDropsNextTransaction(t *testing.T) {
	b := newBlocker(1)
	h := newLoopHarness(t, b.handle)
	h.intake(records(0, 4, 2)...)
	h.settle(func() bool { return h.l.ps.unfinished() == 2 })
	h.c.abortNext = true
	h.commitWhile(func() { b.release(1) })
	require.Zero(t, h.c.commits)
	require.False(t, h.l.c.open.used, "an abort drops what was admitted into the next transaction")
	require.Empty(t, h.l.c.open.gate.held)
	require.False(t, h.c.inTxn(), "the next transaction, begun while the first ended, is aborted too")
	require.Equal(t, 1, h.c.rewinds)
	require.Equal(t, map[string]int64{"refused": 1, "cascade": 1}, h.p.Stats().AbortsBy)
	// Everything is redone from the last commit (none): once each.
	h.intake(records(0, 4, 2)...)
	h.settle(h.idle)
	h.commit()
	off, _ := h.committed()
	require.Equal(t, int64(4), off)
	require.Len(t, h.c.outputs, 4)
}

// TestLoopAdmitsWhileFlushing: the loop goes on while the ending
// transaction's records are flushed, not only while EndTxn runs (on a
// replicated cluster the flush is most of a commit): a record that finishes
// during the flush is admitted into the next transaction, and the window
// room it frees is refilled, so offset 3 is handled before the flush ends.
func TestLoopAdmitsWhileFlushing(t *testing.T) {
	b := newBlocker(1)
	handled3 := make(chan struct{})
	h := newLoopHarness(t, func(ctx context.Context, r *kgo.Record, out Emitter) error {
		if r.Offset == 3 {
			close(handled3)
		}
		return b.handle(ctx, r, out)
	}, WithMaxBuffered(2, 100))
	h.intake(records(0, 4, 4)...)
	// 0 and 2 done, 1 blocked, 3 waits for room in the window of 2.
	h.settle(func() bool { return h.l.ps.unfinished() == 1 && len(h.part().undispatched) == 1 })
	require.Eventually(t, h.l.c.open.gate.ready, 10*time.Second, time.Millisecond, "the first record's own flush")
	flushing := make(chan struct{})
	h.c.mu.Lock()
	h.c.flushing = flushing
	h.c.mu.Unlock()
	var duringFlush bool
	go func() {
		b.release(1)
		select {
		case <-handled3:
			duringFlush = true
		case <-time.After(5 * time.Second):
		}
		close(flushing)
	}()
	h.commit()
	require.True(t, duringFlush, "offset 3 was not dispatched while the flush waited")
	off, _ := h.committed()
	require.Equal(t, int64(1), off)
	h.settle(h.idle)
	h.commit()
	off, _ = h.committed()
	require.Equal(t, int64(4), off)
	require.Len(t, h.c.outputs, 4)
}

// TestLoopBacklogWaitsWithoutPausing: with the total bound reached the loop
// takes no records and pauses nothing (franz-go drops a paused partition's
// buffered fetch and fetches it again); a partition whose queue takes more
// than its part of the total is paused, and resumed once it drains.
func TestLoopBacklogWaitsWithoutPausing(t *testing.T) {
	b := newBlocker(0)
	h := newLoopHarness(t, b.handle, WithMaxBuffered(10, 40))
	h.intake(records(0, 40, 40)...)
	h.settle(func() bool { return h.l.ps.unfinished() == 1 })
	require.Equal(t, 40, h.l.ps.buffered())
	h.c.fetch("in", 0, records(40, 50, 40)...)
	require.NoError(t, h.l.poll(context.Background()))
	h.c.mu.Lock()
	untaken := len(h.c.fetches)
	h.c.mu.Unlock()
	require.Equal(t, 1, untaken, "a full buffer takes nothing from the client")
	h.l.ps.backpressure()
	require.False(t, h.c.isPaused("in", 0), "a full buffer is not a reason to pause")

	// With a second partition, in/0 may queue twice what in/1 keeps:
	// 2 x 40/3 = 26 records; its 30 are too many.
	h.l.ps.get("in", 1)
	h.l.ps.backpressure()
	require.True(t, h.c.isPaused("in", 0), "a partition that holds more than its part")
	require.False(t, h.c.isPaused("in", 1))

	b.release(0)
	h.settle(func() bool { return h.l.ps.unfinished() == 0 && len(h.part().undispatched) < 26 })
	h.l.ps.backpressure()
	require.False(t, h.c.isPaused("in", 0))
}

// TestLoopPollsUntilFirstRecordAcked: while a transaction's first record
// is unacknowledged the loop starts no commit and goes on polling, so what
// it fetches meanwhile commits in the same transaction. On a replicated
// cluster the wait is a coordinator write; committing at once had the loop
// stop fetching through it and every record wait a transaction more.
func TestLoopPollsUntilFirstRecordAcked(t *testing.T) {
	h := newLoopHarness(t, func(_ context.Context, r *kgo.Record, out Emitter) error {
		out.Emit(&kgo.Record{Topic: "out", Key: r.Key, Value: r.Value})
		return nil
	})
	acked := make(chan struct{})
	ack := sync.OnceFunc(func() { close(acked) })
	t.Cleanup(ack) // before the harness's: its cleanup waits for the gate's flush
	h.c.mu.Lock()
	h.c.flushing = acked // the gate's flush of the first record waits
	h.c.mu.Unlock()
	h.intake(records(0, 1, 1)...)
	h.settle(h.idle)
	require.True(t, h.l.c.awaitingFirstRecord(time.Now()))
	require.False(t, h.l.commitDue(time.Now()), "a commit while the first record is out")
	require.True(t, h.l.commitDue(time.Now().Add(h.l.cfg.txnTimeout/4)), "a first record out for a quarter of the transaction timeout no longer holds the commit off")

	h.c.fetch("in", 0, records(1, 3, 1)...)
	require.NoError(t, h.l.poll(context.Background()))
	h.settle(h.idle)
	require.Len(t, h.part().pending, 0, "records polled during the wait are admitted")

	ack()
	require.Eventually(t, h.l.c.open.gate.ready, 10*time.Second, time.Millisecond)
	h.l.c.open.gate.releaseIfReady()
	require.True(t, h.l.commitDue(time.Now()))
	h.commit()
	require.Equal(t, 1, h.c.commits)
	off, _ := h.committed()
	require.Equal(t, int64(3), off, "one transaction holds all three")
	require.Len(t, h.c.outputs, 3)
}

// TestLoopRunPipelines: the loop itself (run) against the fake client,
// with handlers that finish at random times and commits that take a
// while, so that transactions fill while others end: no commit starts
// while another runs, no record of the next transaction goes out while
// the ending one's are unacknowledged (the harness checks both), and
// every record's output is committed once, in session order.
func TestLoopRunPipelines(t *testing.T) {
	for _, pipeline := range []int{1, 2, 3} {
		t.Run(fmt.Sprint("pipeline ", pipeline), func(t *testing.T) {
			h := newLoopHarness(t, func(ctx context.Context, r *kgo.Record, out Emitter) error {
				time.Sleep(time.Duration(r.Offset*7919%300) * time.Microsecond)
				return copyToOutput(ctx, r, out)
			}, WithTransactionPipeline(pipeline), WithCommitInterval(5*time.Millisecond))
			h.c.pipeline, h.c.commitDelay = pipeline, 3*time.Millisecond
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			// The input comes in 60 fetches, four more after each commit:
			// at least 15 transactions however fast the loop runs (in CI
			// under load, all at once came to only 10).
			const n, sessions, fetch, perCommit = 3000, 17, 50, 4
			go func() {
				for from := int64(0); from < n; from += fetch {
					for h.c.commitCount() < int(from/fetch)/perCommit {
						if ctx.Err() != nil {
							return
						}
						time.Sleep(time.Millisecond)
					}
					h.c.fetch("in", 0, records(from, from+fetch, sessions)...)
				}
			}()
			done := make(chan error, 1)
			go func() { done <- h.l.run(ctx) }()
			h.awaitCommitted(n)
			cancel()
			require.NoError(t, <-done)
			h.requireSessionOrder(n, sessions)
			require.GreaterOrEqual(t, h.c.commits, n/fetch/perCommit, "the input spread over many transactions")
		})
	}
}
