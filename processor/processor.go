package processor

import (
	"cmp"
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/onceflow/onceflow/dedupe"
	"github.com/onceflow/onceflow/internal/txncore"
	"github.com/onceflow/onceflow/processor/internal/sched"
)

// Processor consumes input topics read_committed, runs a handler per
// record and commits outputs, dead-letter records and input offsets in one
// Kafka transaction.
type Processor struct {
	cfg config
	ran atomic.Bool
	// leaveOnStop: a clean stop leaves the group (WithLeaveOnStop,
	// LeaveOnStop).
	leaveOnStop atomic.Bool
	// incarnation is Run's start time (Unix ns, wall clock: it is compared
	// with other processes', which an injected clock would not allow), kept
	// across client rebuilds so that a zombie keeps its old one: see
	// txncore.Options.Incarnation.
	incarnation int64

	stats      counters
	metrics    *metrics       // nil without WithMetrics
	tracer     trace.Tracer   // nil without WithTracerProvider
	dedupeOpts dedupe.Options // with defaults, when WithDedupe
	hooks      testHooks      // set only by tests (testHooks)
	health     *healthState
}

// New validates the options and builds a Processor. Nothing is contacted
// until Run.
func New(opts ...Opt) (*Processor, error) {
	cfg := defaults()
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.logger = withJobAttrs(cfg.logger, &cfg)
	if cfg.sessionKey != nil {
		cfg.sessionKey = recoverSessionKey(cfg.sessionKey) // the loop calls it: see PanicError
	}
	p := &Processor{cfg: cfg, hooks: hooksOf(opts), health: newHealthState()}
	if cfg.dedupeSet {
		p.dedupeOpts = cfg.dedupeOptions()
	}
	if cfg.tracerProvider != nil {
		p.tracer = cfg.tracerProvider.Tracer(tracerName)
	}
	p.metrics = newMetrics(cfg.registerer, &p.cfg, &p.stats)
	p.leaveOnStop.Store(cfg.leaveOnStop)
	return p, nil
}

// LeaveOnStop sets whether Run's next clean stop leaves the consumer group
// (see WithLeaveOnStop, whose setting it replaces): true for a stop after
// which this instance does not come back (a scale-down), false for one
// after which it restarts with the same instance ID (a rolling restart).
// Call it from any goroutine, before Run's context is canceled or while
// Run shuts down: the choice is read after the final commit. A process
// that cannot tell the two kinds of stop from its signal (a Kubernetes pod
// gets SIGTERM for both) can be told by a preStop hook, an admin endpoint
// or a signal of its own that calls this (docs/operations.md).
func (p *Processor) LeaveOnStop(leave bool) { p.leaveOnStop.Store(leave) }

// Run first confirms, within WithStartTimeout, that the brokers accept
// its TLS and SASL settings, answer, and have the input, output and
// dead-letter topics, or returns an error wrapping ErrUnauthenticated,
// ErrBrokersUnreachable or ErrTopicNotFound that names what is wrong.
// Then it processes records until ctx is done (or, with WithStopAtEnd,
// until the group has committed the input up to the ends recorded at
// start), finishes in-flight records (bounded by the drain timeout),
// commits what is finished and returns nil. It returns an error wrapping
// ErrFenced if a newer instance took over this instance's identity,
// ErrTopicNotFound if one of those topics is deleted while it runs (after
// the same drain and commit, where the commit can still succeed), and
// other errors only when going on would lose or duplicate records
// (corrupt commit metadata, a record that needs a dead-letter topic when
// none is set, see ErrNoDLQ and ErrHandlerPanic, a state or dedupe store
// that failed, see ErrStore). Transient failures
// (aborted transactions, fenced or timed-out clients, commits of unknown
// outcome) are recovered inside Run.
func (p *Processor) Run(ctx context.Context) error {
	if !p.ran.CompareAndSwap(false, true) {
		return ErrAlreadyRun
	}
	p.health.enter(phaseStarting, "")
	err := p.run(ctx)
	if err != nil {
		p.health.enter(phaseFailed, err.Error())
	} else {
		p.health.enter(phaseStopped, "")
	}
	return err
}

// run is Run after its first call's check.
func (p *Processor) run(ctx context.Context) error {
	// Refused credentials first (checkAccess), then the brokers' answer
	// and the topics (checkStart), within one start timeout.
	start := time.Now()
	sctx, cancel := context.WithTimeout(ctx, p.cfg.startTimeout)
	defer cancel()
	if err := checkAccess(ctx, sctx, &p.cfg); err != nil || ctx.Err() != nil {
		return err
	}
	if err := checkStart(ctx, sctx, &p.cfg, start); err != nil {
		return err
	}
	setGroupSessionTimeout(ctx, &p.cfg)
	ctx, stopWatch := watchTopics(ctx, &p.cfg, cmp.Or(p.hooks.topicWatch, topicWatchInterval))
	return stopWatch(p.process(ctx))
}

// process is Run after its start check, under the topic watch.
func (p *Processor) process(ctx context.Context) error {
	p.incarnation = time.Now().UnixNano()
	if p.cfg.stopAtEnd {
		// A bounded run (stopatend.go): the watcher cancels ctx once
		// the group is done, and Run stops as on any cancel.
		wctx, stop, done, err := startEndWatch(ctx, &p.cfg)
		if err != nil || done {
			return err
		}
		defer stop()
		ctx = wctx
	}
	r := newRun(p)
	defer r.close()
	if err := r.open(ctx); err != nil {
		return err
	}
	log := p.cfg.logger
	var quorum quorumCheck
	for {
		err := r.runLifetime(ctx)
		// An abortable error that reached here (a begin refused, say)
		// left nothing committed either: rebuild rather than stop.
		if c := txncore.ClassOf(err); c == txncore.ClassReset || c == txncore.ClassOutcomeUnknown || c == txncore.ClassAbortable {
			log.Warn("transactional client unusable; rebuilding it and resuming from the committed offsets", "err", err)
			quorum.afterFailure(ctx, &p.cfg)
			p.health.enter(phaseRebuilding, err.Error())
			err = nil // rebuild, unless a newer process takes the ID
			if e := r.inst.YieldToSuccessor(ctx); e != nil {
				err = e
			}
		} else if err == nil {
			return nil
		}
		switch {
		case err == nil:
			p.stats.rebuilds.Add(1)
		case errors.Is(err, ErrFenced):
			p.stats.fenced.Add(1)
			log.Error("fenced: another process holds this instance ID; stopping", "err", err)
			return err
		default:
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stats is a snapshot of the processor's counters.
type Stats struct {
	Consumed     int64 // records taken from fetches (not counting refetches)
	SkippedDone  int64 // records skipped because a committed transaction finished them
	Outputs      int64 // output records in committed transactions
	DeadLettered int64 // dead-letter records in committed transactions
	// Panics counts the dead-letter records of reason "panic" in
	// committed transactions (a part of DeadLettered): records whose
	// handler, or other user code, panicked (see Handler, PanicError).
	Panics     int64
	Rebalances int64 // group rebalances seen (assignments and revocations)
	Retries    int64
	Commits    int64
	// CommitTime is the time spent in commits (the loop's flush, offset
	// commit and EndTxn), for the mean commit round trip.
	CommitTime time.Duration
	// CommitTimeMedian, CommitTimeP99 and CommitTimeMax are the median,
	// 99th percentile and longest of those round trips (the percentiles to
	// about 1%), 0 before the first commit. A record waits at least the
	// round trip of the transaction it lands in, so the median is the
	// floor to set the records' median latency beside (a few slow commits
	// pull the mean up, not the median).
	CommitTimeMedian time.Duration
	CommitTimeP99    time.Duration
	CommitTimeMax    time.Duration

	// Aborts counts aborted transactions; AbortsBy the same by reason:
	// "refused" (the group or the coordinator refused the offset commit
	// or EndTxn: a rebalance, an expelled member), "produce" (a record of
	// it failed), "revoked" (it held work of a partition revoked or lost
	// since), "cascade" (the transaction before it aborted, and its work
	// depended on that one).
	Aborts        int64
	AbortsBy      map[string]int64
	Rebuilds      int64 // clients rebuilt after fencing, timeouts or unknown outcomes
	Reprocessed   int64 // finished records whose work an abort threw away
	Fenced        int64
	StateRestored int64 // changelog records replayed into the state store
	// DuplicatesSkipped counts records of committed transactions that
	// were skipped because their event ID was already processed
	// (WithDedupe).
	DuplicatesSkipped int64
	MarksRestored     int64 // dedupe changelog records replayed into the dedupe store
	// PositionRegressions counts partitions that WithPositionGuard resumed
	// from the position log because the group served an older position.
	PositionRegressions int64
	ActiveSessions      int // sessions with records queued, running or backing off
}

// Stats returns the current counters.
func (p *Processor) Stats() Stats {
	s := Stats{
		Consumed:      p.stats.consumed.Load(),
		SkippedDone:   p.stats.skipped.Load(),
		Outputs:       p.stats.outputs.Load(),
		DeadLettered:  p.stats.dlq.Load(),
		Rebalances:    p.stats.rebalances.Load(),
		Retries:       p.stats.retries.Load(),
		Rebuilds:      p.stats.rebuilds.Load(),
		Reprocessed:   p.stats.reprocessed.Load(),
		Fenced:        p.stats.fenced.Load(),
		StateRestored: p.stats.restored.Load(),

		DuplicatesSkipped: p.stats.dups.Load(),
		MarksRestored:     p.stats.marksRestored.Load(),

		PositionRegressions: p.stats.positionRegressions.Load(),
	}
	s.Panics = p.stats.dlqBy[reasonIndex(reasonPanic)].Load()
	s.AbortsBy = make(map[string]int64, len(abortReasons))
	for i, reason := range abortReasons {
		n := p.stats.abortsBy[i].Load()
		s.Aborts += n
		if n > 0 {
			s.AbortsBy[reason] = n
		}
	}
	s.ActiveSessions = int(p.stats.activeSessions.Load())
	c := p.stats.commits.Summary()
	s.Commits, s.CommitTime, s.CommitTimeMedian, s.CommitTimeP99, s.CommitTimeMax = c.Count, c.Total, c.P50, c.P99, c.Max
	return s
}

// newRun builds the state of a Run call, with what the Processor shares
// with its loop.
func newRun(p *Processor) *runCall {
	cfg := &p.cfg
	r := &runCall{cfg: cfg, obs: observers{&p.stats, p.metrics, p.tracer, p.health}, hooks: &p.hooks, dedupeOpts: &p.dedupeOpts,
		leaveOnStop: &p.leaveOnStop, comps: newCompletionQueue(), counted: make(map[tp]int64)}
	o := cfg.txnOptions()
	o.Incarnation = p.incarnation
	r.inst = txncore.NewInstance(txncore.InstanceOptions{
		Options: o,
		Clock:   cfg.clock,
		Recheck: p.hooks.claimRecheck,
		OnClaimRetry: func(err error, in time.Duration) {
			cfg.logger.Warn("could not claim the transactional ID before joining the group; retrying (processes with this instance ID are ordered by their claims)",
				"group", cfg.group, "instance", cfg.instanceID, "brokers", cfg.brokers, "retry_in", in, "err", err)
		},
	})
	h := &handlers{cfg: cfg, complete: r.comps.push, retries: &p.stats.retries, tracer: p.tracer}
	// 32 shards a core: at 4, the dispatcher and the workers waited on
	// each other's shard locks (about 10% less CPU a record with 32 in
	// BenchmarkDispatchTrackComplete, 2 cores).
	r.pool = sched.New(sched.Config[*item]{
		Shards: 32 * runtime.GOMAXPROCS(0), IdleWorker: cfg.idleSession, After: cfg.clock.After,
		Attempt: h.attempt, Bind: func(it *item, s *sched.Session[*item]) { it.sess = s }, Active: &p.stats.activeSessions,
	})
	h.stopped = r.pool.Stopped
	return r
}
