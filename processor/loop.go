package processor

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/offsetmeta"
	"github.com/onceflow/onceflow/txn"
)

type tp struct {
	topic     string
	partition int32
}

// lifetime is one transactional client's run: the loop. The loop
// goroutine owns it; what other goroutines report arrives through group
// (the client's callbacks), restores, the run's completion queue and
// listedEnds.
type lifetime struct {
	p     *Processor
	r     *run
	cfg   *config
	s     txnClient
	c     *committer        // the transactions: the open one and the one ending
	txn   *transaction      // the open transaction (c.open)
	group *groupEvents      // news from the group callbacks
	parts map[tp]*partition // the assigned partitions the loop has seen records of
	comps []*item           // reused by drain
	// keyspaces are the changelog-backed keyspaces every partition has a
	// part of (keyspace.go); empty without any.
	keyspaces []keyspace

	lane      [8]byte    // the session key of an Unordered record (sessionKey)
	wakes     []*session // dispatchAll's scratch space
	sched     commitSchedule
	saturated bool // work waited for room in the open transaction (see commitSchedule)
	// now is the clock's time after the last poll (or drain wait): one
	// reading per loop step serves every record of the step.
	now time.Time

	restores *restores
	// claim, under the consumer protocol, checks this lifetime's claim
	// of the transactional ID while its member holds the instance ID
	// (claim.go); nil under classic or without a claim.
	claim *claimCheck
	// endYield ends a lost member's yield (yieldOnLost) when the
	// lifetime ends: the client's Close waits for the callback, and the
	// rebuild gives what is left of its grace.
	endYield context.CancelFunc
	// produceCtx outlives Run's context: records of a transaction that
	// is still to commit must not be canceled by a shutdown.
	produceCtx context.Context

	mu         sync.Mutex   // guards listedEnds, which refreshEnds writes
	listedEnds map[tp]int64 // end offsets listed by refreshEnds, for publish
}

func (r *run) runLifetime(ctx context.Context) error {
	p := r.p
	l := r.newLifetime(ctx)
	defer l.restores.close()
	defer l.endYield()
	cfg := l.cfg
	// See backpressure. (WithKgoOpts, in ClientOpts, go before it: a
	// fetch bound of the user's is theirs to set on purpose, the
	// processor's own options are appended after.)
	consumerOpts := []kgo.Opt{kgo.FetchMaxPartitionBytes(inputFetchBytes)}
	var producerOpts []kgo.Opt
	if topics := cfg.changelogTopics(); len(topics) > 0 {
		producerOpts = append(producerOpts, kgo.RecordPartitioner(changelogPartitioner{topics, kgo.StickyKeyPartitioner(nil)}))
	}
	if p.metrics != nil {
		// kprom registers the client's metrics when the client is
		// created and unregisters them when it closes, so a rebuilt
		// client takes over the same series. The group member's
		// client: its fetches, and its requests to the group.
		consumerOpts = append(consumerOpts, kgo.WithHooks(p.metrics.kprom))
	}
	if cfg.groupProtocol == GroupProtocolConsumer {
		consumerOpts = append(consumerOpts, kgo.WithHooks(classicJoinGuard{l.group}))
	}
	s, err := txn.NewSession(txn.Config{
		Brokers:            cfg.brokers,
		Group:              cfg.group,
		InstanceID:         cfg.instanceID,
		Topics:             cfg.inputs,
		TransactionTimeout: cfg.txnTimeout,
		SessionTimeout:     cfg.sessionTimeout,
		RebalanceTimeout:   cfg.rebalanceTimeout,
		GroupProtocol:      cfg.groupProtocol,
		Incarnation:        p.incarnation,
		Pipeline:           cfg.pipeline,
		ClientOpts:         cfg.clientOpts(),
		ConsumerOpts: append(append(consumerOpts,
			kgo.OnOffsetsFetched(l.group.onOffsetsFetched),
			kgo.OnPartitionsCallbackBlocked(l.group.onRebalanceWanted),
		), l.keyspaceOpts()...),
		ProducerOpts: producerOpts,
		OnRevoked:    l.group.onRevoked,
		OnLost:       l.group.onLost,
	})
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidOption, err)
	}
	closeCommitter := l.connect(sessionClient{s})
	var refreshWG sync.WaitGroup
	refreshCtx, stopRefresh := context.WithCancel(ctx)
	stopped := false // a clean stop: Run's ctx done, shutdown not fenced
	defer func() {
		l.endYield()
		stopRefresh()
		refreshWG.Wait()
		closeCommitter()
		l.staleAll()
		// The client may have rejoined under a new member ID that no
		// assignment has reported yet (members records IDs as offsets
		// are fetched): closed, that member is this process's, and a
		// rebuild must not take it for another process's.
		if member, epoch := s.Client().GroupMetadata(); epoch > 0 {
			r.members.add(member)
		}
		if stopped && p.leaveOnStop.Load() {
			l.closeAndLeave(s)
			return
		}
		s.Close()
	}()
	if p.metrics != nil {
		refreshWG.Go(func() { l.refreshEnds(refreshCtx, s.Client()) })
	}
	if err := l.checkGroupProtocol(ctx, s); err != nil {
		return err
	}
	l.claimID(ctx, s)
	err = l.run(ctx)
	// Not when the topic watch stopped Run (ErrTopicNotFound): a job
	// whose topic is gone is fixed and restarted, not scaled down.
	stopped = err == nil && ctx.Err() != nil && !errors.Is(context.Cause(ctx), ErrTopicNotFound)
	return err // an end still running finishes before the clients close (closeCommitter)
}

// leaveTimeout bounds a clean stop's leave of the group (WithLeaveOnStop).
const leaveTimeout = 5 * time.Second

// closeAndLeave closes the lifetime's session after a clean stop and
// leaves the group, so that the other members get its partitions now
// (WithLeaveOnStop).
func (l *lifetime) closeAndLeave(s *txn.Session) {
	member, epoch := s.Client().GroupMetadata()
	ctx, cancel := context.WithTimeout(context.Background(), leaveTimeout)
	defer cancel()
	start := time.Now()
	if err := s.CloseAndLeave(ctx); err != nil {
		l.cfg.logger.Warn("could not leave the group on stop; this instance's partitions move to the other instances only when its session times out", "member", member, "err", err)
		return
	}
	if member == "" || epoch <= 0 {
		return // never joined: nothing to leave
	}
	l.cfg.logger.Info("left the group on stop; this instance's partitions go to the other instances now", "member", member, "took", time.Since(start).Round(time.Millisecond))
}

// newLifetime builds a lifetime without its client (see connect).
func (r *run) newLifetime(ctx context.Context) *lifetime {
	l := &lifetime{p: r.p, r: r, cfg: r.cfg, parts: make(map[tp]*partition),
		listedEnds: make(map[tp]int64)}
	l.group = newGroupEvents(r.cfg.logger, r.comps.wakePoll)
	l.group.members = &r.members
	var yieldCtx context.Context
	yieldCtx, l.endYield = context.WithCancel(ctx)
	if r.cfg.groupProtocol == GroupProtocolConsumer {
		l.group.yield = func(cbCtx context.Context, cl *kgo.Client) error {
			return r.yieldOnLost(yieldCtx, cbCtx, cl)
		}
	}
	l.keyspaces = newKeyspaces(l)
	l.restores = newRestores(ctx, r.cfg)
	l.produceCtx = context.WithoutCancel(ctx)
	return l
}

// keyspaceOpts are the client options the keyspaces add.
func (l *lifetime) keyspaceOpts() []kgo.Opt {
	var opts []kgo.Opt
	for _, ks := range l.keyspaces {
		opts = append(opts, ks.clientOpts()...)
	}
	return opts
}

// connect gives the lifetime its client. The returned func waits for an
// end still running and ends the gates' goroutines; call it before closing
// the client.
func (l *lifetime) connect(s txnClient) (closeCommitter func()) {
	l.s = s
	l.c = newCommitter(s, l.cfg, l.p.metrics, l.produceCtx, l.r.comps.notify)
	l.txn = l.c.open
	return l.c.close
}

func (l *lifetime) run(ctx context.Context) error {
	cfg := l.cfg
	l.sched = newCommitSchedule(cfg.commitFloor(), cfg.commitInterval, time.Now())
	for {
		if ctx.Err() != nil {
			return l.shutdown()
		}
		if err := l.poll(ctx); err != nil {
			return err
		}
		if err := l.handleEvents(ctx); err != nil {
			return err
		}
		if err := l.recheckClaim(ctx); err != nil {
			return err
		}
		if err := l.takeCommit(ctx, false); err != nil {
			return err
		}
		if err := l.drain(ctx); err != nil {
			return err
		}
		if err := l.checkStuck(ctx); err != nil {
			return err
		}
		if err := l.txn.gate.releaseIfReady(); err != nil {
			return err
		}
		l.backpressure()
		wantRebalance := l.group.rebalanceWanted.Load()
		if l.c.ending != nil || !wantRebalance && !l.commitDue(time.Now()) {
			continue
		}
		if !l.txn.used {
			l.ended() // nothing to commit: look again an interval on
			continue
		}
		if wantRebalance {
			// Finish what is in flight while our generation is
			// still current, so the next owner redoes little.
			if err := l.waitInFlight(ctx, ctx); err != nil {
				return err
			}
		}
		// Not canceled with ctx: a stop arriving mid-commit must not
		// turn a commit the broker may already have applied into an
		// unknown outcome (a rebuild, and Stats missing its outputs).
		// Bounded instead: the end's flush and commit take a
		// transaction timeout each at most. The loop sees ctx after it
		// and shuts down.
		cctx := context.WithoutCancel(ctx)
		if wantRebalance || !l.canOverlap() {
			if err := l.commit(cctx); err != nil {
				return err
			}
			continue
		}
		if err := l.startCommit(cctx); err != nil {
			return err
		}
	}
}

// commitDue reports whether the open transaction should commit now: its
// schedule says so, and its first record is acknowledged, or has been out
// for a quarter of the transaction timeout (see openGate.holding).
func (l *lifetime) commitDue(now time.Time) bool {
	return l.sched.due(now, l.txn.used) && !l.awaitingFirstRecord(now)
}

// awaitingFirstRecord reports whether the open transaction's first record
// holds the commit off at now.
func (l *lifetime) awaitingFirstRecord(now time.Time) bool {
	return l.txn.gate.holding(now, l.cfg.txnTimeout/4)
}

// poll fetches up to the free buffer room, waiting until the next commit
// at most. One poll takes at most four per-partition bounds per fetching
// partition, so that memory follows what the partitions can run rather
// than the total bound, and at most one partition's queue share: a poll
// may land in one partition before backpressure can pause it. With no room
// it takes nothing and only waits: franz-go keeps what it fetched, and
// fetches no more from those brokers, until the loop takes it.
func (l *lifetime) poll(ctx context.Context) error {
	n := l.partitionCount()
	room := min(l.cfg.maxBuffer-l.totalBuffered(), 4*l.cfg.maxPartitionBuffer*max(1, l.fetching(n)), l.queueShare(n))
	deadline := l.sched.next(l.txn.used)
	if now := time.Now(); l.c.ending != nil || l.awaitingFirstRecord(now) {
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
	l.r.comps.pollWake.Store(&cancel)
	if l.r.comps.pending() || l.txn.gate.ready() || l.c.done() {
		cancel() // woken before the wake was armed: do not wait
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
	l.r.comps.pollWake.Store(nil)
	l.now = l.cfg.clock.Now()
	var fatal error
	fs.EachError(func(topic string, partition int32, err error) {
		switch {
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		case errors.Is(err, kgo.ErrClientClosed):
			fatal = &txn.Error{Class: txn.ClassReset, Op: "poll", Err: err}
		case errors.Is(err, kerr.FencedInstanceID):
			fatal = l.s.CheckFenced(ctx, "poll", err)
		case errors.Is(err, kerr.UnreleasedInstanceID):
			if e := l.s.CheckReplaced(ctx, l.now, "poll", err, l.r.members.list(), &l.r.waitedFor); e != nil {
				fatal = e
				return
			}
			l.cfg.logger.Warn("waiting for the group to release this instance ID (a stopped predecessor's session must expire first)", "err", err)
		case topicGone(err):
			// The topic watch finds it too, later.
			if e := l.cfg.checkTopicsGone(ctx, topic); e != nil {
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
	return l.intake(fs)
}

func (l *lifetime) intake(fs kgo.Fetches) error {
	now := l.now
	var consumed, skipped int64
	var err error
	fs.EachPartition(func(ftp kgo.FetchTopicPartition) {
		if len(ftp.Records) == 0 {
			if p := l.parts[tp{ftp.Topic, ftp.Partition}]; p != nil && ftp.Err == nil {
				p.hwm = max(p.hwm, ftp.HighWatermark)
			}
			return
		}
		p := l.partition(ftp.Topic, ftp.Partition)
		if ftp.Err == nil {
			p.hwm = max(p.hwm, ftp.HighWatermark)
		}
		// Counted once per run: a rewind or a reassignment fetches
		// records again, which Stats.Consumed does not count.
		k := tp{ftp.Topic, ftp.Partition}
		c, s := p.track(ftp.Records, now, l.r.counted[k])
		l.r.counted[k] = max(l.r.counted[k], ftp.Records[len(ftp.Records)-1].Offset+1)
		consumed += c
		skipped += s
		if e := l.dispatchWindow(p); e != nil && err == nil {
			err = e
		}
	})
	l.p.stats.consumed.Add(consumed)
	l.p.stats.skipped.Add(skipped)
	return err
}

// dispatchWindow hands a partition's next records to their sessions while
// fewer than the per-partition bound are out ahead of its lowest unfinished
// record. The window bounds the map of finished records in the commit
// metadata; records beyond it wait in offset order, and all of them wait
// while the partition restores. The partition's keyspaces screen records
// first: with WithDedupe, duplicates and records with invalid event IDs
// are finished without their handler, through the completion queue like
// the rest.
func (l *lifetime) dispatchWindow(p *partition) error {
	if !p.restore.open() {
		return nil
	}
	inFlight := len(p.pending) - len(p.undispatched)
	n := min(len(p.undispatched), l.cfg.maxPartitionBuffer-inFlight)
	if n <= 0 {
		return nil
	}
	batch := p.undispatched[:n]
	for _, k := range p.keyspaces {
		if err := k.screen(batch); err != nil {
			return err
		}
	}
	run := batch[:0] // the items that run their handler, in order
	for i, it := range batch {
		batch[i] = nil
		if it.isDup() || it.dlq != nil { // screened out: done without its handler
			l.r.comps.push(it)
			continue
		}
		run = append(run, it)
	}
	l.wakes = l.r.d.dispatchAll(run, func(it *item) []byte { return l.sessionKey(p, it) }, l.wakes)
	clear(run)
	p.undispatched = p.undispatched[n:]
	return nil
}

func (l *lifetime) sessionKey(p *partition, it *item) []byte {
	switch l.cfg.ordering {
	case OrderByPartition:
		return p.laneKey
	case Unordered:
		// The dispatcher copies a key it keeps, so one buffer serves.
		binary.BigEndian.PutUint64(l.lane[:], uint64(it.rec.Offset%UnorderedLanes))
		return l.lane[:]
	}
	if l.cfg.sessionKey != nil {
		return l.cfg.sessionKey(it.rec)
	}
	return it.rec.Key
}

// partition returns the state of an assigned partition, creating it from
// the committed offset and metadata fetched at assignment.
func (l *lifetime) partition(topic string, id int32) *partition {
	k := tp{topic, id}
	if p := l.parts[k]; p != nil {
		return p
	}
	info, ok := l.group.committed(k)
	if !ok {
		info.offset = -1
	}
	p := l.newPartition(topic, id, info.offset, info.done)
	for _, k := range p.keyspaces {
		if spec, ok := k.restore(); ok {
			l.restores.start(p, spec)
		}
	}
	l.parts[k] = p
	return p
}

// newPartition starts a partition's state from its committed offset and
// metadata, with its parts of the keyspaces.
func (l *lifetime) newPartition(topic string, id int32, committed int64, done []offsetmeta.Range) *partition {
	p := newPartition(topic, id, l.r.gen.Add(1), committed, done)
	for _, ks := range l.keyspaces {
		if k := ks.part(p); k != nil {
			p.keyspaces = append(p.keyspaces, k)
		}
	}
	return p
}

// rewound is the state that replaces prev on a rewind, started again from
// prev's last commit. What outlives a rewind is carried over: a restore in
// progress, the fetch state, and the keyspaces' parts without the aborted
// transaction's writes.
func (l *lifetime) rewound(prev *partition) *partition {
	p := newPartition(prev.topic, prev.id, l.r.gen.Add(1), prev.committed, prev.committedDone)
	if len(prev.keyspaces) > 0 {
		p.keyspaces = make([]keyspacePart, len(prev.keyspaces))
		for i, k := range prev.keyspaces {
			p.keyspaces[i] = k.rewound()
		}
	}
	p.restore = prev.restore
	p.paused, p.pauseLogged, p.hwm = prev.paused, prev.pauseLogged, prev.hwm
	return p
}

// partitionCount is how many partitions the lifetime has: those assigned,
// or those it has seen records of if more (a revoke not yet handled).
func (l *lifetime) partitionCount() int { return max(l.group.assignedCount(), len(l.parts)) }

// fetching counts, of n (partitionCount), the partitions whose fetching is
// not paused.
func (l *lifetime) fetching(n int) int {
	for _, p := range l.parts {
		if p.paused {
			n--
		}
	}
	return n
}

func (l *lifetime) totalBuffered() int {
	n := 0
	for _, p := range l.parts {
		n += p.buffered()
	}
	return n
}

func (l *lifetime) unfinished() int {
	n := 0
	for _, p := range l.parts {
		n += p.unfinished() + len(p.held)
	}
	return n
}
