package processor_test

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/processor"
)

// TestQuorumLost: the output topic's partitions cannot meet their
// min.insync.replicas for a while, as when two of three brokers are down:
// the brokers refuse its records with NOT_ENOUGH_REPLICAS, which franz-go
// retries without a word. The job commits nothing partial, names the
// cause once rather than per transaction, and resumes when the quorum is
// back, exactly once. On kfake, which keeps every replica in sync and
// does not enforce the setting: min.insync.replicas goes above the
// replication factor (what the job's check reads), and the produces are
// refused as Kafka would. Kafka 4.4 itself does not refuse a setting
// above the replication factor: there a quorum is lost by stopping nodes.
func TestQuorumLost(t *testing.T) {
	if kafkatest.Real() {
		t.Skip("stands in for two of three nodes down on kfake; Kafka 4.4 enforces no min.insync.replicas above the replication factor")
	}
	c := kafkatest.New(t)
	pl := newPipeline(t, c, 2, 2000, 40)
	var refusing atomic.Bool
	var refused atomic.Int64
	outID := c.Fake.TopicInfo(pl.out).TopicID
	c.Fake.ControlKey(kmsg.Produce.Int16(), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake.KeepControl()
		req := kr.(*kmsg.ProduceRequest)
		touches := false
		for _, rt := range req.Topics {
			touches = touches || rt.Topic == pl.out || rt.TopicID == outID
		}
		if !refusing.Load() || !touches {
			return nil, nil, false
		}
		refused.Add(1)
		return refuseProduce(req, kerr.NotEnoughReplicas.Code), nil, true
	})
	setMinISR := func(v *string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		op := kadm.SetConfig
		if v == nil {
			op = kadm.DeleteConfig
		}
		rs, err := c.Admin.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: op, Name: "min.insync.replicas", Value: v}}, pl.out)
		require.NoError(t, err)
		for _, r := range rs {
			require.NoError(t, r.Err)
		}
	}

	var logs kafkatest.SyncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	r := start(t, append(pl.opts("i1", copyHandler), processor.WithLogger(log), processor.WithTransactionTimeout(3*time.Second))...)
	pl.produce(t, 0, pl.inputs/2)
	require.Eventually(t, func() bool { return pl.read(t).Outputs > 0 }, 30*time.Second, 50*time.Millisecond)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tds, err := c.Admin.ListTopics(ctx, pl.out)
	require.NoError(t, err)
	unreachable := strconv.Itoa(len(tds[pl.out].Partitions[0].Replicas) + 1)
	setMinISR(&unreachable)
	refusing.Store(true)
	pl.produce(t, pl.inputs/2, pl.inputs)
	time.Sleep(12 * time.Second) // four transaction timeouts
	mid := pl.read(t)
	require.Zero(t, mid.Duplicates, mid.String())
	require.Zero(t, mid.OrderViolations, mid.String())
	require.Less(t, mid.Outputs, pl.inputs, "the output was stored while its quorum was lost")
	setMinISR(nil)
	refusing.Store(false)

	rep := pl.waitDone(t, 90*time.Second)
	require.NoError(t, r.stop(t))
	require.True(t, rep.ExactlyOnce(), rep.String())
	require.Equal(t, pl.inputs, rep.Outputs)
	out := logs.String()
	require.Equal(t, 1, strings.Count(out, "NOT_ENOUGH_REPLICAS"), "the cause named once:\n%s", out)
	require.Contains(t, out, pl.out+"/0 (", "the partitions named:\n%s", out)
	require.Positive(t, refused.Load())
}
