package processor

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestTxnBudgetAdapts(t *testing.T) {
	b := newTxnBudget(10 * time.Second) // target 2s
	require.Equal(t, int64(txnBudgetStart), b.limit)
	b.ended(false, 100*time.Millisecond)
	require.Equal(t, int64(txnBudgetStart), b.limit, "a transaction the budget did not hold says nothing of a larger one")
	b.ended(true, 100*time.Millisecond)
	require.Equal(t, int64(2*txnBudgetStart), b.limit, "a filled transaction that ended fast: double")
	b.ended(true, 1500*time.Millisecond)
	require.Equal(t, int64(2*txnBudgetStart), b.limit, "between half the target and the target: keep")
	b.ended(false, 3*time.Second)
	require.Equal(t, int64(txnBudgetStart), b.limit, "an end beyond the target: halve, filled or not")
	for range 20 {
		b.ended(true, 5*time.Second)
	}
	require.Equal(t, int64(txnBudgetMin), b.limit)
	for range 20 {
		b.ended(true, time.Millisecond)
	}
	require.Equal(t, int64(txnBudgetMax), b.limit)
}

// TestLoopTransactionBudget: while a transaction's end is held up, the
// next one takes finished work up to its budget and no more; the rest
// waits for the transactions after it, nothing lost, nothing out of
// order. Without the budget the second transaction took all 3,000
// records (issue 42: transactions that filled during a slow end outlived
// their timeout).
func TestLoopTransactionBudget(t *testing.T) {
	const budget = 2000 // bytes: about 400 records of these
	h := newLoopHarness(t, copyToOutput, hooksOpt(func(h *testHooks) { h.fixedBudget = budget }),
		WithCommitInterval(5*time.Millisecond))
	ending := make(chan struct{})
	h.c.ending = ending // the first commit's end waits until released
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- h.l.run(ctx) }()

	const n, sessions = 3000, 17
	h.c.fetch("in", 0, records(0, 10, sessions)...)
	h.awaitEnding() // the first transaction's end, held
	for from := int64(10); from < n; from += 500 {
		h.c.fetch("in", 0, records(from, min(from+500, n), sessions)...)
	}
	time.Sleep(200 * time.Millisecond) // the loop finishes what it can meanwhile
	close(ending)                      // and every later commit's end goes through
	h.awaitCommitted(n)
	cancel()
	require.NoError(t, <-done)

	var perRecord int64 = 6 // key "sNN", value up to 4 digits
	for i, b := range h.c.txnBytes {
		require.LessOrEqual(t, b, budget+perRecord, "transaction %d: within its budget by one record at most", i)
	}
	require.GreaterOrEqual(t, len(h.c.txnBytes), 8, "the input spread over transactions of the budget's size")
	h.requireSessionOrder(n, sessions)
}

// TestLoopEndsAgingTransaction: a transaction commits once it has been
// open a quarter of the transaction timeout, though its schedule (here a
// fixed interval just under the timeout) would let it run on: it must end
// well before the coordinator aborts it.
func TestLoopEndsAgingTransaction(t *testing.T) {
	const timeout = 4 * time.Second
	h := newLoopHarness(t, copyToOutput, WithTransactionTimeout(timeout),
		WithCommitInterval(timeout-100*time.Millisecond), WithMinCommitInterval(timeout-100*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- h.l.run(ctx) }()
	start := time.Now()
	h.c.fetch("in", 0, records(0, 10, 3)...)
	require.Eventually(t, func() bool { return h.c.commitCount() > 0 }, timeout, time.Millisecond)
	took := time.Since(start)
	cancel()
	require.NoError(t, <-done)
	require.Less(t, took, timeout/2, "committed at a quarter of the timeout, not at the interval's end")
}

// TestLoopShutdownCommitsPastTheBudget: a stop while finished work waits
// beyond the open transaction's budget commits it all, in as many
// transactions as the budget needs, rather than leave it to be redone.
func TestLoopShutdownCommitsPastTheBudget(t *testing.T) {
	const budget = 2000
	h := newLoopHarness(t, copyToOutput, hooksOpt(func(h *testHooks) { h.fixedBudget = budget }),
		WithCommitInterval(5*time.Millisecond))
	ending := make(chan struct{})
	h.c.ending = ending
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.l.run(ctx) }()
	const n = 3000
	h.c.fetch("in", 0, records(0, 10, 17)...)
	h.awaitEnding() // the first transaction's end, held
	h.c.fetch("in", 0, records(10, n, 17)...)
	time.Sleep(200 * time.Millisecond) // every record finishes; the open transaction is full
	cancel()
	close(ending)
	require.NoError(t, <-done)
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	require.Equal(t, int64(n), h.c.offsets[tp{"in", 0}].Offset, "everything finished is committed at the stop")
	require.Len(t, h.c.outputs, n)
}
