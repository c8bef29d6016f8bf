package processor

import (
	"context"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/internal/offsetmeta"
	"github.com/onceflow/onceflow/txn"
)

// commit ends the open transaction with the offsets of the lowest
// unfinished records and, in the metadata, the finished records above them.
// With overlap, the loop goes on admitting and dispatching while the
// transaction ends (see endTxn); the caller then opens the next one
// (transaction.open).
func (l *lifetime) commit(ctx context.Context, overlap bool) error {
	if !l.s.InTxn() {
		return nil
	}
	began := time.Now()
	l.p.metrics.observeCommitStart(began)
	// The transaction's end, committed or not, closes the gate for the
	// next one.
	defer l.txn.gate.reset()
	plans := make(map[tp]commitPlan, len(l.parts))
	for k, p := range l.parts {
		base, done := p.commitPoint()
		plans[k] = commitPlan{base, done, offsetmeta.Encode(base, done), p.doneSinceCommit}
	}
	for _, ks := range l.keyspaces {
		ks.planned(l.txn, l.parts, plans) // before the flush, which must cover them
	}
	sent := make(map[tp]bool, len(plans))
	spanCtx, span := l.startCommit(ctx)
	res := l.endTxn(spanCtx, offsetsFrom(plans, sent), overlap && l.canOverlap())
	endCommit(span, res.committed, sent, res.err)
	switch {
	case res.err != nil:
		return res.err
	case res.produceFailed:
		l.rewindAll()
		return nil
	case !res.committed:
		l.p.stats.aborts.Add(1)
		l.cfg.logger.Info("transaction aborted (group rebalanced or commit refused); redoing from the last commit")
		l.rewindAll()
		return nil
	}
	if h := l.p.hooks.afterEndTxn; h != nil {
		if err := h(pendingStateWrites(l.parts)); err != nil {
			return err
		}
	}
	for _, ks := range l.keyspaces {
		if err := ks.apply(l.txn, l.parts); err != nil {
			return err
		}
	}
	for k := range sent {
		p := l.parts[k]
		pl := plans[k]
		l.cfg.logger.Debug("committed partition", "topic", k.topic, "partition", k.partition, "offset", pl.base, "done", pl.done)
		p.committed, p.committedDone = pl.base, pl.done
		p.doneSinceCommit -= pl.doneBefore // what finished while it ended belongs to the next
	}
	took := time.Since(began)
	l.p.stats.commits.Record(took)
	l.txn.settle(&l.p.stats)
	l.cfg.logger.Debug("committed", "took", took)
	return nil
}

// offsetsFrom returns the rewrite of the transaction's offset commit, which
// records in sent the partitions it commits. The request starts from the
// client's polled heads, which a rewind moves back to the last commit even
// where we are further on: every partition we track is committed from our
// own plan, added if the client left it out, dropped if we no longer own it.
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

// commitPlan is what a transaction commits for one input partition.
type commitPlan struct {
	base       int64 // the lowest unfinished offset (-1: nothing fetched since a rewind)
	done       []offsetmeta.Range
	meta       string
	doneBefore int // the partition's doneSinceCommit when planned
}

// canOverlap reports whether the loop may go on while a transaction ends.
// Keyspaces' changelog writes are applied to the local stores per
// transaction, so with any keyspace the loop waits.
func (l *lifetime) canOverlap() bool {
	return len(l.keyspaces) == 0 && l.p.hooks.afterEndTxn == nil
}

// endResult is how a transaction's end went: committed, aborted by the
// group (neither flag), or aborted because a produce failed.
type endResult struct {
	committed, produceFailed bool
	err                      error
}

// endTxn ends the transaction. With overlap the loop goes on meanwhile
// without touching the client, which allows no poll or produce until the
// transaction has ended: finished records are admitted into the next
// transaction (their records held until it opens), held completions taken,
// and freed window room refilled from records already fetched, so that
// handlers keep working through the flush and the commit's round trips.
func (l *lifetime) endTxn(ctx context.Context, rewrite func(*kmsg.TxnOffsetCommitRequest) error, overlap bool) endResult {
	if !overlap {
		return l.end(ctx, rewrite)
	}
	done := make(chan endResult, 1)
	l.txn.close()
	go func() { done <- l.end(ctx, rewrite) }()
	var loopErr error
	for {
		select {
		case r := <-done:
			if loopErr != nil {
				return endResult{err: loopErr}
			}
			return r
		case <-l.r.comps.wake:
		}
		if loopErr != nil {
			continue // wait for the end before the lifetime stops
		}
		l.now = l.cfg.clock.Now()
		if loopErr = l.drain(ctx); loopErr == nil {
			loopErr = l.checkStuck(ctx)
		}
	}
}

// end sends what the gate holds, flushes and commits. It touches only the
// client, the gate and the transaction's produce error, so it may run
// beside the loop (see endTxn). The flush comes first: a record that failed
// must be seen before the offsets of its input are committed, or the input
// would be lost. A zombie's flush can time out too: it must stop, not
// rebuild and take its instance ID back (finding 6), which FlushFailed
// decides.
func (l *lifetime) end(ctx context.Context, rewrite func(*kmsg.TxnOffsetCommitRequest) error) endResult {
	fctx, cancel := context.WithTimeout(l.produceCtx, l.cfg.txnTimeout)
	defer cancel()
	if err := l.txn.gate.releaseForCommit(fctx); err != nil {
		return endResult{err: l.s.FlushFailed(ctx, err)}
	}
	if err := l.s.Flush(fctx); err != nil {
		return endResult{err: l.s.FlushFailed(ctx, err)}
	}
	if perr := l.txn.takeProduceErr(); perr != nil {
		l.cfg.logger.Warn("a produce failed; aborting the transaction", "err", perr)
		if err := l.s.Abort(ctx); err != nil {
			return endResult{err: err}
		}
		if e := l.s.CheckFenced(ctx, "produce", perr); e.Class != txn.ClassAbortable {
			return endResult{err: e}
		}
		return endResult{produceFailed: true}
	}
	start := time.Now()
	// Bounded: after this member was expelled (a stall past the session
	// timeout), End waits for a heartbeat that the blocked group loop never
	// serves. A timeout is an unknown outcome: rebuild and re-read.
	cctx, cancel := context.WithTimeout(ctx, l.cfg.txnTimeout)
	defer cancel()
	committed, err := l.s.Commit(cctx, rewrite)
	l.p.metrics.observeCommit(time.Since(start))
	return endResult{committed: committed, err: err}
}

// rewindAll drops everything after the last commit: the transaction was
// aborted and the consumer rewound, so every partition starts again from
// its committed state.
func (l *lifetime) rewindAll() {
	var redo int64
	for k, p := range l.parts {
		l.cfg.logger.Debug("rewind", "partition", k.partition, "to", p.committed, "done", p.committedDone, "next_was", p.next)
		redo += int64(p.doneSinceCommit + len(p.held))
		np := l.rewound(p)
		p.gen.Store(0)
		l.parts[k] = np
	}
	l.txn.discard()
	l.p.stats.reprocessed.Add(redo)
}

// staleAll makes every dispatched item of this lifetime stale.
func (l *lifetime) staleAll() {
	for _, p := range l.parts {
		p.gen.Store(0)
	}
}
