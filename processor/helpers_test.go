package processor_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/internal/verify"
	"github.com/onceflow/onceflow/processor"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// pipeline is one test's topics and input.
type pipeline struct {
	c                *kafkatest.Cluster
	in, out, dlq     string
	group            string
	inputs, sessions int
}

func newPipeline(t *testing.T, c *kafkatest.Cluster, partitions int32, inputs, sessions int) *pipeline {
	group := kafkatest.Name(t, "app")
	c.ConsumerGroupTimeouts(t, group, 6*time.Second, 500*time.Millisecond) // opts' WithSessionTimeout
	return &pipeline{
		c:        c,
		in:       c.CreateTopic(t, "in", partitions, nil),
		out:      c.CreateTopic(t, "out", partitions, nil),
		dlq:      c.CreateTopic(t, "dlq", 1, nil),
		group:    group,
		inputs:   inputs,
		sessions: sessions,
	}
}

func sessionKey(id, sessions int) string { return fmt.Sprintf("s%05d", id%sessions) }

// produce writes input IDs [from, to): session id%sessions, in ID order.
func (pl *pipeline) produce(t testing.TB, from, to int) {
	t.Helper()
	cl := pl.c.Client(t, kgo.DefaultProduceTopic(pl.in))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rs := make([]*kgo.Record, 0, to-from)
	for id := from; id < to; id++ {
		v := verify.Append(nil, verify.Payload{ID: uint64(id), Seq: uint64(id / pl.sessions), ProducedAt: time.Now()}, 64)
		rs = append(rs, &kgo.Record{Key: []byte(sessionKey(id, pl.sessions)), Value: v})
	}
	require.NoError(t, cl.ProduceSync(ctx, rs...).FirstErr())
}

// opts returns the options every test starts from.
func (pl *pipeline) opts(instance string, h processor.Handler) []processor.Opt {
	return []processor.Opt{
		processor.WithBrokers(pl.c.Brokers...),
		processor.WithGroup(pl.group),
		processor.WithInstanceID(instance),
		processor.WithInputTopics(pl.in),
		processor.WithOutputTopic(pl.out),
		processor.WithDLQTopic(pl.dlq),
		processor.WithHandler(h),
		processor.WithSessionTimeout(6 * time.Second),
		processor.WithRebalanceTimeout(10 * time.Second),
		processor.WithTransactionTimeout(10 * time.Second),
		processor.WithDrainTimeout(2 * time.Second),
		processor.WithLogger(testLogger(nil)),
		processor.WithGroupProtocol(processor.GroupProtocol(kafkatest.GroupProtocol())),
		processor.WithKgoOpts(pl.c.ClientOpts...), // TLS and SASL on a secured cluster
	}
}

func testLogger(*testing.T) *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv("ONCEFLOW_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// copyHandler emits the input value unchanged to the default output topic.
func copyHandler(_ context.Context, r *kgo.Record, out processor.Emitter) error {
	out.Emit(&kgo.Record{Value: r.Value})
	return nil
}

// running is a processor running in the background.
type running struct {
	p      *processor.Processor
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returned; err is set then
	err    error
}

func start(t *testing.T, opts ...processor.Opt) *running {
	t.Helper()
	p, err := processor.New(opts...)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{p: p, cancel: cancel, done: make(chan struct{})}
	go func() {
		r.err = p.Run(ctx)
		close(r.done)
	}()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop cancels Run and waits for it.
func (r *running) stop(t *testing.T) error {
	r.cancel()
	return r.wait(t, 60*time.Second)
}

// wait waits for Run to return by itself.
func (r *running) wait(t *testing.T, timeout time.Duration) error {
	select {
	case <-r.done:
		return r.err
	case <-time.After(timeout):
		t.Fatalf("Run did not return within %v", timeout)
		return nil
	}
}

// holder returns the member ID holding instance ID in the group ("" if
// none).
func (pl *pipeline) holder(t *testing.T, instance string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, members, err := pl.c.DescribeGroup(ctx, pl.group)
	require.NoError(t, err)
	for _, m := range members {
		if m.InstanceID == instance {
			return m.MemberID
		}
	}
	return ""
}

// read returns the committed outputs and dead letters, verified.
func (pl *pipeline) read(t *testing.T) verify.Report {
	t.Helper()
	ch := verify.NewChecker(pl.inputs)
	// The last commit's markers may still be on their way (on a cluster,
	// to every in-sync replica) after the instances stopped.
	pl.c.Settle(t, 10*time.Second, pl.out, pl.dlq)
	for _, r := range pl.c.ReadCommitted(t, pl.out) {
		observe(ch, r, ch.Output)
	}
	for _, r := range pl.c.ReadCommitted(t, pl.dlq) {
		observe(ch, r, ch.DeadLetter)
	}
	return ch.Report()
}

func observe(ch *verify.Checker, r *kgo.Record, add func(verify.Observed)) {
	p, err := verify.Decode(r.Value)
	if err != nil {
		ch.Malformed()
		return
	}
	add(verify.Observed{Session: string(r.Key), Payload: p})
}

// waitDone waits until every input has an output or a dead letter.
func (pl *pipeline) waitDone(t *testing.T, timeout time.Duration) verify.Report {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		rep := pl.read(t)
		if rep.Lost == 0 {
			return rep
		}
		if time.Now().After(deadline) {
			pl.logPositions(t)
			return rep
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// logPositions logs the group's committed input offsets beside the input's
// end offsets, which tell a loss (committed past records without output)
// from a stall (committed short of the end) when waitDone gives up.
func (pl *pipeline) logPositions(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	committed, err := pl.c.Admin.FetchOffsets(ctx, pl.group)
	if err != nil {
		t.Logf("committed offsets of %s: %v", pl.group, err)
		return
	}
	ends, err := pl.c.Admin.ListEndOffsets(ctx, pl.in)
	if err != nil {
		t.Logf("end offsets of %s: %v", pl.in, err)
		return
	}
	ends.Each(func(e kadm.ListedOffset) {
		o, _ := committed.Lookup(pl.in, e.Partition)
		t.Logf("%s/%d: committed %d (metadata %d bytes), end %d", pl.in, e.Partition, o.At, len(o.Metadata), e.Offset)
	})
}

// refuseProduce answers req as a broker that refuses every partition of it
// with code.
func refuseProduce(req *kmsg.ProduceRequest, code int16) *kmsg.ProduceResponse {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.ErrorCode = code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
