package processor

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/internal/offsetmeta"
)

// startCommit starts the end of the open transaction, with the offsets of
// the lowest unfinished records and, in the metadata, the finished records
// above them, and opens the next one. The loop goes on while it ends
// (takeCommit collects the result), unless it must wait (commit). A
// transaction that holds work of a partition revoked or lost since is
// aborted instead.
func (l *lifetime) startCommit(ctx context.Context) error {
	if l.txn.stale(l.parts) {
		return l.abortAll(ctx, abortRevoked) // it holds work of partitions revoked or lost since
	}
	began := time.Now()
	l.p.metrics.observeCommitStart(began)
	plans := make(map[tp]commitPlan, len(l.parts))
	for k, p := range l.parts {
		base, done := p.commitPoint()
		plans[k] = commitPlan{base, done, offsetmeta.Encode(base, done), p.doneSinceCommit}
	}
	for _, ks := range l.keyspaces {
		ks.planned(l.txn, l.parts, plans) // before the flush, which must cover them
	}
	e := &ending{plans: plans, sent: make(map[tp]bool, len(plans)), began: began}
	var spanCtx context.Context
	spanCtx, e.span = l.startCommitSpan(ctx)
	l.c.start(spanCtx, e, offsetsFrom(plans, e.sent))
	l.txn = l.c.open
	l.p.metrics.setInFlight(l.c)
	return nil
}

// commit commits the open transaction and waits for the end: at a
// rebalance, at shutdown, and when transactions must not overlap
// (canOverlap). An end already running is collected first.
func (l *lifetime) commit(ctx context.Context) error {
	if err := l.takeCommit(ctx, true); err != nil {
		return err
	}
	if !l.txn.used {
		l.ended()
		return nil
	}
	if err := l.startCommit(ctx); err != nil {
		return err
	}
	return l.takeCommit(ctx, true)
}

// takeCommit collects a finished end (waiting for it if wait): a commit
// is applied, an abort rewinds.
func (l *lifetime) takeCommit(ctx context.Context, wait bool) error {
	e, res := l.c.result(wait)
	if e == nil {
		return nil
	}
	l.p.metrics.setInFlight(l.c)
	endCommit(e.span, res.committed, e.sent, res.err)
	switch {
	case res.err != nil:
		return res.err
	case res.produceFailed:
		return l.abortAll(ctx, abortProduce)
	case !res.committed:
		return l.abortAll(ctx, abortRefused)
	}
	if h := l.p.hooks.afterEndTxn; h != nil {
		if err := h(pendingStateWrites(l.parts)); err != nil {
			return err
		}
	}
	for _, ks := range l.keyspaces {
		if err := ks.apply(e.t, l.parts); err != nil {
			return err
		}
	}
	for k := range e.sent {
		p := l.parts[k]
		if p == nil {
			continue // revoked while it ended; nothing of it was admitted since
		}
		pl := e.plans[k]
		l.cfg.logger.Debug("committed partition", "topic", k.topic, "partition", k.partition, "offset", pl.base, "done", pl.done)
		p.committed, p.committedDone = pl.base, pl.done
		p.doneSinceCommit -= pl.doneBefore // what finished while it ended belongs to the next
	}
	took := time.Since(e.began)
	l.p.stats.commits.Record(took)
	e.t.settle(&l.p.stats)
	l.cfg.logger.Debug("committed", "took", took)
	l.ended()
	return nil
}

// ended is the step after a commit, an abort's rewind or a due commit
// with nothing to commit: the schedule starts over, a rebalance waiting
// for the commit may run, the gauges are published.
func (l *lifetime) ended() {
	l.sched.ended(time.Now(), l.saturated)
	l.p.metrics.setCommitFloor(l.sched.floor)
	l.saturated = false
	l.group.rebalanceWanted.Store(false)
	l.s.AllowRebalance()
	l.publish()
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

// canOverlap reports whether the loop may admit finished work into the
// next transaction while one ends. Keyspaces' changelog writes are applied
// to the local stores per transaction, in commit order, from what the
// partitions hold: with any keyspace the loop admits nothing until the
// end is over.
func (l *lifetime) canOverlap() bool {
	return len(l.keyspaces) == 0 && l.p.hooks.afterEndTxn == nil
}

// abortReasons label onceflow_transactions_aborted_total and key
// Stats.AbortsBy (see Stats.Aborts).
var abortReasons = [...]string{"refused", "produce", "revoked", "cascade"}

const (
	abortRefused = iota
	abortProduce
	abortRevoked
	abortCascade
)

// abortAll counts an aborted transaction with its reason, aborts the open
// transaction too (an abort cascades; reason abortRevoked is the open
// one's own), rewinds the consumer and drops everything after the last
// commit.
func (l *lifetime) abortAll(ctx context.Context, reason int) error {
	l.p.stats.abortsBy[reason].Add(1)
	if reason != abortRevoked && l.txn.used {
		l.p.stats.abortsBy[abortCascade].Add(1)
	}
	parts := make([]string, 0, len(l.parts))
	for k := range l.parts {
		parts = append(parts, k.topic+"/"+strconv.Itoa(int(k.partition)))
	}
	slices.Sort(parts)
	l.cfg.logger.Info("transaction aborted; redoing from the last commit", "reason", abortReasons[reason], "partitions", parts)
	if err := l.c.abortOpen(ctx); err != nil {
		return err
	}
	l.txn = l.c.open
	l.s.Rewind()
	l.rewindAll()
	l.ended()
	return nil
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
	l.p.stats.reprocessed.Add(redo)
}

// staleAll makes every dispatched item of this lifetime stale.
func (l *lifetime) staleAll() {
	for _, p := range l.parts {
		p.gen.Store(0)
	}
}
