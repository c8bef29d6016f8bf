package processor

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

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
