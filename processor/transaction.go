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

	outputs, deadLetters, dups int64
	deadLettersBy              [len(dlqReasons)]int64

	mu         sync.Mutex
	produceErr error
	clNext     map[tp]int64 // next changelog offset after this transaction's writes
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
	if err := t.s.Begin(); err != nil {
		return err
	}
	for _, r := range outputs {
		if r.Topic == "" {
			r.Topic = t.cfg.output
		}
		t.gate.produce(r, t.promise)
	}
	t.outputs += int64(len(outputs))
	if dlq != nil {
		t.gate.produce(dlq, t.promise)
		t.deadLetters++
		t.deadLettersBy[reasonIndex(headerValue(dlq, HeaderReason))]++
	}
	return nil
}

// produceChangelog writes one changelog record in the transaction.
func (t *transaction) produceChangelog(topic string, partition int32, key, value []byte) {
	t.gate.produce(&kgo.Record{Topic: topic, Partition: partition, Key: key, Value: value}, t.changelogPromise)
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

// settle adds a committed transaction's counts to stats and starts the
// next transaction's from zero.
func (t *transaction) settle(stats *counters) {
	stats.outputs.Add(t.outputs)
	stats.dlq.Add(t.deadLetters)
	for i, n := range t.deadLettersBy {
		stats.dlqBy[i].Add(n)
	}
	stats.dups.Add(t.dups)
	t.discard()
}

// discard forgets an aborted (or settled) transaction's counts and
// changelog offsets.
func (t *transaction) discard() {
	t.outputs, t.deadLetters, t.deadLettersBy, t.dups = 0, 0, [len(dlqReasons)]int64{}, 0
	t.mu.Lock()
	clear(t.clNext)
	t.mu.Unlock()
}
