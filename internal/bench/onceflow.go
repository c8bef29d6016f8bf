package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/verify"
	"github.com/onceflow/onceflow/processor"
)

// onceflowPipeline runs the processor with the simulated handler.
type onceflowPipeline struct {
	p   *processor.Processor
	w   *work
	obs *observability
	rt  *requestTimes
}

func newOnceflow(job Job, w *work, log *slog.Logger) (*onceflowPipeline, error) {
	handler := func(ctx context.Context, rec *kgo.Record, out processor.Emitter) error {
		pl, err := verify.Decode(rec.Value)
		if err != nil {
			return processor.Permanent(err)
		}
		if err := w.do(pl.ID, rec.Value); err != nil {
			return err
		}
		if job.Stateful {
			if err := countInState(ctx, rec, pl.Seq); err != nil {
				return err
			}
		}
		out.Emit(&kgo.Record{Value: rec.Value}) // key: the input's
		return nil
	}
	opts := []processor.Opt{
		processor.WithBrokers(job.Brokers...),
		processor.WithKgoOpts(job.clientOpts()...),
		processor.WithGroup(job.Group),
		processor.WithInstanceID(job.InstanceID),
		processor.WithInputTopics(job.Input),
		processor.WithOutputTopic(job.Output),
		processor.WithDLQTopic(job.DLQ),
		processor.WithHandler(handler),
		processor.WithOrdering(job.Mode.ordering()),
		processor.WithCommitInterval(job.CommitInterval),
		processor.WithSessionTimeout(job.SessionTimeout),
		processor.WithGroupProtocol(job.protocol()),
		processor.WithRebalanceTimeout(2 * job.SessionTimeout),
		processor.WithDrainTimeout(min(5*time.Second, job.SessionTimeout/2)),
		processor.WithRetryPolicy(processor.RetryPolicy{
			Initial: job.RetryInitial, Max: max(job.RetryInitial, 10*time.Second),
			Multiplier: 2, Jitter: 0.2, MaxElapsed: time.Minute,
		}),
		processor.WithLogger(log),
		processor.WithClientLogLevel(job.ClientLogLevel),
	}
	if job.MetadataBytes > 0 {
		opts = append(opts, processor.WithMaxCommitMetadataBytes(job.MetadataBytes))
	}
	switch {
	case job.Mode.fixedOn():
		opts = append(opts, processor.WithMinCommitInterval(job.CommitInterval))
	case job.MinCommitInterval > 0:
		opts = append(opts, processor.WithMinCommitInterval(job.MinCommitInterval))
	}
	if job.Pipeline > 0 {
		opts = append(opts, processor.WithTransactionPipeline(job.Pipeline))
	}
	if job.IdleSession > 0 {
		opts = append(opts, processor.WithIdleSessionTimeout(job.IdleSession))
	}
	if job.Stateful {
		if job.StateDir == "" {
			return nil, errors.New("bench: a stateful job needs a state directory")
		}
		if err := os.MkdirAll(job.StateDir, 0o755); err != nil {
			return nil, err
		}
		opts = append(opts, processor.WithStateStore(job.StateDir, nil))
	}
	if job.DedupeDir != "" {
		opts = append(opts, processor.WithDedupe(job.DedupeDir, nil))
	}
	if job.Mode.guardOn() {
		opts = append(opts, processor.WithPositionGuard())
	}
	obs := newObservability(job)
	rt := newRequestTimes()
	opts = append(opts, processor.WithKgoOpts(kgo.WithHooks(rt)))
	p, err := processor.New(append(opts, obs.opts...)...)
	if err != nil {
		return nil, err
	}
	return &onceflowPipeline{p: p, w: w, obs: obs, rt: rt}, nil
}

func (o *onceflowPipeline) run(ctx context.Context) error { return o.obs.run(ctx, o.p.Run) }

func (o *onceflowPipeline) counters() Counters {
	s := o.p.Stats()
	return o.w.count(Counters{Commits: s.Commits, CommitNanos: int64(s.CommitTime),
		CommitP50: int64(s.CommitTimeMedian), CommitP99: int64(s.CommitTimeP99), CommitMax: int64(s.CommitTimeMax),
		Aborts: s.Aborts, Retries: s.Retries, Rebuilds: s.Rebuilds, Spans: o.obs.spans.Load(), DupsSkipped: s.DuplicatesSkipped,
		Requests: o.rt.summary(), RequestCount: o.rt.count.Load(), RequestBytes: o.rt.bytes.Load()})
}

// stateOutOfStep starts the error of a record whose session counter is not
// its position in the session: the state lost, doubled or kept an aborted
// write. Such records are dead-lettered, and the verdict looks for it.
const stateOutOfStep = "state out of step"

// countSuffix makes a session's counter key: the record key + "/count".
const countSuffix = "/count"

// countInState is the stateful handler's work, as processor's state tests
// do it: the session's counter (8 bytes, big-endian) must equal the
// record's Seq, and is then incremented.
func countInState(ctx context.Context, rec *kgo.Record, seq uint64) error {
	st := processor.StateFrom(ctx)
	if st == nil {
		return processor.Permanent(errors.New("bench: stateful handler without a state store"))
	}
	key := append(append([]byte{}, rec.Key...), countSuffix...)
	v, ok, err := st.Get(key)
	if err != nil {
		return err
	}
	var n uint64
	if ok {
		if len(v) != 8 {
			return processor.Permanent(fmt.Errorf("%s: session %s counter is %d bytes", stateOutOfStep, rec.Key, len(v)))
		}
		n = binary.BigEndian.Uint64(v)
	}
	if n != seq {
		return processor.Permanent(fmt.Errorf("%s: session %s count %d, record seq %d", stateOutOfStep, rec.Key, n, seq))
	}
	st.Set(key, binary.BigEndian.AppendUint64(nil, n+1))
	return nil
}

// protocol is j.GroupProtocol for onceflow modes.
func (j Job) protocol() processor.GroupProtocol {
	if j.GroupProtocol == "consumer" {
		return processor.GroupProtocolConsumer
	}
	return processor.GroupProtocolClassic
}
