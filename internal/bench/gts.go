package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/durations"
	"github.com/onceflow/onceflow/internal/verify"
)

// gtsPipeline is the plain franz-go exactly-once loop: Begin, poll and
// handle each record in turn, produce, End(TryCommit) once the commit
// interval is up. End returning (false, nil) means a rebalance aborted the
// transaction; the session has rewound the consumer, so the loop simply
// carries on.
type gtsPipeline struct {
	job Job
	w   *work
	log *slog.Logger
	rt  *requestTimes // nil in tests that build the pipeline bare

	aborts, retries atomic.Int64
	// commits has each committed transaction's flush and End.
	commits durations.Recorder

	mu sync.Mutex
	// failed is why the open transaction must abort: a failed produce,
	// or a stop in the middle of a poll's records.
	failed error
}

func (g *gtsPipeline) counters() Counters {
	c := Counters{Aborts: g.aborts.Load(), Retries: g.retries.Load()}
	c.setCommits(&g.commits)
	g.rt.setCounters(&c)
	return g.w.count(c)
}

func (g *gtsPipeline) promise(_ *kgo.Record, err error) {
	if err != nil {
		g.fail(err)
	}
}

func (g *gtsPipeline) run(ctx context.Context) error {
	job := g.job
	s, err := kgo.NewGroupTransactSession(append([]kgo.Opt{
		kgo.SeedBrokers(job.Brokers...),
		kgo.ConsumerGroup(job.Group),
		kgo.ConsumeTopics(job.Input),
		kgo.InstanceID(job.InstanceID),
		kgo.TransactionalID(job.Group + "/" + job.InstanceID),
		kgo.TransactionTimeout(10 * time.Second),
		kgo.SessionTimeout(job.SessionTimeout),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.DefaultProduceTopic(job.Output),
	}, append(append(job.groupOpts(), job.clientOpts()...), g.rt.opts()...)...)...)
	if err != nil {
		return err
	}
	defer s.Close()
	for {
		if err := s.Begin(); err != nil {
			return fmt.Errorf("franz-gts: begin: %w", err)
		}
		end := time.Now().Add(job.CommitInterval)
		for ctx.Err() == nil && time.Now().Before(end) {
			if err := g.pollOnce(ctx, s, end); err != nil {
				return err
			}
		}
		if err := g.end(context.WithoutCancel(ctx), s); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

func (g *gtsPipeline) pollOnce(ctx context.Context, s *kgo.GroupTransactSession, end time.Time) error {
	pctx, cancel := context.WithDeadline(ctx, end)
	fs := s.PollRecords(pctx, maxPoll)
	cancel()
	fs.EachError(func(t string, p int32, err error) {
		if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			g.log.Warn("franz-gts: fetch error", "topic", t, "partition", p, "err", err)
		}
	})
	for _, r := range fs.Records() {
		pl, err := verify.Decode(r.Value)
		if err != nil {
			return fmt.Errorf("franz-gts: %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
		}
		if err := g.w.doRetrying(ctx, pl.ID, r.Value, g.job.RetryInitial, &g.retries); err != nil {
			// Stopping mid-batch: abort, or the offsets of the records
			// not handled would be committed with the rest.
			g.fail(err)
			return nil
		}
		s.Produce(context.WithoutCancel(ctx), transform(r), g.promise)
	}
	return nil
}

func (g *gtsPipeline) end(ctx context.Context, s *kgo.GroupTransactSession) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	began := time.Now()
	// Flush here rather than in End, so that a produce failure is known
	// before choosing between commit and abort.
	if err := s.Client().Flush(ctx); err != nil {
		return fmt.Errorf("franz-gts: flush: %w", err)
	}
	g.mu.Lock()
	how, failed := kgo.TryCommit, g.failed
	g.failed = nil
	g.mu.Unlock()
	if failed != nil {
		how = kgo.TryAbort
	}
	committed, err := s.End(ctx, how)
	if err != nil {
		// The outcome is unknown (it may have committed): a baseline
		// stops rather than guess.
		return fmt.Errorf("franz-gts: end: %w", err)
	}
	if committed {
		g.commits.Record(time.Since(began))
	} else {
		g.aborts.Add(1)
	}
	return nil
}

func (g *gtsPipeline) fail(err error) {
	g.mu.Lock()
	if g.failed == nil {
		g.failed = err
	}
	g.mu.Unlock()
}
