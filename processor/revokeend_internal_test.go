package processor

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLoopRevokeBeforeEndStarts: a revoke that franz-go runs when the loop
// allows rebalances after collecting a commit, in the step that then
// starts the next transaction's end, is taken before that end starts. The
// next transaction holds work of the revoked partition: it aborts. Before
// the fix it committed that work and the partition's offset, after the
// member had given the partition up (issue 42: the new owner, reading the
// older offset, did it again).
func TestLoopRevokeBeforeEndStarts(t *testing.T) {
	h := newLoopHarness(t, copyToOutput)
	ctx := context.Background()
	fetch := func(p int32, from, to int64) {
		require.NoError(t, h.l.ps.intake(fetchesOf("in", p, records(from, to, 1)), h.l.now))
	}
	fetch(0, 0, 4)
	fetch(1, 0, 4)
	h.settle(h.idle)
	h.c.ending = make(chan struct{}) // T1's end waits
	require.NoError(t, h.l.startCommit(ctx))
	fetch(0, 4, 8) // T2 fills with more of both partitions while T1 ends
	fetch(1, 4, 8)
	h.settle(h.idle)
	require.True(t, h.l.c.open.used)
	h.c.onAllow = func() { h.l.group.onRevoked(ctx, nil, map[string][]int32{"in": {1}}) }
	close(h.c.ending)
	require.Eventually(t, h.l.c.done, 5*time.Second, time.Millisecond)
	// The loop's step: collect T1 (which allows the rebalance: in/1 is
	// revoked), then start T2's end.
	require.NoError(t, h.l.takeCommit(ctx, false))
	require.NoError(t, h.l.startCommit(ctx))
	require.NoError(t, h.l.takeCommit(ctx, true))

	off1, _, _ := h.c.committed("in", 1)
	require.Equal(t, int64(4), off1, "in/1 keeps T1's offset: its new owner goes on from there")
	require.Equal(t, 1, h.c.commits, "T2 held work of the revoked in/1: aborted, not committed")
	require.Equal(t, int64(1), h.p.Stats().AbortsBy["revoked"])
}

// TestRevokeWaitsForRunningEnd: a revoke waits for a transaction's end
// that started before it; franz-go rejoins (and the partition can go to
// another member) only once the callback returns, so the end's offset
// commit is made under the generation that owned the partition.
func TestRevokeWaitsForRunningEnd(t *testing.T) {
	h := newLoopHarness(t, copyToOutput)
	ctx := context.Background()
	require.NoError(t, h.l.ps.intake(fetchesOf("in", 1, records(0, 4, 1)), h.l.now))
	h.settle(h.idle)
	ending := make(chan struct{})
	release := sync.OnceFunc(func() { close(ending) })
	defer release() // a failure below must not leave the end waiting
	h.c.ending = ending
	require.NoError(t, h.l.startCommit(ctx))
	returned := make(chan int, 1) // commits made when onRevoked returned
	go func() {
		h.l.group.onRevoked(ctx, nil, map[string][]int32{"in": {1}})
		returned <- h.c.commitCount()
	}()
	select {
	case <-returned:
		t.Fatal("the revoke returned while the end that holds the partition's work was running")
	case <-time.After(100 * time.Millisecond):
	}
	release()
	require.Equal(t, 1, <-returned, "the revoke returned after the end committed")
	require.NoError(t, h.l.takeCommit(ctx, true))

	// An empty revoke (franz-go's at the end of a cooperative session)
	// and one with no end running return at once.
	h.l.group.onRevoked(ctx, nil, nil)
}
