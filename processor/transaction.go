package processor

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// transaction is the open Kafka transaction as the loop fills it: the
// records produced into it (through the open gate), how far each
// changelog partition got, the first produce error, and the counts that
// Stats takes when it commits. The loop owns it; promises, which run on
// the client's goroutines, touch only the fields under mu.
type transaction struct {
	s    txnClient
	cfg  *config
	ctx  context.Context // outlives Run's: a shutdown must not cancel records still to commit
	gate openGate

	counts txnCounts
	// While the previous transaction ends (closed), finished records are
	// admitted into the next one: their records wait in next, and their
	// counts in counts while ending holds the ending transaction's.
	closed bool
	next   []heldRecord
	ending txnCounts

	mu         sync.Mutex
	produceErr error
	clNext     map[tp]int64 // next changelog offset after this transaction's writes
}

// txnCounts are what a transaction adds to Stats when it commits.
type txnCounts struct {
	outputs, deadLetters, dups int64
	deadLettersBy              [len(dlqReasons)]int64
}

func newTransaction(s txnClient, cfg *config, ctx context.Context, wake func()) (*transaction, context.CancelFunc) {
	t := &transaction{s: s, cfg: cfg, ctx: ctx, clNext: make(map[tp]int64)}
	gateCtx, stopGate := context.WithCancel(ctx)
	t.gate = openGate{
		send:  func(r *kgo.Record, promise func(*kgo.Record, error)) { s.Produce(ctx, r, promise) },
		flush: s.Flush,
		wake:  wake,
		ctx:   gateCtx,
	}
	return t, stopGate
}

// produce opens the transaction if needed and sends a finished record's
// outputs and dead-letter record.
func (t *transaction) produce(outputs []*kgo.Record, dlq *kgo.Record) error {
	if !t.closed {
		if err := t.s.Begin(); err != nil {
			return err
		}
	}
	for _, r := range outputs {
		if r.Topic == "" {
			r.Topic = t.cfg.output
		}
		t.send(r, t.promise)
	}
	t.counts.outputs += int64(len(outputs))
	if dlq != nil {
		t.send(dlq, t.promise)
		t.counts.deadLetters++
		t.counts.deadLettersBy[reasonIndex(headerValue(dlq, HeaderReason))]++
	}
	return nil
}

func (t *transaction) send(r *kgo.Record, promise func(*kgo.Record, error)) {
	if t.closed {
		t.next = append(t.next, heldRecord{r, promise})
		return
	}
	t.gate.produce(r, promise)
}

// close starts the end of the transaction: until open, records go to the
// next one, which the client cannot begin while this one ends.
func (t *transaction) close() {
	t.closed = true
	t.ending, t.counts = t.counts, txnCounts{}
}

// open begins the next transaction with what was admitted while the
// previous one ended.
func (t *transaction) open() error {
	if !t.closed {
		return nil
	}
	t.closed = false // the ending transaction is settled or discarded by now
	if len(t.next) == 0 {
		return nil
	}
	if err := t.s.Begin(); err != nil {
		return err
	}
	for i, h := range t.next {
		t.gate.produce(h.r, h.promise)
		t.next[i] = heldRecord{}
	}
	t.next = t.next[:0]
	return nil
}

// produceChangelog writes one changelog record in the transaction.
func (t *transaction) produceChangelog(topic string, partition int32, key, value []byte) {
	t.send(&kgo.Record{Topic: topic, Partition: partition, Key: key, Value: value}, t.changelogPromise)
}

func (t *transaction) promise(_ *kgo.Record, err error) {
	if err == nil {
		return
	}
	t.mu.Lock()
	if t.produceErr == nil {
		t.produceErr = err
	}
	t.mu.Unlock()
}

// changelogPromise records how far each changelog partition got, for the
// checkpoints written when the transaction commits.
func (t *transaction) changelogPromise(r *kgo.Record, err error) {
	if err != nil {
		t.promise(r, err)
		return
	}
	t.mu.Lock()
	k := tp{r.Topic, r.Partition}
	t.clNext[k] = max(t.clNext[k], r.Offset+1)
	t.mu.Unlock()
}

// takeProduceErr returns and clears the first failed produce's error.
func (t *transaction) takeProduceErr() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	err := t.produceErr
	t.produceErr = nil
	return err
}

// changelogNext returns the offset after the transaction's writes to a
// changelog partition.
func (t *transaction) changelogNext(k tp) (int64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	next, ok := t.clNext[k]
	return next, ok
}

// settle adds a committed transaction's counts to stats: the ending
// one's while closed, else the open one's, which then start from zero.
func (t *transaction) settle(stats *counters) {
	c := &t.counts
	if t.closed {
		c = &t.ending
	}
	stats.outputs.Add(c.outputs)
	stats.dlq.Add(c.deadLetters)
	for i, n := range c.deadLettersBy {
		stats.dlqBy[i].Add(n)
	}
	stats.dups.Add(c.dups)
	*c = txnCounts{}
	t.mu.Lock()
	clear(t.clNext)
	t.mu.Unlock()
}

// discard forgets an aborted transaction, and what was admitted into the
// next one meanwhile: an abort rewinds every partition, so all of it is
// redone.
func (t *transaction) discard() {
	t.counts, t.ending = txnCounts{}, txnCounts{}
	clear(t.next)
	t.next = t.next[:0]
	t.mu.Lock()
	clear(t.clNext)
	t.mu.Unlock()
}
