package processor

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/onceflow/onceflow/internal/kafkatest"
)

// TestCheckTopicsGone: the checks for the loop's fetch and produce error
// paths (see checkTopicsGone): topicGone picks the errors of a missing
// topic, and checkTopicsGone confirms with the brokers, returning
// ErrTopicNotFound only for a topic that stays missing, and nil when the
// brokers cannot tell.
func TestCheckTopicsGone(t *testing.T) {
	kafkatest.ProtocolIndependent(t)
	require.True(t, topicGone(kerr.UnknownTopicOrPartition))
	require.True(t, topicGone(fmt.Errorf("produce: %w", kerr.UnknownTopicID)))
	require.False(t, topicGone(kerr.NotLeaderForPartition))
	require.False(t, topicGone(nil))

	c := kafkatest.New(t)
	in := c.CreateTopic(t, "in", 1, nil)
	out := c.CreateTopic(t, "out", 1, nil)
	cfg := defaults()
	cfg.brokers, cfg.inputs, cfg.output = c.Brokers, []string{in}, out
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, checkTopicsGone(ctx, &cfg, in, out))

	start := time.Now()
	err := checkTopicsGone(ctx, &cfg, in, "gone-topic")
	require.ErrorIs(t, err, ErrTopicNotFound)
	require.EqualError(t, err, "processor: topic not found: topic gone-topic on brokers "+strings.Join(cfg.brokers, ","))
	require.GreaterOrEqual(t, time.Since(start), topicGoneConfirm-time.Second, "asked again before confirming")

	_, err = c.Admin.DeleteTopics(ctx, out)
	require.NoError(t, err)
	// A real cluster's brokers learn of the deletion over a few seconds;
	// while one still lists the topic, the check rightly says nothing.
	require.Eventually(t, func() bool {
		td, err := c.Admin.ListTopics(ctx, out)
		return err == nil && !td.Has(out)
	}, 30*time.Second, 100*time.Millisecond, "the deletion of %s never showed", out)
	require.ErrorContains(t, checkTopicsGone(ctx, &cfg, in, out), "output topic "+out+" (WithOutputTopic)")

	cfg.brokers = []string{"127.0.0.1:1"}
	require.NoError(t, checkTopicsGone(ctx, &cfg, "gone-topic"), "unreachable brokers cannot tell")
}

// TestTopicWatchAsksLittle: the watch asks whether a topic exists without
// a Metadata request, which is answered with every partition of the topics
// it names (and which franz-go keeps): one partition per topic answered.
// Brokers older than Kafka 3.8, without DescribeTopicPartitions, are asked
// with Metadata.
func TestTopicWatchAsksLittle(t *testing.T) {
	kafkatest.ProtocolIndependent(t)
	for _, tc := range []struct {
		name     string
		max      *kversion.Versions
		metadata bool
	}{
		{"kafka 4", nil, false},
		{"kafka 3.7", kversion.V3_7_0(), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var opts []kfake.Opt
			if tc.max != nil {
				opts = append(opts, kfake.MaxVersions(tc.max))
			}
			c := kafkatest.New(t, kafkatest.FakeOpts(opts...))
			if c.Fake == nil {
				t.Skip("counts kfake's requests")
			}
			in := c.CreateTopic(t, "in", 64, nil)
			var metadata, partitions atomic.Int64
			c.Fake.ControlKey(kmsg.Metadata.Int16(), func(kr kmsg.Request) (kmsg.Response, error, bool) {
				c.Fake.KeepControl()
				if len(kr.(*kmsg.MetadataRequest).Topics) > 0 {
					metadata.Add(1)
				}
				return nil, nil, false
			})
			c.Fake.ControlKey(kmsg.DescribeTopicPartitions.Int16(), func(kr kmsg.Request) (kmsg.Response, error, bool) {
				c.Fake.KeepControl()
				partitions.Add(int64(kr.(*kmsg.DescribeTopicPartitionsRequest).ResponsePartitionLimit))
				return nil, nil, false
			})
			cfg := defaults()
			cfg.brokers, cfg.inputs, cfg.output = c.Brokers, []string{in}, in
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			require.NoError(t, checkTopicsGone(ctx, &cfg, in))
			require.ErrorIs(t, checkTopicsGone(ctx, &cfg, in, "gone-topic"), ErrTopicNotFound)
			if tc.metadata {
				require.Positive(t, metadata.Load(), "an old broker is asked with Metadata")
				return
			}
			require.Zero(t, metadata.Load(), "Metadata requests naming topics")
			require.Positive(t, partitions.Load())
		})
	}
}
