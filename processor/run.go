package processor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/dedupe"
	"github.com/onceflow/onceflow/internal/txncore"
	"github.com/onceflow/onceflow/processor/internal/sched"
	"github.com/onceflow/onceflow/statestore"
)

// runCall is the state of one Run call that outlives its transactional
// clients (lifetimes): the workers and their completion queue, the local
// stores and the changelogs' topic IDs. The Processor builds it (newRun)
// with what it shares with the loop.
type runCall struct {
	cfg         *config
	obs         observers
	hooks       *testHooks
	dedupeOpts  *dedupe.Options // with defaults, when WithDedupe
	leaveOnStop *atomic.Bool    // read after a clean stop (Processor.LeaveOnStop)

	pool  *sched.Pool[*item]
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

// open creates missing changelog topics and opens the local stores; close
// closes them and stops the workers.
func (r *runCall) open(ctx context.Context) error {
	ids, err := ensureChangelogs(ctx, r.cfg)
	if err != nil {
		return err
	}
	r.changelogIDs = ids
	if r.cfg.stateDir != "" {
		if r.store, err = statestore.Open(r.cfg.stateDir, r.cfg.stateOpts); err != nil {
			return storeError("opening the state store", err)
		}
	}
	if r.cfg.dedupeSet {
		if r.marks, err = dedupe.Open(r.cfg.dedupeDir, storeOptions(*r.dedupeOpts)); err != nil {
			return storeError("opening the dedupe store", err)
		}
	}
	return nil
}

func (r *runCall) close() {
	r.pool.Stop()
	if r.store != nil {
		r.store.Close()
	}
	if r.marks != nil {
		r.marks.Close()
	}
}

// runLifetime runs one transactional client until Run's ctx ends or the
// client cannot go on (its error says whether to rebuild).
func (r *runCall) runLifetime(ctx context.Context) error {
	r.obs.health.enter(phaseJoining, "")
	l := r.newLifetime(ctx)
	defer l.ps.restores.close()
	defer l.endYield()
	cfg := r.cfg
	s, err := r.inst.NewSession(r.sessionOptions(l))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidOption, err)
	}
	closeCommitter := l.connect(sessionClient{s})
	l.member = s.Client().GroupMetadata
	stopRefresh := r.refreshEnds(ctx, l, s)
	stopped := false // a clean stop: Run's ctx done, shutdown not fenced
	defer func() {
		l.endYield()
		stopRefresh()
		closeCommitter()
		r.closeSession(l, s, stopped && r.leaveOnStop.Load())
	}()
	if err := checkGroupProtocol(ctx, s, cfg.logger); err != nil {
		return err
	}
	if err := r.inst.Claim(ctx); err == nil {
		r.obs.health.claimed.Store(true)
	} else if ctx.Err() == nil {
		cfg.logger.Warn("could not initialize the transactional producers before joining; processes with this instance ID are not ordered",
			"group", cfg.group, "instance", cfg.instanceID, "brokers", cfg.brokers, "err", err)
	}
	err = l.run(ctx)
	// Not when the topic watch stopped Run (ErrTopicNotFound): a job
	// whose topic is gone is fixed and restarted, not scaled down.
	stopped = err == nil && ctx.Err() != nil && !errors.Is(context.Cause(ctx), ErrTopicNotFound)
	return err // an end still running finishes before the clients close (closeCommitter)
}

// sessionOptions are the options of l's transactional session: the
// configuration's, the consumer's and the producer's own, and l's group
// callbacks.
func (r *runCall) sessionOptions(l *lifetime) txncore.Options {
	cfg := r.cfg
	// See backpressure. (WithKgoOpts, in ClientOpts, go before it: a
	// fetch bound of the user's is theirs to set on purpose, the
	// processor's own options are appended after.)
	consumerOpts := []kgo.Opt{kgo.FetchMaxPartitionBytes(inputFetchBytes)}
	var producerOpts []kgo.Opt
	if topics := cfg.changelogTopics(); len(topics) > 0 {
		producerOpts = append(producerOpts, kgo.RecordPartitioner(changelogPartitioner{topics, kgo.StickyKeyPartitioner(nil)}))
	}
	if r.obs.m != nil {
		// kprom registers the client's metrics when the client is
		// created and unregisters them when it closes, so a rebuilt
		// client takes over the same series. The group member's
		// client: its fetches, and its requests to the group.
		consumerOpts = append(consumerOpts, kgo.WithHooks(r.obs.m.kprom))
	}
	if cfg.groupProtocol == GroupProtocolConsumer {
		consumerOpts = append(consumerOpts, kgo.WithHooks(classicJoinGuard{l.group}))
	}
	o := cfg.txnOptions()
	o.ConsumerOpts = append(append(consumerOpts,
		kgo.OnOffsetsFetched(l.group.onOffsetsFetched),
		kgo.OnPartitionsCallbackBlocked(l.group.onRebalanceWanted),
	), keyspaceOpts(l.ps.keyspaces)...)
	o.ProducerOpts = producerOpts
	o.OnRevoked, o.OnLost = l.group.onRevoked, l.group.onLost
	return o
}

// refreshEnds starts listing the inputs' end offsets for the lag gauge,
// with metrics on; stop ends it and waits.
func (r *runCall) refreshEnds(ctx context.Context, l *lifetime, s *txncore.Session) (stop func()) {
	if r.obs.m == nil {
		return func() {}
	}
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	every := cmp.Or(r.hooks.lagRefresh, lagRefreshInterval)
	wg.Go(func() { l.ends.refresh(rctx, s.Client(), r.cfg.inputs, every, r.cfg.logger) })
	return func() {
		cancel()
		wg.Wait()
	}
}

// closeSession closes a lifetime's session once its commits are over,
// leaving the group if leave.
func (r *runCall) closeSession(l *lifetime, s *txncore.Session, leave bool) {
	l.ps.staleAll()
	// The client may have rejoined under a new member ID that no
	// assignment has reported yet (IDs are recorded as offsets are
	// fetched): closed, that member is this process's, and a rebuild must
	// not take it for another process's.
	if member, epoch := s.Client().GroupMetadata(); epoch > 0 {
		r.inst.Held(member)
	}
	if leave {
		closeAndLeave(s, r.cfg.logger)
		return
	}
	s.Close()
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
func (r *runCall) newLifetime(ctx context.Context) *lifetime {
	l := &lifetime{cfg: r.cfg, obs: r.obs, hooks: r.hooks, inst: r.inst, comps: r.comps, ends: newEndOffsets()}
	l.group = newGroupEvents(r.cfg.logger, r.comps.wakePoll)
	l.group.held = r.inst.Held
	l.group.health = r.obs.health
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
	l.ps = &partitions{cfg: r.cfg, pool: r.pool, comps: r.comps, gen: &r.gen, counted: r.counted,
		stats: r.obs.stats, m: r.obs.m, group: l.group, restores: newRestores(ctx, r.cfg), all: make(map[tp]*partition),
		keyspaces: r.keyspaces(l.group)}
	l.produceCtx = context.WithoutCancel(ctx)
	return l
}

// keyspaces lists a lifetime's keyspaces, in the order their writes go
// into a transaction.
func (r *runCall) keyspaces(group *groupEvents) []keyspace {
	cfg, stats := r.cfg, r.obs.stats
	var out []keyspace
	if r.store != nil {
		out = append(out, &stateKeyspace{store: r.store, group: cfg.group, ids: r.changelogIDs,
			restored: &stats.restored, restoreHook: r.hooks.restoreApply})
	}
	if r.marks != nil {
		out = append(out, &dedupeKeyspace{store: r.marks, cfg: cfg, opts: r.dedupeOpts, ids: r.changelogIDs,
			restored: &stats.marksRestored})
	}
	if cfg.positionGuard {
		out = append(out, &positionLog{cfg: cfg, group: group, regressions: &stats.positionRegressions})
	}
	return out
}
