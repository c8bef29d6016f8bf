package processor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/dedupe"
	"github.com/onceflow/onceflow/internal/txncore"
	"github.com/onceflow/onceflow/processor/internal/sched"
	"github.com/onceflow/onceflow/statestore"
)

// run is the state of one Run call that outlives its transactional
// clients (lifetimes): the workers and their completion queue, the local
// stores and the changelogs' topic IDs.
type run struct {
	p     *Processor
	cfg   *config
	d     *sched.Pool[*item]
	comps *completionQueue
	gen   atomic.Uint64 // source of partition generations
	// inst is the process's hold on its instance ID across lifetimes:
	// its claims, waits and yields (txncore.Instance).
	inst *txncore.Instance

	// counted is, per input partition, the offset after the last record
	// counted in Stats.Consumed: the loop's, across its lifetimes.
	counted map[tp]int64

	store        *statestore.Store   // nil without WithStateStore
	marks        *dedupe.Store       // nil without WithDedupe
	changelogIDs map[string][16]byte // changelog topic IDs, for checkpoints
}

func newRun(p *Processor) *run {
	r := &run{p: p, cfg: &p.cfg, comps: newCompletionQueue(), counted: make(map[tp]int64)}
	log := p.cfg.logger
	r.inst = txncore.NewInstance(txncore.InstanceOptions{
		Options: txncore.Options{
			Brokers: p.cfg.brokers, Group: p.cfg.group, InstanceID: p.cfg.instanceID,
			GroupProtocol: p.cfg.groupProtocol, ClientOpts: p.cfg.clientOpts(), Incarnation: p.incarnation,
		},
		Clock:   p.cfg.clock,
		Recheck: p.hooks.claimRecheck,
		OnClaimRetry: func(err error, in time.Duration) {
			log.Warn("could not claim the transactional ID before joining the group; retrying (processes with this instance ID are ordered by their claims)",
				"group", p.cfg.group, "instance", p.cfg.instanceID, "brokers", p.cfg.brokers, "retry_in", in, "err", err)
		},
	})
	h := &handlers{cfg: &p.cfg, complete: r.comps.push, retries: &p.stats.retries, tracer: p.tracer}
	r.d = sched.New(sched.Config[*item]{
		Shards: 4 * runtime.GOMAXPROCS(0), IdleWorker: p.cfg.idleSession, After: p.cfg.clock.After,
		Attempt: h.attempt, Bind: func(it *item, s *sched.Session[*item]) { it.sess = s }, Active: &p.stats.activeSessions,
	})
	h.stopped = r.d.Stopped
	return r
}

// open creates missing changelog topics and opens the local stores; close
// closes them and stops the workers.
func (r *run) open(ctx context.Context) error {
	ids, err := ensureChangelogs(ctx, r.cfg)
	if err != nil {
		return err
	}
	r.changelogIDs = ids
	if r.cfg.stateDir != "" {
		if r.store, err = statestore.Open(r.cfg.stateDir, r.cfg.stateOpts); err != nil {
			return err
		}
	}
	if r.cfg.dedupeSet {
		if r.marks, err = dedupe.Open(r.cfg.dedupeDir, storeOptions(r.p.dedupeOpts)); err != nil {
			return fmt.Errorf("processor: opening the dedupe store: %w", err)
		}
	}
	return nil
}

func (r *run) close() {
	r.d.Stop()
	if r.store != nil {
		r.store.Close()
	}
	if r.marks != nil {
		r.marks.Close()
	}
}

func (r *run) runLifetime(ctx context.Context) error {
	p := r.p
	l := r.newLifetime(ctx)
	defer l.ps.restores.close()
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
	s, err := r.inst.NewSession(txncore.Options{
		Brokers:            cfg.brokers,
		Group:              cfg.group,
		InstanceID:         cfg.instanceID,
		Topics:             cfg.inputs,
		TransactionTimeout: cfg.txnTimeout,
		SessionTimeout:     cfg.sessionTimeout,
		RebalanceTimeout:   cfg.rebalanceTimeout,
		GroupProtocol:      cfg.groupProtocol,
		Pipeline:           cfg.pipeline,
		ClientOpts:         cfg.clientOpts(),
		ConsumerOpts: append(append(consumerOpts,
			kgo.OnOffsetsFetched(l.group.onOffsetsFetched),
			kgo.OnPartitionsCallbackBlocked(l.group.onRebalanceWanted),
		), keyspaceOpts(l.ps.keyspaces)...),
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
		l.ps.staleAll()
		// The client may have rejoined under a new member ID that no
		// assignment has reported yet (IDs are recorded as offsets are
		// fetched): closed, that member is this process's, and a rebuild
		// must not take it for another process's.
		if member, epoch := s.Client().GroupMetadata(); epoch > 0 {
			r.inst.Held(member)
		}
		if stopped && p.leaveOnStop.Load() {
			closeAndLeave(s, l.cfg.logger)
			return
		}
		s.Close()
	}()
	if p.metrics != nil {
		every := cmp.Or(p.hooks.lagRefresh, lagRefreshInterval)
		refreshWG.Go(func() { l.ends.refresh(refreshCtx, s.Client(), cfg.inputs, every, cfg.logger) })
	}
	if err := checkGroupProtocol(ctx, s, cfg.logger); err != nil {
		return err
	}
	if err := r.inst.Claim(ctx); err != nil && ctx.Err() == nil {
		cfg.logger.Warn("could not initialize the transactional producers before joining; processes with this instance ID are not ordered",
			"group", cfg.group, "instance", cfg.instanceID, "brokers", cfg.brokers, "err", err)
	}
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
func closeAndLeave(s *txncore.Session, log *slog.Logger) {
	member, epoch := s.Client().GroupMetadata()
	ctx, cancel := context.WithTimeout(context.Background(), leaveTimeout)
	defer cancel()
	start := time.Now()
	if err := s.CloseAndLeave(ctx); err != nil {
		log.Warn("could not leave the group on stop; this instance's partitions move to the other instances only when its session times out", "member", member, "err", err)
		return
	}
	if member == "" || epoch <= 0 {
		return // never joined: nothing to leave
	}
	log.Info("left the group on stop; this instance's partitions go to the other instances now", "member", member, "took", time.Since(start).Round(time.Millisecond))
}

// newLifetime builds a lifetime without its client (see connect).
func (r *run) newLifetime(ctx context.Context) *lifetime {
	l := &lifetime{p: r.p, r: r, cfg: r.cfg, ends: newEndOffsets()}
	l.group = newGroupEvents(r.cfg.logger, r.comps.wakePoll)
	l.group.held = r.inst.Held
	var yieldCtx context.Context
	yieldCtx, l.endYield = context.WithCancel(ctx)
	if r.cfg.groupProtocol == GroupProtocolConsumer {
		l.group.yield = func(cbCtx context.Context, cl *kgo.Client) error {
			if e := r.inst.YieldOnLost(yieldCtx, cbCtx, cl); e != nil {
				return e
			}
			return nil
		}
	}
	l.ps = &partitions{cfg: r.cfg, r: r, stats: &r.p.stats, m: r.p.metrics, group: l.group,
		restores: newRestores(ctx, r.cfg), all: make(map[tp]*partition),
		keyspaces: newKeyspaces(r, l.group)}
	l.produceCtx = context.WithoutCancel(ctx)
	return l
}
