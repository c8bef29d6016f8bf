package processor

import (
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// txnBudget bounds the bytes a transaction takes in, so that its end
// (flush, offset commit, EndTxn) stays well within the transaction
// timeout whatever the brokers' pace. A transaction the coordinator times
// out is aborted and its producer fenced: the instance rebuilds and redoes
// the work, which loads the brokers further (issue 42: over 3 instances and
// 300 partitions, transactions that filled during a slow end held every
// record fetched meanwhile, took up to 15.9s to end and were aborted).
//
// The bound adapts as TCP's window does: it halves after an end that took
// longer than the target, and doubles, up to its maximum, after a
// transaction that the bound filled ended within half the target. A
// transaction that did not reach the bound says nothing of a larger one.
type txnBudget struct {
	limit    int64         // bytes the open transaction may take
	min, max int64         // the limit's range
	target   time.Duration // an end's intended longest time
}

// Budget range. The start is slow, as TCP's: a fraction of a second of a
// busy broker's produce throughput, doubled by each fast end (at 4 MiB, 12
// instances' first transactions on a fresh cluster still outlived their
// timeout once); the maximum is well above what one commit interval
// brings at the pipeline's best pace.
const (
	txnBudgetStart = 1 << 20
	txnBudgetMin   = 256 << 10
	txnBudgetMax   = 64 << 20
)

// newTxnBudget aims each end at a fifth of the transaction timeout: a
// transaction then fills during one end and ends in the next, within half
// its timeout.
func newTxnBudget(txnTimeout time.Duration) txnBudget {
	return txnBudget{limit: txnBudgetStart, min: txnBudgetMin, max: txnBudgetMax, target: txnTimeout / 5}
}

// full reports whether a transaction holding bytes may take no more.
func (b *txnBudget) full(bytes int64) bool { return bytes >= b.limit }

// ended adapts the limit to a committed transaction whose end took took;
// filled says whether the limit held it.
func (b *txnBudget) ended(filled bool, took time.Duration) {
	switch {
	case took > b.target:
		b.limit = max(b.min, b.limit/2)
	case filled && took <= b.target/2:
		b.limit = min(b.max, b.limit*2)
	}
}

// recordBytes is what a record adds to its transaction's size.
func recordBytes(r *kgo.Record) int64 {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return int64(n)
}
