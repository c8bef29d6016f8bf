package processor

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/onceflow/onceflow/internal/kafkatest"
)

// TestGroupSessionTimeout848: under the consumer protocol, whose members
// send no session timeout, WithSessionTimeout becomes the group's
// consumer.session.timeout.ms, and a longer heartbeat interval is lowered
// to a third of it; a shorter one stays. A crashed static member holds its
// instance ID until its session ends: with the broker's 45 s a restart
// stalled (issue 45). Without the option nothing is set.
func TestGroupSessionTimeout848(t *testing.T) {
	c := kafkatest.New(t)
	cl := c.Client(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name              string
		heartbeat         time.Duration // the group's before
		session, wantBeat time.Duration
	}{
		{"long heartbeat lowered", 5 * time.Second, 6 * time.Second, 2 * time.Second},
		{"short heartbeat kept", 500 * time.Millisecond, 6 * time.Second, 500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			group := kafkatest.Name(t, "g")
			c.SetConsumerGroupTimeouts(t, group, 45*time.Second, tc.heartbeat)
			var logs bytes.Buffer
			cfg := defaults()
			cfg.brokers, cfg.group, cfg.groupProtocol = c.Brokers, group, GroupProtocolConsumer
			cfg.kgoOpts = c.ClientOpts
			cfg.logger = slog.New(slog.NewTextHandler(&logs, nil))
			WithSessionTimeout(tc.session).apply(&cfg)
			setGroupSessionTimeout(ctx, &cfg)
			require.NotContains(t, logs.String(), "could not set")
			// Kafka's brokers learn the group's configs from the controller
			// a moment later.
			require.Eventually(t, func() bool {
				s, _ := groupConfigMillis(ctx, cl, group, "consumer.session.timeout.ms")
				h, _ := groupConfigMillis(ctx, cl, group, "consumer.heartbeat.interval.ms")
				return s == tc.session && h == tc.wantBeat
			}, 10*time.Second, 50*time.Millisecond)
		})
	}
	t.Run("not given", func(t *testing.T) {
		group := kafkatest.Name(t, "g")
		c.SetConsumerGroupTimeouts(t, group, 45*time.Second, 5*time.Second)
		cfg := defaults()
		cfg.brokers, cfg.group, cfg.groupProtocol, cfg.logger = c.Brokers, group, GroupProtocolConsumer, slog.New(slog.DiscardHandler)
		cfg.kgoOpts = c.ClientOpts
		require.Eventually(t, func() bool {
			got, _ := groupConfigMillis(ctx, cl, group, "consumer.session.timeout.ms")
			return got == 45*time.Second
		}, 10*time.Second, 50*time.Millisecond)
		setGroupSessionTimeout(ctx, &cfg)
		time.Sleep(time.Second) // what a set would have taken to show
		got, _ := groupConfigMillis(ctx, cl, group, "consumer.session.timeout.ms")
		require.Equal(t, 45*time.Second, got)
	})
}
