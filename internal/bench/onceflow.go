package bench

import (
	"context"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/verify"
	"github.com/onceflow/onceflow/processor"
)

// onceflowPipeline runs the processor with the simulated handler.
type onceflowPipeline struct {
	p *processor.Processor
	w *work
}

func newOnceflow(job Job, w *work, log *slog.Logger) (*onceflowPipeline, error) {
	handler := func(_ context.Context, rec *kgo.Record, out processor.Emitter) error {
		pl, err := verify.Decode(rec.Value)
		if err != nil {
			return processor.Permanent(err)
		}
		if err := w.do(pl.ID); err != nil {
			return err
		}
		out.Emit(&kgo.Record{Value: rec.Value}) // key: the input's
		return nil
	}
	opts := []processor.Opt{
		processor.WithBrokers(job.Brokers...),
		processor.WithGroup(job.Group),
		processor.WithInstanceID(job.InstanceID),
		processor.WithInputTopics(job.Input),
		processor.WithOutputTopic(job.Output),
		processor.WithDLQTopic(job.DLQ),
		processor.WithHandler(handler),
		processor.WithOrdering(job.Mode.ordering()),
		processor.WithCommitInterval(job.CommitInterval),
		processor.WithSessionTimeout(job.SessionTimeout),
		processor.WithRebalanceTimeout(2 * job.SessionTimeout),
		processor.WithDrainTimeout(min(5*time.Second, job.SessionTimeout/2)),
		processor.WithRetryPolicy(processor.RetryPolicy{
			Initial: job.RetryInitial, Max: max(job.RetryInitial, 10*time.Second),
			Multiplier: 2, Jitter: 0.2, MaxElapsed: time.Minute,
		}),
		processor.WithLogger(log),
	}
	if job.MetadataBytes > 0 {
		opts = append(opts, processor.WithMaxCommitMetadataBytes(job.MetadataBytes))
	}
	if job.IdleSession > 0 {
		opts = append(opts, processor.WithIdleSessionTimeout(job.IdleSession))
	}
	p, err := processor.New(opts...)
	if err != nil {
		return nil, err
	}
	return &onceflowPipeline{p: p, w: w}, nil
}

func (o *onceflowPipeline) run(ctx context.Context) error { return o.p.Run(ctx) }

func (o *onceflowPipeline) counters() Counters {
	s := o.p.Stats()
	return o.w.count(Counters{Commits: s.Commits, Aborts: s.Aborts, Retries: s.Retries, Rebuilds: s.Rebuilds})
}
