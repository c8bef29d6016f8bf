package processor

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// transaction is one Kafka transaction as the loop fills it: the records
// produced into it (through its open gate), how far each changelog
// partition got, the first produce error, and the counts that Stats takes
// when it commits. It begins on the session's next producer when its
// first record goes out (or at its commit, if it holds none). The loop
// owns it until its end starts (committer.start); promises, which run on
// the client's goroutines, touch only the fields under mu.
type transaction struct {
	s    txnClient
	cfg  *config
	ctx  context.Context // outlives Run's: a shutdown must not cancel records still to commit
	h    txnHandle       // nil until it begins
	gate openGate

	// used: something finished into it (records or not): it commits.
	used   bool
	counts txnCounts
	// bytes it produced (records' keys, values and headers), up to
	// limit (its budget, txnBudget; 0: none).
	bytes, limit int64
	// from are the partitions whose work it holds (their states, which
	// a rewind or a revoke replaces): it commits only with their offsets
	// (stale).
	from     map[*partition]struct{}
	lastFrom *partition
	// flushed is closed once its end has flushed its records, or its end
	// is over: the next transaction's records may follow (see openGate).
	flushed chan struct{}
	// ended is closed when its end is over.
	ended chan struct{}

	mu         sync.Mutex
	produceErr error
	failedTo   tp           // the partition of the first record that failed
	clNext     map[tp]int64 // next changelog offset after this transaction's writes
}

// txnCounts are what a transaction adds to Stats when it commits.
type txnCounts struct {
	outputs, deadLetters, dups int64
	deadLettersBy              [len(dlqReasons)]int64
}

// full reports whether the transaction is at its budget: it takes no more
// work.
func (t *transaction) full() bool { return t.limit > 0 && t.bytes >= t.limit }

// began returns when its first record went out: the coordinator's
// transaction timeout runs from there; false while none has.
func (t *transaction) began() (time.Time, bool) {
	return t.gate.since, t.gate.state >= gateHolding
}

// age is how long ago its first record went out at now (0: none has).
func (t *transaction) age(now time.Time) time.Duration {
	if since, ok := t.began(); ok {
		return now.Sub(since)
	}
	return 0
}

// holds records that p's work is in the transaction.
func (t *transaction) holds(p *partition) {
	if p == t.lastFrom {
		return
	}
	if t.from == nil {
		t.from = make(map[*partition]struct{})
	}
	t.from[p] = struct{}{}
	t.lastFrom = p
}

// stale reports whether the transaction holds work of a partition state
// that parts no longer has: its partition was revoked or lost (and maybe
// assigned again, as a new state) since. Its outputs would commit without
// their offsets, and the partition's owner would redo them: it must abort.
func (t *transaction) stale(parts map[tp]*partition) bool {
	for p := range t.from {
		if parts[tp{p.topic, p.id}] != p {
			return true
		}
	}
	return false
}

// begin begins the transaction on the session's next producer, once.
func (t *transaction) begin() error {
	if t.h != nil {
		return nil
	}
	h, err := t.s.Begin()
	if err != nil {
		return err
	}
	t.h = h
	return nil
}

// send is the gate's: it begins the transaction at its first record.
func (t *transaction) send(r *kgo.Record, promise func(*kgo.Record, error)) error {
	if err := t.begin(); err != nil {
		return err
	}
	t.h.Produce(t.ctx, r, promise)
	return nil
}

// flush is the gate's: it waits for the records sent so far.
func (t *transaction) flush(ctx context.Context) error { return t.h.Flush(ctx) }

// produce sends a finished record's outputs and dead-letter record.
func (t *transaction) produce(outputs []*kgo.Record, dlq *kgo.Record) error {
	t.used = true
	for _, r := range outputs {
		if r.Topic == "" {
			r.Topic = t.cfg.output
		}
		t.bytes += recordBytes(r)
		if err := t.gate.produce(r, t.promise); err != nil {
			return err
		}
	}
	t.counts.outputs += int64(len(outputs))
	if dlq != nil {
		t.bytes += recordBytes(dlq)
		if err := t.gate.produce(dlq, t.promise); err != nil {
			return err
		}
		t.counts.deadLetters++
		t.counts.deadLettersBy[reasonIndex(headerValue(dlq, HeaderReason))]++
	}
	return nil
}

// produceChangelog writes one changelog record in the transaction. A
// begin that fails here (it is the transaction's first record) fails the
// transaction as a failed produce would: it aborts at its commit.
func (t *transaction) produceChangelog(topic string, partition int32, key, value []byte) {
	t.used = true
	t.bytes += int64(len(key) + len(value))
	if err := t.gate.produce(&kgo.Record{Topic: topic, Partition: partition, Key: key, Value: value}, t.changelogPromise); err != nil {
		t.promise(nil, err)
	}
}

func (t *transaction) promise(r *kgo.Record, err error) {
	if err == nil {
		return
	}
	t.mu.Lock()
	if t.produceErr == nil {
		t.produceErr = err
		if r != nil {
			t.failedTo = tp{r.Topic, r.Partition}
		}
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

// takeProduceErr returns and clears the first failed produce's error, with
// the partition its record went to.
func (t *transaction) takeProduceErr() (error, tp) {
	t.mu.Lock()
	defer t.mu.Unlock()
	err := t.produceErr
	t.produceErr = nil
	return err, t.failedTo
}

// changelogNext returns the offset after the transaction's writes to a
// changelog partition.
func (t *transaction) changelogNext(k tp) (int64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	next, ok := t.clNext[k]
	return next, ok
}

// settle adds a committed transaction's counts to stats.
func (t *transaction) settle(stats *counters) {
	c := &t.counts
	stats.outputs.Add(c.outputs)
	stats.dlq.Add(c.deadLetters)
	for i, n := range c.deadLettersBy {
		stats.dlqBy[i].Add(n)
	}
	stats.dups.Add(c.dups)
}
