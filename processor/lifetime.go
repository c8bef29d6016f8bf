package processor

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/offsetmeta"
	"github.com/onceflow/onceflow/internal/txncore"
)

// lifetime is one transactional client's run: the loop's skeleton. Each
// step polls into the record path (partitions), applies the group's news,
// takes finished work into the open transaction and, when a commit is
// due, hands that transaction to the commit path (committer), collecting
// the end's outcome: a commit moves the partitions' commit points on, an
// abort rewinds them. The loop goroutine owns it; what other goroutines
// report arrives through group (the client's callbacks), the restores,
// the run's completion queue and ends.
type lifetime struct {
	cfg   *config
	obs   observers
	hooks *testHooks
	inst  *txncore.Instance // the process's hold on its instance ID
	comps *completionQueue  // finished records from the workers
	s     txnClient
	c     *committer   // the transactions: the open one and the one ending
	ps    *partitions  // the record path
	group *groupEvents // news from the group callbacks
	ends  *endOffsets  // the inputs' end offsets, for the lag gauge

	sched     commitSchedule
	saturated bool // work waited for room in the open transaction (see commitSchedule)
	// now is the clock's time after the last poll (or drain wait): one
	// reading per loop step serves every record of the step.
	now time.Time

	// endYield ends a lost member's yield (Instance.YieldOnLost) when the
	// lifetime ends: the client's Close waits for the callback, and the
	// rebuild gives what is left of its grace.
	endYield context.CancelFunc
	// produceCtx outlives Run's context: records of a transaction that
	// is still to commit must not be canceled by a shutdown.
	produceCtx context.Context
	// member is the client's group member ID and generation or epoch
	// (kgo.Client.GroupMetadata), for the health; nil in tests.
	member func() (string, int32)
}

// connect gives the lifetime its client. The returned func waits for an
// end still running and ends the gates' goroutines; call it before closing
// the client.
func (l *lifetime) connect(s txnClient) (closeCommitter func()) {
	l.s = s
	l.ps.s = s
	budget := newTxnBudget(l.cfg.txnTimeout)
	if b := l.hooks.fixedBudget; b > 0 {
		budget = txnBudget{limit: b, min: b, max: b, target: budget.target}
	}
	l.c = newCommitter(s, l.cfg, l.obs.m, budget, l.produceCtx, l.comps.notify)
	l.obs.m.setTxnBudget(budget.limit)
	return l.c.close
}

func (l *lifetime) run(ctx context.Context) error {
	l.sched = newCommitSchedule(l.cfg.commitFloor(), l.cfg.commitInterval, time.Now())
	l.obs.health.enter(phaseRunning, "")
	for {
		if ctx.Err() != nil {
			return l.shutdown()
		}
		if err := l.step(ctx); err != nil {
			return err
		}
		if err := l.commitIfDue(ctx); err != nil {
			return err
		}
	}
}

// step is one turn of the loop before its commit: poll, the group's news,
// the instance ID's recheck, a finished end, finished work into the open
// transaction, stuck records, the gate, backpressure.
func (l *lifetime) step(ctx context.Context) error {
	if err := l.poll(ctx); err != nil {
		return err
	}
	l.obs.health.turned.Store(l.now.UnixNano())
	if err := l.handleEvents(); err != nil {
		return err
	}
	if e := l.inst.Recheck(ctx, l.now, l.c.inTxn(), l.group.losses.Load()); e != nil {
		l.cfg.logger.Warn("a newer process with this instance ID is waiting for it; yielding", "err", e)
		return e
	}
	if err := l.takeCommit(ctx, false); err != nil {
		return err
	}
	if err := l.ps.drain(l.c.open, l.now); err != nil {
		return err
	}
	if l.c.open.full() {
		l.saturated = true
	}
	if err := l.ps.checkStuck(l.c.open, l.now); err != nil {
		return err
	}
	if err := l.c.open.gate.releaseIfReady(); err != nil {
		return err
	}
	if l.ps.backpressure() {
		l.saturated = true
	}
	return nil
}

// commitIfDue commits the open transaction if a commit is due or a
// rebalance waits for one, and no end runs.
func (l *lifetime) commitIfDue(ctx context.Context) error {
	wantRebalance := l.group.rebalanceWanted.Load()
	if l.c.ending != nil || !wantRebalance && !l.commitDue(time.Now()) {
		return nil
	}
	if !l.c.open.used {
		l.ended() // nothing to commit: look again an interval on
		return nil
	}
	if wantRebalance {
		// Finish what is in flight while our generation is still
		// current, so the next owner redoes little.
		if err := l.waitInFlight(ctx, ctx); err != nil {
			return err
		}
	}
	// Not canceled with ctx: a stop arriving mid-commit must not turn a
	// commit the broker may already have applied into an unknown outcome
	// (a rebuild, and Stats missing its outputs). Bounded instead: the
	// end's flush and commit take a transaction timeout each at most. The
	// loop sees ctx after it and shuts down.
	cctx := context.WithoutCancel(ctx)
	if wantRebalance || !l.canOverlap() {
		return l.commit(cctx)
	}
	return l.startCommit(cctx)
}

// commitDue reports whether the open transaction should commit now: its
// schedule says so, it is at its budget, or it has been open a quarter of
// the transaction timeout (it must end well before the coordinator aborts
// it); and its first record is acknowledged, or has been out for a quarter
// of the transaction timeout (see openGate.holding).
func (l *lifetime) commitDue(now time.Time) bool {
	t := l.c.open
	due := l.sched.due(now, t.used) || t.full() || t.age(now) >= l.cfg.txnTimeout/4
	return due && !l.c.awaitingFirstRecord(now)
}

// dueBy is when the open transaction's commit falls due (see commitDue):
// the poll waits no longer.
func (l *lifetime) dueBy() time.Time {
	t := l.c.open
	if t.full() {
		return time.Now() // due now, or when the running end wakes the poll
	}
	by := l.sched.next(t.used)
	if since, ok := t.began(); ok && since.Add(l.cfg.txnTimeout/4).Before(by) {
		by = since.Add(l.cfg.txnTimeout / 4)
	}
	return by
}

// poll fetches up to the free buffer room, waiting until the next commit
// at most. One poll takes at most four per-partition bounds per fetching
// partition, so that memory follows what the partitions can run rather
// than the total bound, and at most one partition's queue share: a poll
// may land in one partition before backpressure can pause it. With no room
// it takes nothing and only waits: franz-go keeps what it fetched, and
// fetches no more from those brokers, until the loop takes it.
func (l *lifetime) poll(ctx context.Context) error {
	n := l.ps.count()
	room := min(l.cfg.maxBuffer-l.ps.buffered(), 4*l.cfg.maxPartitionBuffer*max(1, l.ps.fetching(n)), l.ps.queueShare(n))
	deadline := l.dueBy()
	if now := time.Now(); l.c.ending != nil || l.c.awaitingFirstRecord(now) {
		// No commit before the running end is over, nor before the
		// first record's acknowledgement; both wake the poll: wait for
		// them, not for a due time passed (the loop spun through the
		// ends, a core's worth on a slow cluster).
		if d := now.Add(l.cfg.commitInterval); d.After(deadline) {
			deadline = d
		}
	}
	pctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	l.comps.pollWake.Store(&cancel)
	if l.comps.pending() && !l.c.open.full() || l.c.open.gate.ready() || l.c.done() {
		cancel() // woken before the wake was armed: do not wait (completions wait while the transaction is full)
	}
	var fs kgo.Fetches
	if room > 0 {
		fs = l.s.Poll(pctx, room)
	} else {
		<-pctx.Done()
	}
	if room <= 0 || fs.NumRecords() >= room {
		l.saturated = true // more may wait in the client's buffer
	}
	l.comps.pollWake.Store(nil)
	l.now = l.cfg.clock.Now()
	var fatal error
	fs.EachError(func(topic string, partition int32, err error) {
		switch {
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		case errors.Is(err, kgo.ErrClientClosed):
			fatal = &txncore.Error{Class: txncore.ClassReset, Op: "poll", Err: err}
		case errors.Is(err, kerr.FencedInstanceID):
			fatal = l.s.CheckFenced(ctx, "poll", err)
		case errors.Is(err, kerr.UnreleasedInstanceID):
			if e := l.inst.Replaced(ctx, l.now, "poll", err); e != nil {
				fatal = e
				return
			}
			l.cfg.logger.Warn("waiting for the group to release this instance ID (a stopped predecessor's session must expire first)", "err", err)
		case topicGone(err):
			// The topic watch finds it too, later.
			if e := checkTopicsGone(ctx, l.cfg, topic); e != nil {
				fatal = e
				return
			}
			l.cfg.logger.Warn("fetch error", "topic", topic, "partition", partition, "err", err)
		default:
			l.cfg.logger.Warn("fetch error", "topic", topic, "partition", partition, "err", err)
		}
	})
	if fatal != nil {
		return fatal
	}
	return l.ps.intake(fs, l.now)
}

// handleEvents applies what the group callbacks reported.
func (l *lifetime) handleEvents() error {
	fatal, revoked, rebalanced := l.group.take()
	if fatal != nil {
		return fatal
	}
	if err := l.ps.takeRestored(); err != nil {
		return err
	}
	l.ps.revoke(revoked)
	if rebalanced {
		l.obs.stats.rebalances.Add(1)
		l.cfg.logger.Debug("rebalanced", "in_txn", l.c.inTxn())
		l.ps.rewindUntracked()
	}
	return nil
}

// shutdown finishes in-flight records (bounded), commits and returns.
func (l *lifetime) shutdown() error {
	l.obs.health.enter(phaseStopping, "")
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.txnTimeout)
	defer cancel()
	err := l.takeCommit(ctx, true)
	for more := true; more && err == nil; {
		if err = l.waitInFlight(ctx, ctx); err != nil {
			break
		}
		// A transaction at its budget leaves finished work for the next.
		more = l.c.open.full() && ctx.Err() == nil
		err = l.commit(ctx)
	}
	l.publish()
	if err != nil {
		l.cfg.logger.Warn("final commit failed; the next start resumes from what is committed", "err", err)
		if errors.Is(err, ErrFenced) {
			return err
		}
	}
	return nil
}

// waitInFlight waits, at most the drain timeout, for dispatched records to
// finish, putting them into the transaction as they do, until it is at
// its budget.
func (l *lifetime) waitInFlight(ctx, drainCtx context.Context) error {
	deadline := time.NewTimer(l.cfg.drainTimeout)
	defer deadline.Stop()
	for l.ps.unfinished() > 0 && !l.c.open.full() { // a full transaction takes no more
		select {
		case <-l.comps.wake:
		case <-deadline.C:
			l.cfg.logger.Info("drain timeout: unfinished records are left to be redone", "unfinished", l.ps.unfinished())
			return nil
		case <-drainCtx.Done():
			return nil
		}
		l.now = l.cfg.clock.Now()
		if err := l.ps.drain(l.c.open, l.now); err != nil {
			return err
		}
	}
	return nil
}

// startCommit starts the end of the open transaction, with the offsets of
// the lowest unfinished records and, in the metadata, the finished records
// above them, and opens the next one. The loop goes on while it ends
// (takeCommit collects the result), unless it must wait (commit). A
// transaction that holds work of a partition revoked or lost since is
// aborted instead, revokes that arrive until its end starts included
// (groupEvents.startEnd).
func (l *lifetime) startCommit(ctx context.Context) error {
	for {
		if l.c.open.stale(l.ps.all) {
			return l.abortAll(ctx, abortRevoked) // it holds work of partitions revoked or lost since
		}
		if l.group.startEnd(l.c.open.ended) {
			break
		}
		// A revoke came after this step took the group's news: take it,
		// and judge the transaction against it.
		if err := l.handleEvents(); err != nil {
			return err
		}
	}
	began := time.Now()
	l.obs.m.observeCommitStart(began)
	plans := make(map[tp]commitPlan)
	for k, p := range l.ps.all {
		base, done := p.commitPoint()
		if base < 0 || base == p.committed && slices.Equal(done, p.committedDone) {
			// Nothing fetched since a rewind, or nothing moved since the
			// last commit, which the group holds: a partition idle since
			// is not committed again (at 300 partitions every commit
			// named all of them).
			continue
		}
		plans[k] = commitPlan{base, done, offsetmeta.Encode(base, done), p.doneSinceCommit}
	}
	for _, ks := range l.ps.keyspaces {
		ks.planned(l.c.open, l.ps.all, plans) // before the flush, which must cover them
	}
	e := &ending{plans: plans, sent: make(map[tp]bool, len(plans)), began: began}
	var spanCtx context.Context
	spanCtx, e.span = startCommitSpan(ctx, l.obs.tracer, l.c.open.counts, len(l.ps.all))
	l.c.start(spanCtx, e, offsetsFrom(plans, e.sent))
	l.obs.m.setInFlight(l.c.inFlight())
	return nil
}

// commit commits the open transaction and waits for the end: at a
// rebalance, at shutdown, and when transactions must not overlap
// (canOverlap). An end already running is collected first.
func (l *lifetime) commit(ctx context.Context) error {
	if err := l.takeCommit(ctx, true); err != nil {
		return err
	}
	if !l.c.open.used {
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
	l.obs.m.setInFlight(l.c.inFlight())
	endCommit(e.span, res.committed, e.sent, res.err)
	switch {
	case res.err != nil:
		return res.err
	case res.produceFailed:
		return l.abortAll(ctx, abortProduce)
	case !res.committed:
		return l.abortAll(ctx, abortRefused)
	}
	if h := l.hooks.afterEndTxn; h != nil {
		if err := h(pendingStateWrites(l.ps.all)); err != nil {
			return err
		}
	}
	for _, ks := range l.ps.keyspaces {
		if err := ks.apply(e.t, l.ps.all); err != nil {
			return err
		}
	}
	for k := range e.sent {
		p := l.ps.all[k]
		if p == nil {
			continue // revoked while it ended; nothing of it was admitted since
		}
		pl := e.plans[k]
		l.cfg.logger.Debug("committed partition", "topic", k.topic, "partition", k.partition, "offset", pl.base, "done", pl.done)
		p.committed, p.committedDone = pl.base, pl.done
		p.doneSinceCommit -= pl.doneBefore // what finished while it ended belongs to the next
	}
	took := time.Since(e.began)
	l.c.budget.ended(e.t.full(), took)
	l.obs.m.setTxnBudget(l.c.budget.limit)
	l.obs.stats.commits.Record(took)
	l.obs.health.committed.Store(l.cfg.clock.Now().UnixNano())
	l.obs.health.claimed.Store(true) // a commit proves the transactional ID is ours
	e.t.settle(l.obs.stats)
	l.cfg.logger.Debug("committed", "took", took)
	l.ended()
	return nil
}

// ended is the step after a commit, an abort's rewind or a due commit
// with nothing to commit: the schedule starts over, a rebalance waiting
// for the commit may run, the gauges are published.
func (l *lifetime) ended() {
	l.sched.ended(time.Now(), l.saturated)
	l.obs.m.setCommitFloor(l.sched.floor)
	l.saturated = false
	l.group.rebalanceWanted.Store(false)
	l.s.AllowRebalance()
	l.publish()
	l.reportHealth()
}

// reportHealth tells the health the member's epoch, the partitions and
// the oldest unfinished record, once per commit or commit interval.
func (l *lifetime) reportHealth() {
	h := l.obs.health
	if l.member != nil {
		_, epoch := l.member()
		h.member(epoch)
	} else {
		h.joined.Store(true) // a test's fake client is always in the group
	}
	var oldest *oldestRecord
	restoring := 0
	for _, p := range l.ps.all {
		if !p.restore.open() {
			restoring++
		}
		if len(p.pending) > 0 && (oldest == nil || p.headSince.Before(oldest.since)) {
			oldest = &oldestRecord{p.topic, p.id, p.pending[0].rec.Offset, p.headSince}
		}
	}
	h.progress(l.group.assignedCount(), restoring, oldest)
}

// canOverlap reports whether the loop may admit finished work into the
// next transaction while one ends. Keyspaces' changelog writes are applied
// to the local stores per transaction, in commit order, from what the
// partitions hold: with any keyspace the loop admits nothing until the
// end is over.
func (l *lifetime) canOverlap() bool {
	return len(l.ps.keyspaces) == 0 && l.hooks.afterEndTxn == nil
}

// abortAll counts an aborted transaction with its reason, aborts the open
// transaction too (an abort cascades; reason abortRevoked is the open
// one's own), rewinds the consumer and drops everything after the last
// commit.
func (l *lifetime) abortAll(ctx context.Context, reason int) error {
	l.obs.stats.abortsBy[reason].Add(1)
	if reason != abortRevoked && l.c.open.used {
		l.obs.stats.abortsBy[abortCascade].Add(1)
	}
	parts := make([]string, 0, len(l.ps.all))
	for k := range l.ps.all {
		parts = append(parts, k.topic+"/"+strconv.Itoa(int(k.partition)))
	}
	slices.Sort(parts)
	l.cfg.logger.Info("transaction aborted; redoing from the last commit", "reason", abortReasons[reason], "partitions", parts)
	if err := l.c.abortOpen(ctx); err != nil {
		return err
	}
	l.s.Rewind()
	l.ps.rewindAll()
	l.ended()
	return nil
}

// publish sets the per-partition gauges from the loop's state, once per
// commit interval, not per record (metrics.publish).
func (l *lifetime) publish() {
	if l.obs.m == nil {
		return
	}
	l.ends.raise(l.ps.all)
	l.obs.m.publish(l.ps.all, l.cfg.clock.Now())
}
