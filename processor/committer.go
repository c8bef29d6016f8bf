package processor

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/trace"

	"github.com/onceflow/onceflow/internal/txncore"
)

// committer owns a lifetime's transactions in commit order: the open one
// that the loop fills, and the one before it whose end (flush, offset
// commit, EndTxn) runs on a goroutine of its own meanwhile. It keeps the
// invariants of pipelined transactions (WithTransactionPipeline):
//
//   - one end at a time, in order: a transaction's offset commit and
//     EndTxn are sent only after the one before it returned committed
//     (start is called with no end running), so the group never keeps an
//     older offset commit over a newer one;
//   - aborts cascade: when an end aborts or fails, the open transaction,
//     whose work may depend on it, is aborted too and the lifetime rewinds
//     to the last commit (the loop's abortAll);
//   - per-session order in the output partitions: the open transaction's
//     records go out only after the ending one's are acknowledged (its
//     gate waits for the ending transaction's flush).
//
// With one producer the open transaction's records wait for the whole end
// instead, and it begins only then: the producer runs one transaction at a
// time.
type committer struct {
	s    txnClient
	cfg  *config
	m    *metrics        // nil: off
	ctx  context.Context // outlives Run's: records still to commit are not canceled by a shutdown
	wake func()          // interrupts the loop's poll

	gateCtx  context.Context // ends the gates' flush goroutines
	stopGate context.CancelFunc
	gates    sync.WaitGroup

	open   *transaction
	ending *ending // nil while no end runs
	// budget bounds the bytes each transaction takes in (its limit is
	// set when it opens); takeCommit adapts it to each end's time.
	budget txnBudget
}

// ending is a transaction whose end runs.
type ending struct {
	t     *transaction
	plans map[tp]commitPlan
	sent  map[tp]bool // the partitions its offset commit names
	began time.Time
	span  trace.Span
	done  chan endResult // its end's result, once
}

// endResult is how a transaction's end went: committed, aborted by the
// group (neither flag), or aborted because a produce failed.
type endResult struct {
	committed, produceFailed bool
	err                      error
}

func newCommitter(s txnClient, cfg *config, m *metrics, budget txnBudget, ctx context.Context, wake func()) *committer {
	c := &committer{s: s, cfg: cfg, m: m, budget: budget, ctx: ctx, wake: wake}
	c.gateCtx, c.stopGate = context.WithCancel(ctx)
	c.open = c.newTransaction(nil)
	return c
}

// newTransaction builds a transaction whose records wait for after (nil:
// none).
func (c *committer) newTransaction(after <-chan struct{}) *transaction {
	t := &transaction{s: c.s, cfg: c.cfg, ctx: c.ctx, limit: c.budget.limit, clNext: make(map[tp]int64),
		flushed: make(chan struct{}), ended: make(chan struct{})}
	t.gate = openGate{send: t.send, flush: t.flush, wake: c.wake, ctx: c.gateCtx, wg: &c.gates, after: after}
	return t
}

// start starts e's end, e.t being the open transaction, with rewrite as
// its offset commit, and opens the next transaction. No end may be
// running.
func (c *committer) start(ctx context.Context, e *ending, rewrite func(*kmsg.TxnOffsetCommitRequest) error) {
	t := c.open
	after := t.flushed
	if c.s.Pipeline() < 2 {
		after = t.ended
	}
	c.open = c.newTransaction(after)
	e.t, e.done = t, make(chan endResult, 1)
	c.ending = e
	go func() {
		e.done <- c.end(ctx, t, rewrite)
		c.wake()
	}()
}

// result takes the running end's result once it is over, waiting for it
// if wait; nil if no end runs, or, without wait, it is not over.
func (c *committer) result(wait bool) (*ending, endResult) {
	e := c.ending
	if e == nil {
		return nil, endResult{}
	}
	var r endResult
	if wait {
		r = <-e.done
	} else {
		select {
		case r = <-e.done:
		default:
			return nil, endResult{}
		}
	}
	c.ending = nil
	return e, r
}

// done reports whether the running end is over (its result waits).
func (c *committer) done() bool {
	return c.ending != nil && len(c.ending.done) > 0
}

// end sends what t's gate holds, flushes and commits. It touches only t
// and the client, so it runs beside the loop. The flush comes first: a
// record that failed must be seen before the offsets of its input are
// committed, or the input would be lost. A zombie's flush can time out
// too: it must stop, not rebuild and take its instance ID back (finding
// 6), which FlushFailed decides.
func (c *committer) end(ctx context.Context, t *transaction, rewrite func(*kmsg.TxnOffsetCommitRequest) error) endResult {
	defer close(t.ended)
	flushed := false
	defer func() {
		if !flushed {
			close(t.flushed)
		}
	}()
	fctx, cancel := context.WithTimeout(c.ctx, c.cfg.txnTimeout)
	defer cancel()
	if err := t.gate.releaseForCommit(fctx); err != nil {
		return endResult{err: t.flushFailed(ctx, err)}
	}
	if err := t.begin(); err != nil { // it holds no record: offsets only
		return endResult{err: err}
	}
	began := time.Now()
	if err := t.h.Flush(fctx); err != nil {
		return endResult{err: t.h.FlushFailed(ctx, err)}
	}
	c.m.observeStage("flush", time.Since(began))
	close(t.flushed)
	flushed = true
	c.wake() // the next transaction's records may go out
	if perr, to := t.takeProduceErr(); perr != nil {
		c.cfg.logger.Warn("a produce failed; aborting the transaction", "topic", to.topic, "partition", to.partition, "err", perr)
		if err := t.h.Abort(ctx); err != nil {
			return endResult{err: err}
		}
		if topicGone(perr) {
			// A topic that is gone fails every transaction that writes
			// to it: stop with an error that names it, not abort and
			// redo for good.
			if err := checkTopicsGone(ctx, c.cfg, to.topic); err != nil {
				return endResult{err: err}
			}
		}
		if e := c.s.CheckFenced(ctx, "produce", perr); e.Class != txncore.ClassAbortable {
			return endResult{err: e}
		}
		return endResult{produceFailed: true}
	}
	// Bounded: an offset commit or EndTxn that cannot get through (the
	// coordinator unreachable) is an unknown outcome: rebuild and re-read.
	cctx, cancel := context.WithTimeout(ctx, c.cfg.txnTimeout)
	defer cancel()
	began = time.Now()
	committed, err := t.h.Commit(cctx, rewrite)
	c.m.observeStage("commit", time.Since(began))
	c.m.observeCommit(time.Since(began))
	return endResult{committed: committed, err: err}
}

// flushFailed classifies an error of t's release or flush: a begin's
// error is classified already; a flush that failed or timed out is
// judged by the transaction (txncore.Txn.FlushFailed).
func (t *transaction) flushFailed(ctx context.Context, err error) error {
	if t.h == nil || txncore.ClassOf(err) != 0 {
		return err
	}
	return t.h.FlushFailed(ctx, err)
}

// abortOpen aborts the open transaction, if it began, and starts a new
// one: an abort of the one before it cascades (its work may depend on
// what was aborted).
func (c *committer) abortOpen(ctx context.Context) error {
	t := c.open
	c.open = c.newTransaction(nil)
	if t.h == nil {
		return nil
	}
	return t.h.Abort(ctx)
}

// close waits for a running end (its own timeouts bound it) and ends the
// gates' goroutines; the lifetime closes its client after.
func (c *committer) close() {
	if e := c.ending; e != nil {
		<-e.done
		c.ending = nil
	}
	c.stopGate()
	c.gates.Wait()
}

// inFlight counts the transactions begun and not ended: the open one, once
// it holds work, and one ending.
func (c *committer) inFlight() int {
	n := 0
	if c.open.used {
		n++
	}
	if c.ending != nil {
		n++
	}
	return n
}

// inTxn reports whether a transaction holds work: the open one, or one
// ending.
func (c *committer) inTxn() bool { return c.open.used || c.ending != nil }

// awaitingFirstRecord reports whether the open transaction's first record
// holds the commit off at now: it is out alone and unacknowledged, for a
// quarter of the transaction timeout at most (openGate.holding).
func (c *committer) awaitingFirstRecord(now time.Time) bool {
	return c.open.gate.holding(now, c.cfg.txnTimeout/4)
}

// offsetsFrom returns the rewrite of the transaction's offset commit, which
// records in sent the partitions it commits. The request starts from the
// client's polled heads, which a rewind moves back to the last commit even
// where we are further on: every partition with a plan (one that moved
// since its last commit) is committed from it, added if the client left it
// out; the others are dropped (not ours any more, or nothing to commit).
func offsetsFrom(plans map[tp]commitPlan, sent map[tp]bool) func(*kmsg.TxnOffsetCommitRequest) error {
	return func(req *kmsg.TxnOffsetCommitRequest) error {
		topics := req.Topics[:0]
		for _, t := range req.Topics {
			parts := t.Partitions[:0]
			for _, rp := range t.Partitions {
				k := tp{t.Topic, rp.Partition}
				pl, ok := plans[k]
				if !ok || pl.base < 0 {
					continue // not ours any more, or nothing fetched since a rewind
				}
				rp.Offset, rp.Metadata = pl.base, &pl.meta
				parts = append(parts, rp)
				sent[k] = true
			}
			if len(parts) > 0 {
				t.Partitions = parts
				topics = append(topics, t)
			}
		}
		req.Topics = topics
		for k, pl := range plans {
			if sent[k] || pl.base < 0 {
				continue
			}
			i := slices.IndexFunc(req.Topics, func(t kmsg.TxnOffsetCommitRequestTopic) bool { return t.Topic == k.topic })
			if i < 0 {
				t := kmsg.NewTxnOffsetCommitRequestTopic()
				t.Topic = k.topic
				req.Topics = append(req.Topics, t)
				i = len(req.Topics) - 1
			}
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.Metadata = k.partition, pl.base, &pl.meta
			rp.LeaderEpoch = -1
			req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
			sent[k] = true
		}
		return nil
	}
}

// commitSchedule decides when the open transaction commits.
//
// A transaction commits once it holds finished work and its floor has
// passed since the previous commit ended, and at the latest a commit
// interval after that end. The floor adapts to the load: it halves, down
// to the minimum, after a commit the loop could keep up with, and becomes
// the interval after one during which work was waiting for room (the
// buffer full, or a partition paused). So light load commits almost as
// soon as results exist and the commit round trip is the latency, while a
// backlog commits on the interval, as a fixed interval does, and amortises
// each commit's fixed cost over as many records. Doubling up to the
// interval instead spent seven small commits on each backlog's start: on
// a 3-node cluster, where a commit's markers cost the brokers about as
// much as the records, a 500,000-record run made 38 commits instead of 28
// and ran at 0.63-0.72x franz-go's loop instead of 0.95-1.01x.
type commitSchedule struct {
	minFloor, interval time.Duration

	floor   time.Duration
	lastEnd time.Time // when the previous commit ended
}

func newCommitSchedule(minFloor, interval time.Duration, now time.Time) commitSchedule {
	return commitSchedule{minFloor: minFloor, interval: interval, floor: minFloor, lastEnd: now}
}

// next is when the loop must look again: the floor's end while work waits
// in the transaction, else the interval's.
func (c *commitSchedule) next(inTxn bool) time.Time {
	if inTxn {
		return c.lastEnd.Add(c.floor)
	}
	return c.lastEnd.Add(c.interval)
}

// due reports whether a commit should start now.
func (c *commitSchedule) due(now time.Time, inTxn bool) bool {
	return !now.Before(c.next(inTxn))
}

// ended records a commit's end; saturated says whether work waited for
// room during the transaction it ended.
func (c *commitSchedule) ended(now time.Time, saturated bool) {
	c.lastEnd = now
	if saturated {
		c.floor = c.interval
	} else {
		c.floor = max(c.minFloor, c.floor/2)
	}
}

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
