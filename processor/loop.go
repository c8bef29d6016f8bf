package processor

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/internal/offsetmeta"
	"github.com/onceflow/onceflow/statestore"
	"github.com/onceflow/onceflow/txn"
)

type tp struct {
	topic     string
	partition int32
}

type committedInfo struct {
	offset int64
	done   []offsetmeta.Range
}

// lifetime is one transactional client's run. The loop goroutine owns all
// of it except the fields under mu, which the client's group callbacks
// write.
type lifetime struct {
	p     *Processor
	cfg   *config
	s     *txn.Session
	parts map[tp]*partition
	comps []*item

	nextCommit time.Time
	rebalanced bool // a rebalance ran since the last commit

	pendingRebalance atomic.Bool

	restored   chan restoreResult
	restoreCtx context.Context
	// produceCtx outlives Run's context: records of a transaction that
	// is still to commit must not be canceled by a shutdown.
	produceCtx  context.Context
	restoreWG   sync.WaitGroup
	stopRestore context.CancelFunc

	mu         sync.Mutex
	clNext     map[tp]int64 // next changelog offset after this transaction's writes
	fetched    map[tp]committedInfo
	revoked    []tp
	fatal      error
	produceErr error
	txnOutputs int64
	txnDLQ     int64
	txnDLQBy   [len(dlqReasons)]int64
	listedEnds map[tp]int64 // end offsets listed by refreshEnds, for publish
}

func (p *Processor) runLifetime(ctx context.Context) error {
	l := &lifetime{p: p, cfg: &p.cfg, parts: make(map[tp]*partition), fetched: make(map[tp]committedInfo),
		restored: make(chan restoreResult, 64), clNext: make(map[tp]int64), listedEnds: make(map[tp]int64)}
	cfg := l.cfg
	var restoreCtx context.Context
	restoreCtx, l.stopRestore = context.WithCancel(ctx)
	defer func() {
		l.stopRestore()
		l.restoreWG.Wait()
	}()
	l.restoreCtx = restoreCtx
	l.produceCtx = context.WithoutCancel(ctx)
	clientOpts := append([]kgo.Opt{}, cfg.kgoOpts...)
	if p.store != nil {
		topics := make(map[string]bool)
		for _, in := range cfg.inputs {
			topics[changelogTopic(cfg.group, in)] = true
		}
		clientOpts = append(clientOpts, kgo.RecordPartitioner(changelogPartitioner{topics, kgo.StickyKeyPartitioner(nil)}))
	}
	if p.metrics != nil {
		// kprom registers the client's metrics when the client is
		// created and unregisters them when it closes, so a rebuilt
		// client takes over the same series.
		clientOpts = append(clientOpts, kgo.WithHooks(p.metrics.kprom))
	}
	s, err := txn.NewSession(txn.Config{
		Brokers:            cfg.brokers,
		Group:              cfg.group,
		InstanceID:         cfg.instanceID,
		Topics:             cfg.inputs,
		TransactionTimeout: cfg.txnTimeout,
		SessionTimeout:     cfg.sessionTimeout,
		RebalanceTimeout:   cfg.rebalanceTimeout,
		ClientOpts: append(clientOpts,
			kgo.OnOffsetsFetched(l.onOffsetsFetched),
			kgo.OnPartitionsRevoked(l.onRevoked),
			kgo.OnPartitionsLost(l.onRevoked),
			kgo.OnPartitionsCallbackBlocked(l.onRebalanceWanted),
		),
	})
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidOption, err)
	}
	l.s = s
	var refreshWG sync.WaitGroup
	refreshCtx, stopRefresh := context.WithCancel(ctx)
	defer func() {
		stopRefresh()
		refreshWG.Wait()
		l.staleAll()
		s.Close()
	}()
	if p.metrics != nil {
		refreshWG.Go(func() { l.refreshEnds(refreshCtx) })
	}
	return l.run(ctx)
}

func (l *lifetime) run(ctx context.Context) error {
	cfg := l.cfg
	l.nextCommit = time.Now().Add(cfg.commitInterval)
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
		if err := l.drain(ctx); err != nil {
			return err
		}
		if err := l.checkStuck(ctx); err != nil {
			return err
		}
		l.backpressure()
		wantRebalance := l.pendingRebalance.Load()
		if !wantRebalance && time.Now().Before(l.nextCommit) {
			continue
		}
		if wantRebalance {
			// Finish what is in flight while our generation is
			// still current, so the next owner redoes little.
			if err := l.waitInFlight(ctx, ctx); err != nil {
				return err
			}
		}
		if err := l.commit(ctx); err != nil {
			return err
		}
		l.publish()
		l.nextCommit = time.Now().Add(cfg.commitInterval)
		l.pendingRebalance.Store(false)
		l.s.AllowRebalance()
	}
}

// poll fetches up to the free buffer room, waiting until the next commit
// at most. Fetching of full partitions is paused (see backpressure).
func (l *lifetime) poll(ctx context.Context) error {
	room := l.cfg.maxBuffer - l.totalBuffered()
	pctx, cancel := context.WithDeadline(ctx, l.nextCommit)
	defer cancel()
	if room <= 0 {
		room = 1 // every partition is paused; poll only to let rebalances in
	}
	l.p.pollWake.Store(&cancel)
	fs := l.s.Poll(pctx, room)
	l.p.pollWake.Store(nil)
	var fatal error
	fs.EachError(func(topic string, partition int32, err error) {
		switch {
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		case errors.Is(err, kgo.ErrClientClosed):
			fatal = &txn.Error{Class: txn.ClassReset, Op: "poll", Err: err}
		case errors.Is(err, kerr.FencedInstanceID):
			fatal = l.s.CheckFenced(ctx, "poll", err)
		default:
			l.cfg.logger.Warn("fetch error", "topic", topic, "partition", partition, "err", err)
		}
	})
	if fatal != nil {
		return fatal
	}
	l.intake(fs)
	return nil
}

func (l *lifetime) intake(fs kgo.Fetches) {
	cfg := l.cfg
	now := cfg.clock.Now()
	var consumed, skipped int64
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
		gen := p.gen.Load()
		for _, r := range ftp.Records {
			isNew, finished := p.accept(r.Offset)
			if !isNew {
				continue
			}
			consumed++
			if finished {
				skipped++
				if len(p.pending) > 0 {
					p.appendDone(&item{rec: r, part: p, gen: gen, done: true})
				}
				continue
			}
			it := &item{rec: r, part: p, gen: gen, dispatched: now}
			if len(p.pending) == 0 {
				p.headSince = now
			}
			p.pending = append(p.pending, it)
			if p.state != nil && p.state.restoring {
				p.state.waiting = append(p.state.waiting, it)
				continue
			}
			l.p.d.dispatch(l.sessionKey(p, it), it)
		}
	})
	l.p.stats.consumed.Add(consumed)
	l.p.stats.skipped.Add(skipped)
}

func (l *lifetime) sessionKey(p *partition, it *item) []byte {
	switch l.cfg.ordering {
	case OrderByPartition:
		return p.laneKey
	case Unordered:
		binary.BigEndian.PutUint64(it.lane[:], uint64(it.rec.Offset%UnorderedLanes))
		return it.lane[:]
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
	l.mu.Lock()
	info, ok := l.fetched[k]
	l.mu.Unlock()
	if !ok {
		info.offset = -1
	}
	p := l.newPartition(topic, id, info.offset, info.done)
	if p.state != nil {
		l.restore(p)
	}
	l.parts[k] = p
	return p
}

func (l *lifetime) newPartition(topic string, id int32, committed int64, done []offsetmeta.Range) *partition {
	p := newPartition(topic, id, l.p.gen.Add(1), committed, done)
	if l.p.store != nil {
		p.state = &partState{store: l.p.store, p: statestore.Partition{Topic: topic, Partition: id}, over: make(map[string]stateWrite)}
	}
	return p
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

// drain takes finished items and puts their outputs into the transaction.
func (l *lifetime) drain(ctx context.Context) error {
	l.comps = l.p.takeCompletions(l.comps)
	for i, it := range l.comps {
		l.comps[i] = nil
		p := it.part
		if it.gen != p.gen.Load() || it.stuck.Load() || it.done {
			continue // revoked, rewound or dead-lettered as stuck meanwhile
		}
		// Held completions go first, in order, so a session's outputs
		// keep their order. The lowest unfinished record is the
		// exception: nothing of its session waits before it, and
		// finishing it is what shrinks the metadata.
		if len(p.held) > 0 && p.pending[0] != it {
			p.held = append(p.held, it)
			continue
		}
		if err := l.admit(ctx, p, it); err != nil {
			return err
		}
	}
	for _, p := range l.parts {
		if err := l.admitHeld(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

func (l *lifetime) admitHeld(ctx context.Context, p *partition) error {
	// The lowest unfinished record may wait behind others: take it first
	// (see drain), which makes room for the rest.
	if len(p.held) > 0 {
		p.measureMeta() // once per drain; admissions below only add to it
	}
	for len(p.held) > 0 {
		i := slices.Index(p.held, p.pending[0])
		if i < 0 {
			break
		}
		p.held = slices.Delete(p.held, i, i+1)
		if err := l.admit(ctx, p, p.pending[0]); err != nil {
			return err
		}
	}
	for len(p.held) > 0 {
		it := p.held[0]
		ok, err := l.tryAdmit(ctx, p, it)
		if err != nil || !ok {
			return err
		}
		p.held[0] = nil
		p.held = p.held[1:]
	}
	return nil
}

func (l *lifetime) admit(ctx context.Context, p *partition, it *item) error {
	ok, err := l.tryAdmit(ctx, p, it)
	if err == nil && !ok {
		p.held = append(p.held, it)
	}
	return err
}

// tryAdmit marks it finished and produces its records, unless the commit
// metadata would then outgrow the broker's limit: such an item waits.
func (l *lifetime) tryAdmit(ctx context.Context, p *partition, it *item) (bool, error) {
	if it.dlq != nil && l.cfg.dlq == "" {
		return false, fmt.Errorf("%w: %s/%d@%d: %s", ErrNoDLQ, it.rec.Topic, it.rec.Partition, it.rec.Offset, headerValue(it.dlq, HeaderError))
	}
	wasHead := p.pending[0] == it
	p.markDone(it)
	if wasHead {
		p.headSince = l.cfg.clock.Now()
	} else if !p.metadataFits(l.cfg.maxMetadataBytes) {
		p.unmarkDone(it)
		return false, nil
	}
	if err := l.produce(ctx, it.outputs, it.dlq); err != nil {
		return false, err
	}
	if len(it.writes) > 0 {
		l.produceWrites(ctx, p, it.writes)
	}
	return true, nil
}

func (l *lifetime) produce(ctx context.Context, outputs []*kgo.Record, dlq *kgo.Record) error {
	if err := l.s.Begin(); err != nil {
		return err
	}
	for _, r := range outputs {
		if r.Topic == "" {
			r.Topic = l.cfg.output
		}
		l.s.Produce(l.produceCtx, r, l.promise)
	}
	l.txnOutputs += int64(len(outputs))
	if dlq != nil {
		l.s.Produce(l.produceCtx, dlq, l.promise)
		l.txnDLQ++
		l.txnDLQBy[reasonIndex(headerValue(dlq, HeaderReason))]++
	}
	return nil
}

func (l *lifetime) promise(_ *kgo.Record, err error) {
	if err == nil {
		return
	}
	l.mu.Lock()
	if l.produceErr == nil {
		l.produceErr = err
	}
	l.mu.Unlock()
}

// checkStuck dead-letters a partition's lowest unfinished record once it has
// been the head longer than the stuck timeout.
func (l *lifetime) checkStuck(ctx context.Context) error {
	timeout := l.cfg.stuckTimeout
	if timeout <= 0 {
		return nil
	}
	now := l.cfg.clock.Now()
	for _, p := range l.parts {
		for len(p.pending) > 0 && now.Sub(p.headSince) >= timeout {
			it := p.pending[0]
			markStuck(it)
			cancelStuck(it)
			dlq := deadLetter(l.cfg.dlq, it, reasonStuck, fmt.Errorf("unfinished after %v", now.Sub(p.headSince).Round(time.Millisecond)), 0, time.Time{})
			l.cfg.logger.Error("record stuck; sending it to the dead-letter topic and moving on",
				"topic", p.topic, "partition", p.id, "offset", it.rec.Offset, "timeout", timeout)
			p.markDone(it)
			p.headSince = now
			if err := l.produce(ctx, nil, dlq); err != nil {
				return err
			}
		}
	}
	return nil
}

// backpressure pauses fetching from partitions at their bound (or all, at
// the total bound) and resumes them once they drain. Fetched records stay
// in their partition's queue, so nothing newer overtakes them.
func (l *lifetime) backpressure() {
	overTotal := l.totalBuffered() >= l.cfg.maxBuffer
	var pause, resume map[string][]int32
	now := time.Now()
	for _, p := range l.parts {
		want := overTotal || p.buffered() >= l.cfg.maxPartitionBuffer || len(p.held) > 0
		if want == p.paused {
			continue
		}
		p.paused = want
		l.logPause(p, now)
		m := &resume
		if want {
			m = &pause
		}
		if *m == nil {
			*m = make(map[string][]int32)
		}
		(*m)[p.topic] = append((*m)[p.topic], p.id)
	}
	if pause != nil {
		l.s.Client().PauseFetchPartitions(pause)
	}
	if resume != nil {
		l.s.Client().ResumeFetchPartitions(resume)
	}
}

// pauseLogInterval rate-limits the Info logs of pauses and resumes per
// partition; the changes in between are logged at Debug.
const pauseLogInterval = 30 * time.Second

// logPause logs a change of p's fetch state: at Info at most once per
// pauseLogInterval per partition, else at Debug.
func (l *lifetime) logPause(p *partition, now time.Time) {
	level := slog.LevelDebug
	if now.Sub(p.pauseLogged) >= pauseLogInterval {
		level, p.pauseLogged = slog.LevelInfo, now
	}
	msg := "resumed fetching"
	if p.paused {
		msg = "paused fetching: buffer or commit metadata full"
	}
	var oldest int64 = -1
	if len(p.pending) > 0 {
		oldest = p.pending[0].rec.Offset
	}
	l.cfg.logger.Log(context.Background(), level, msg, "topic", p.topic, "partition", p.id,
		"offset", p.next, "oldest_unfinished", oldest, "buffered", p.buffered(), "held", len(p.held))
}

// waitInFlight waits, at most the drain timeout, for dispatched records to
// finish, putting them into the transaction as they do.
func (l *lifetime) waitInFlight(ctx, drainCtx context.Context) error {
	deadline := time.NewTimer(l.cfg.drainTimeout)
	defer deadline.Stop()
	for l.unfinished() > 0 {
		select {
		case <-l.p.compWake:
		case <-deadline.C:
			l.cfg.logger.Info("drain timeout: unfinished records are left to be redone", "unfinished", l.unfinished())
			return nil
		case <-drainCtx.Done():
			return nil
		}
		if err := l.drain(ctx); err != nil {
			return err
		}
	}
	return nil
}

// commit ends the open transaction with the offsets of the lowest
// unfinished records and, in the metadata, the finished records above them.
func (l *lifetime) commit(ctx context.Context) error {
	if !l.s.InTxn() {
		return nil
	}
	// Flush first: a record that failed must be seen before the offsets
	// of its input are committed, or the input would be lost.
	fctx, cancel := context.WithTimeout(l.produceCtx, l.cfg.txnTimeout)
	err := l.s.Client().Flush(fctx)
	cancel()
	if err != nil {
		return &txn.Error{Class: txn.ClassReset, Op: "flush", Err: err}
	}
	l.mu.Lock()
	perr := l.produceErr
	l.produceErr = nil
	l.mu.Unlock()
	if perr != nil {
		l.cfg.logger.Warn("a produce failed; aborting the transaction", "err", perr)
		if err := l.s.Abort(ctx); err != nil {
			return err
		}
		if e := l.s.CheckFenced(ctx, "produce", perr); e.Class != txn.ClassAbortable {
			return e
		}
		l.rewindAll()
		return nil
	}
	type plan struct {
		base int64
		done []offsetmeta.Range
		meta string
	}
	plans := make(map[tp]plan, len(l.parts))
	for k, p := range l.parts {
		base, done := p.commitPoint()
		plans[k] = plan{base, done, offsetmeta.Encode(base, done)}
	}
	sent := make(map[tp]bool, len(plans))
	// The request starts from the client's polled heads, which a rewind
	// moves back to the last commit even where we are further on: every
	// partition we track is committed from our own plan, added if the
	// client left it out, dropped if we no longer own it.
	rewrite := func(req *kmsg.TxnOffsetCommitRequest) error {
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
	start := time.Now()
	spanCtx, span := l.startCommit(ctx)
	committed, err := l.s.Commit(spanCtx, rewrite)
	l.p.metrics.observeCommit(time.Since(start))
	endCommit(span, committed, err)
	if err != nil {
		return err
	}
	if !committed {
		l.p.stats.aborts.Add(1)
		l.cfg.logger.Info("transaction aborted (group rebalanced or commit refused); redoing from the last commit")
		l.rewindAll()
		return nil
	}
	if err := l.applyState(); err != nil {
		return err
	}
	for k := range sent {
		p := l.parts[k]
		pl := plans[k]
		l.cfg.logger.Debug("committed partition", "topic", k.topic, "partition", k.partition, "offset", pl.base, "done", pl.done)
		p.committed, p.committedDone, p.doneSinceCommit = pl.base, pl.done, 0
	}
	l.p.stats.commits.Add(1)
	l.p.stats.outputs.Add(l.txnOutputs)
	l.p.stats.dlq.Add(l.txnDLQ)
	for i, n := range l.txnDLQBy {
		l.p.stats.dlqBy[i].Add(n)
	}
	l.txnOutputs, l.txnDLQ, l.txnDLQBy = 0, 0, [len(dlqReasons)]int64{}
	l.cfg.logger.Debug("committed", "took", time.Since(start))
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
		np := l.newPartition(p.topic, p.id, p.committed, p.committedDone)
		np.paused, np.pauseLogged, np.hwm = p.paused, p.pauseLogged, p.hwm
		p.gen.Store(0)
		l.parts[k] = np
	}
	l.txnOutputs, l.txnDLQ, l.txnDLQBy = 0, 0, [len(dlqReasons)]int64{}
	l.mu.Lock()
	clear(l.clNext)
	l.mu.Unlock()
	l.p.stats.reprocessed.Add(redo)
}

// staleAll makes every dispatched item of this lifetime stale.
func (l *lifetime) staleAll() {
	for _, p := range l.parts {
		p.gen.Store(0)
	}
}

// handleEvents applies what the group callbacks reported.
func (l *lifetime) handleEvents(ctx context.Context) error {
	l.mu.Lock()
	fatal, revoked := l.fatal, l.revoked
	l.revoked = nil
	rebalanced := l.rebalanced
	l.rebalanced = false
	l.mu.Unlock()
	if fatal != nil {
		return fatal
	}
	if err := l.takeRestored(); err != nil {
		return err
	}
	resume := make(map[string][]int32)
	for _, k := range revoked {
		l.cfg.logger.Debug("revoked", "partition", k.partition)
		l.p.metrics.unpublish(k)
		if p := l.parts[k]; p != nil {
			p.gen.Store(0)
			delete(l.parts, k)
			if p.paused {
				resume[k.topic] = append(resume[k.topic], k.partition)
			}
		}
	}
	if len(resume) > 0 {
		l.s.Client().ResumeFetchPartitions(resume)
	}
	if rebalanced {
		l.p.stats.rebalances.Add(1)
		l.cfg.logger.Debug("rebalanced", "in_txn", l.s.InTxn())
	}
	if rebalanced && !l.s.InTxn() {
		// The session marks any rebalance so that the next commit
		// aborts. Nothing is open: clear the mark with an empty abort
		// (its rewind is harmless, refetched records are filtered).
		return l.s.Abort(ctx)
	}
	return nil
}

func (l *lifetime) onRevoked(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for t, ps := range revoked {
		for _, p := range ps {
			l.revoked = append(l.revoked, tp{t, p})
			delete(l.fetched, tp{t, p})
		}
	}
	l.rebalanced = true
}

func (l *lifetime) onRebalanceWanted(context.Context, *kgo.Client) {
	l.pendingRebalance.Store(true)
	if wake := l.p.pollWake.Load(); wake != nil {
		(*wake)()
	}
}

// onOffsetsFetched decodes the committed metadata of newly assigned
// partitions. Corrupt onceflow metadata stops the processor; foreign
// metadata (another tool's, or franz-go's default member ID) is taken to
// mean nothing above the committed offset is done, and logged.
func (l *lifetime) onOffsetsFetched(_ context.Context, _ *kgo.Client, resp *kmsg.OffsetFetchResponse) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rebalanced = true
	add := func(topic string, p kmsg.OffsetFetchResponseTopicPartition) {
		info := committedInfo{offset: p.Offset}
		if p.Offset >= 0 && p.Metadata != nil {
			done, err := offsetmeta.Decode(p.Offset, *p.Metadata)
			switch {
			case errors.Is(err, offsetmeta.ErrForeign):
				l.cfg.logger.Info("commit metadata not written by onceflow; resuming from the committed offset alone",
					"topic", topic, "partition", p.Partition, "offset", p.Offset)
			case err != nil:
				l.fatal = fmt.Errorf("partition %s/%d at offset %d: %w", topic, p.Partition, p.Offset, err)
			default:
				info.done = done
			}
		}
		l.fetched[tp{topic, p.Partition}] = info
		l.cfg.logger.Debug("offsets fetched", "topic", topic, "partition", p.Partition, "offset", info.offset, "done", info.done)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			add(t.Topic, p)
		}
	}
	for _, g := range resp.Groups {
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				add(t.Topic, kmsg.OffsetFetchResponseTopicPartition{Partition: p.Partition, Offset: p.Offset, Metadata: p.Metadata})
			}
		}
	}
	return nil
}

// shutdown finishes in-flight records (bounded), commits and returns.
func (l *lifetime) shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.txnTimeout)
	defer cancel()
	if err := l.waitInFlight(ctx, ctx); err != nil {
		return err
	}
	err := l.commit(ctx)
	l.publish()
	if err != nil {
		l.cfg.logger.Warn("final commit failed; the next start resumes from what is committed", "err", err)
		if errors.Is(err, ErrFenced) {
			return err
		}
	}
	return nil
}

func headerValue(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}
