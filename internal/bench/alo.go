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

// aloPipeline is the plain at-least-once pipe: poll, handle each record in
// turn, produce; every commit interval flush the producer and then commit
// the polled offsets. Killed between the flush and the next commit, it
// handles those records again on restart and duplicates their outputs.
type aloPipeline struct {
	job Job
	w   *work
	log *slog.Logger
	rt  *requestTimes // nil in tests that build the pipeline bare

	retries atomic.Int64
	// commits has each commit's flush and offset commit.
	commits durations.Recorder

	mu      sync.Mutex
	prodErr error
}

func (a *aloPipeline) counters() Counters {
	c := Counters{Retries: a.retries.Load()}
	c.setCommits(&a.commits)
	a.rt.setCounters(&c)
	return a.w.count(c)
}

func (a *aloPipeline) promise(_ *kgo.Record, err error) {
	if err != nil {
		a.mu.Lock()
		if a.prodErr == nil {
			a.prodErr = err
		}
		a.mu.Unlock()
	}
}

func (a *aloPipeline) run(ctx context.Context) error {
	job := a.job
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(job.Brokers...),
		kgo.ConsumerGroup(job.Group),
		kgo.ConsumeTopics(job.Input),
		kgo.InstanceID(job.InstanceID),
		kgo.SessionTimeout(job.SessionTimeout),
		kgo.DisableAutoCommit(),
		// Commit before giving partitions away, or a rebalance would
		// duplicate even without a crash.
		kgo.BlockRebalanceOnPoll(),
		kgo.DefaultProduceTopic(job.Output),
	}, append(append(job.groupOpts(), job.clientOpts()...), a.rt.opts()...)...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	next := time.Now().Add(job.CommitInterval)
	for {
		pctx, cancel := context.WithDeadline(ctx, next)
		fs := cl.PollRecords(pctx, maxPoll)
		cancel()
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				a.log.Warn("alo-raw: fetch error", "topic", t, "partition", p, "err", err)
			}
		})
		for _, r := range fs.Records() {
			pl, err := verify.Decode(r.Value)
			if err != nil {
				return fmt.Errorf("alo-raw: %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
			}
			if err := a.w.doRetrying(ctx, pl.ID, r.Value, job.RetryInitial, &a.retries); err != nil {
				// Stopping mid-batch: commit nothing, since the polled
				// offsets cover records not handled; the next owner
				// redoes everything since the last commit.
				return nil
			}
			cl.Produce(context.WithoutCancel(ctx), transform(r), a.promise)
		}
		stopping := ctx.Err() != nil
		if stopping || time.Now().After(next) {
			if err := a.commit(context.WithoutCancel(ctx), cl); err != nil {
				return err
			}
			next = time.Now().Add(job.CommitInterval)
		}
		if stopping {
			return nil
		}
	}
}

// commit flushes the outputs, then commits the offsets of every record
// polled so far (all of them handled and produced, as handling is serial).
func (a *aloPipeline) commit(ctx context.Context, cl *kgo.Client) error {
	defer cl.AllowRebalance()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	began := time.Now()
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("alo-raw: flush: %w", err)
	}
	a.mu.Lock()
	perr := a.prodErr
	a.mu.Unlock()
	if perr != nil {
		return fmt.Errorf("alo-raw: produce: %w", perr) // do not commit past a lost output
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		a.log.Warn("alo-raw: commit failed; records will be handled again", "err", err)
		return nil
	}
	a.commits.Record(time.Since(began))
	return nil
}
