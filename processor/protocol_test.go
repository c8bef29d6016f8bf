package processor_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/processor"
)

// TestGroupProtocolUnsupported: asked for the consumer protocol on brokers
// without KIP-848 (kfake pinned to Kafka 3.9), Run fails at start with
// ErrGroupProtocolUnsupported instead of running the classic protocol in
// silence (franz-go's fallback) or hanging.
func TestGroupProtocolUnsupported(t *testing.T) {
	if kafkatest.Real() {
		t.Skip("needs kfake's Kafka 3.9 pin")
	}
	requireRefused(t, kafkatest.New(t, kafkatest.PreKIP890()))
}

// requireRefused runs a processor asked for the consumer protocol on c and
// requires that Run fails with ErrGroupProtocolUnsupported having
// committed nothing.
func requireRefused(t *testing.T, c *kafkatest.Cluster) {
	t.Helper()
	pl := newPipeline(t, c, 1, 10, 1)
	pl.produce(t, 0, pl.inputs)
	r := start(t, append(pl.opts("i1", copyHandler), processor.WithGroupProtocol(processor.GroupProtocolConsumer))...)
	require.ErrorIs(t, r.wait(t, 30*time.Second), processor.ErrGroupProtocolUnsupported)
	require.Empty(t, c.ReadCommitted(t, pl.out), "nothing may commit under the classic protocol")
}

// TestGroupProtocolRefusedByCoordinator: the brokers offer KIP-848's
// heartbeat but the coordinator refuses it (Kafka with the consumer
// protocol left out of group.coordinator.rebalance.protocols answers
// UNSUPPORTED_VERSION); franz-go then joins with the classic protocol, and
// Run must fail rather than go on under it.
func TestGroupProtocolRefusedByCoordinator(t *testing.T) {
	if kafkatest.Real() {
		t.Skip("needs kfake's request control")
	}
	c := kafkatest.New(t)
	c.Fake.ControlKey(int16(kmsg.ConsumerGroupHeartbeat), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake.KeepControl()
		resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		return resp, nil, true
	})
	requireRefused(t, c)
}

// TestGroupProtocolOption: WithGroupProtocol takes the two protocols and
// refuses anything else at New.
func TestGroupProtocolOption(t *testing.T) {
	for _, p := range []processor.GroupProtocol{processor.GroupProtocolClassic, processor.GroupProtocolConsumer} {
		_, err := processor.New(append(validOpts(), processor.WithGroupProtocol(p))...)
		require.NoError(t, err, p)
	}
	_, err := processor.New(append(validOpts(), processor.WithGroupProtocol("eager"))...)
	require.ErrorIs(t, err, processor.ErrInvalidOption)
	require.ErrorContains(t, err, "WithGroupProtocol")
}
