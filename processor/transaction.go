package processor

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/internal/txncore"
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

// openGate holds a transaction's records until they may go out: until the
// transaction before it has flushed (after), and then until the
// transaction's first record, sent alone, is acknowledged.
//
// After: with transactions pipelined (WithTransactionPipeline), the next
// transaction fills on another producer while the one before it ends. Its
// records must reach each partition after the ending transaction's, or a
// session's later output could precede its earlier one there; so they wait
// for the ending transaction's flush, which is short beside its offset
// commit and EndTxn. With one producer, after is the ending transaction's
// whole end: the producer takes one transaction at a time.
//
// The first record alone: under transaction.version=2 a partition joins
// the transaction with its first produce, and the broker answers
// CONCURRENT_TRANSACTIONS while the coordinator still writes the
// producer's previous transaction's markers: on a replicated cluster that
// takes tens of milliseconds. franz-go keeps up to five requests in flight
// per broker, so a partition's later batches reached the broker before
// its refused first one and were rejected with
// OUT_OF_ORDER_SEQUENCE_NUMBER, and the commit waited seconds for the
// retry (finding 9 in docs/reliability.md). Once the first record is in,
// the coordinator has begun the new transaction and adds further
// partitions without a conflict. Handlers keep running while records are
// held; the loop starts no commit before the acknowledgement (holding)
// and goes on polling through it; commit releases what is held before its
// flush.
type openGate struct {
	// send begins the transaction if it has not begun and produces r; an
	// error is the begin's.
	send  func(r *kgo.Record, promise func(*kgo.Record, error)) error
	flush func(context.Context) error // waits for every buffered record
	wake  func()                      // interrupts the loop's poll
	ctx   context.Context             // ends the flush goroutines with the lifetime
	wg    *sync.WaitGroup             // the flush goroutines, the lifetime's
	after <-chan struct{}             // closed when the records may go out; nil: at once

	state gateState
	since time.Time // when the first record went out
	held  []heldRecord
	acked chan struct{} // closed when the first record is acknowledged
}

type gateState uint8

const (
	gateIdle    gateState = iota // nothing produced in this transaction yet
	gateWaiting                  // records wait for after
	gateHolding                  // the first record is out, the rest wait
	gateOpen                     // the first record is acknowledged
)

type heldRecord struct {
	r       *kgo.Record
	promise func(*kgo.Record, error)
}

// afterDone reports whether after is closed.
func (g *openGate) afterDone() bool {
	if g.after == nil {
		return true
	}
	select {
	case <-g.after:
		return true
	default:
		return false
	}
}

// produce sends r, or holds it.
func (g *openGate) produce(r *kgo.Record, promise func(*kgo.Record, error)) error {
	switch g.state {
	case gateIdle:
		if g.afterDone() {
			return g.sendFirst(heldRecord{r, promise})
		}
		g.state = gateWaiting
		fallthrough
	case gateWaiting, gateHolding:
		g.held = append(g.held, heldRecord{r, promise})
		return nil
	}
	return g.send(r, promise)
}

// sendFirst sends the transaction's first record alone and waits for its
// acknowledgement on a goroutine.
func (g *openGate) sendFirst(h heldRecord) error {
	if err := g.send(h.r, h.promise); err != nil {
		return err
	}
	g.state, g.since = gateHolding, time.Now()
	acked := make(chan struct{})
	g.acked = acked
	g.wg.Go(func() {
		// Only the first record is buffered: the flush sends it without
		// lingering and ends when it is acknowledged (a failure reaches
		// its promise).
		_ = g.flush(g.ctx)
		close(acked)
		g.wake()
	})
	return nil
}

// ready reports whether held records can move on: the first may go out,
// or the rest may follow it.
func (g *openGate) ready() bool {
	switch g.state {
	case gateWaiting:
		return g.afterDone()
	case gateHolding:
		select {
		case <-g.acked:
			return true
		default:
		}
	}
	return false
}

// holding reports whether the transaction's first record has been out,
// unacknowledged, for less than limit at now. The loop starts no commit
// meanwhile: the commit would wait for the acknowledgement anyway
// (releaseForCommit), and until it starts the loop can still poll, so
// records fetched during the wait join this transaction instead of the
// next. The limit keeps a record that cannot be delivered from holding
// the commit, and its bounded flush, off for good.
func (g *openGate) holding(now time.Time, limit time.Duration) bool {
	return g.state == gateHolding && now.Sub(g.since) < limit
}

// releaseIfReady moves held records on as far as they may go now.
func (g *openGate) releaseIfReady() error {
	if g.state == gateWaiting && g.afterDone() {
		if err := g.takeFirst(); err != nil {
			return err
		}
	}
	if g.ready() {
		return g.release()
	}
	return nil
}

// takeFirst sends the first held record alone.
func (g *openGate) takeFirst() error {
	first := g.held[0]
	g.held[0] = heldRecord{}
	g.held = g.held[1:]
	return g.sendFirst(first)
}

// releaseForCommit waits for what the gate waits for, then sends what is
// held and opens the gate for the commit's own records. Sending the held
// records before the first is in would bring back the race the gate
// prevents.
func (g *openGate) releaseForCommit(ctx context.Context) error {
	if g.state == gateWaiting {
		select {
		case <-g.after:
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := g.takeFirst(); err != nil {
			return err
		}
	}
	if g.state == gateHolding {
		select {
		case <-g.acked:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return g.release()
}

// release sends what is held, in order, and opens the gate for the rest
// of the transaction.
func (g *openGate) release() error {
	g.state = gateOpen
	for i, h := range g.held {
		g.held[i] = heldRecord{}
		if err := g.send(h.r, h.promise); err != nil {
			g.held = g.held[i+1:]
			return err
		}
	}
	g.held = g.held[:0]
	return nil
}

// txnClient is what the loop needs of its transactional session: a
// txncore.Session in production (sessionClient), a fake in the loop's
// broker-free tests (fakeclient_internal_test.go).
type txnClient interface {
	// Poll fetches up to maxRecords; rebalances wait for AllowRebalance.
	Poll(ctx context.Context, maxRecords int) kgo.Fetches
	AllowRebalance()
	PauseFetchPartitions(map[string][]int32)
	ResumeFetchPartitions(map[string][]int32)
	// Rewind moves consumption back to the last committed offsets;
	// RewindPartitions only some partitions' (nil: all).
	Rewind()
	RewindPartitions(map[string][]int32)

	// Pipeline is how many transactions may be open at once.
	Pipeline() int
	// Begin opens a transaction on the ring's next producer.
	Begin() (txnHandle, error)

	// CheckFenced classifies errors seen outside a commit.
	CheckFenced(ctx context.Context, op string, err error) *txncore.Error
}

// txnHandle is one open transaction (a txncore.Txn).
type txnHandle interface {
	Produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error))
	// Flush waits until every produced record is acknowledged or failed.
	Flush(ctx context.Context) error
	// Commit commits the offsets rewrite puts into the request and ends
	// the transaction; false: aborted, rewind and go on.
	Commit(ctx context.Context, rewrite func(*kmsg.TxnOffsetCommitRequest) error) (bool, error)
	Abort(ctx context.Context) error
	// FlushFailed classifies a failed Flush.
	FlushFailed(ctx context.Context, err error) *txncore.Error
}

// sessionClient is a txncore.Session as the loop's client.
type sessionClient struct{ *txncore.Session }

func (c sessionClient) Begin() (txnHandle, error) {
	t, err := c.Session.Begin()
	if err != nil {
		return nil, err
	}
	return t, nil
}

func (c sessionClient) PauseFetchPartitions(m map[string][]int32) { c.Client().PauseFetchPartitions(m) }

func (c sessionClient) ResumeFetchPartitions(m map[string][]int32) {
	c.Client().ResumeFetchPartitions(m)
}

// recordBytes is what a record adds to its transaction's size.
func recordBytes(r *kgo.Record) int64 {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return int64(n)
}
