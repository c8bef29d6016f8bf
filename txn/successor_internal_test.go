package txn

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/internal/kafkatest"
)

// TestYieldToSuccessor848: before a rebuild under KIP-848, a process whose
// member expired gives a newer process waiting for its instance ID the
// time to take it, and stops if it does (integration's TestZombie under
// the consumer protocol once saw the older process win the free ID and the
// newest one stop). Raw KIP-848 joins stand for the other processes; each
// group keeps a member of another instance so that it is described.
func TestYieldToSuccessor848(t *testing.T) {
	// A static member's leave (epoch -2) stays a leave here: the
	// processor's tests make it a full one on kfake (see kafkatest).
	c := kafkatest.New(t, kafkatest.KeepParkedStaticMembers())
	topic := c.CreateTopic(t, "in", 1, nil)
	cl := c.Client(t)
	const grace = 3 * time.Second
	for _, tc := range []struct {
		name     string
		holder   bool          // a member other than ours holds the ID from the start
		ourHeld  bool          // our earlier member still holds it
		ourLeft  bool          // our earlier member left as a static member (closed)
		takeAt   time.Duration // >0: a newer member takes the free ID then
		protocol GroupProtocol
		fenced   bool
		minWait  time.Duration // Yield returns no sooner
		maxWait  time.Duration // and no later
	}{
		{name: "our earlier member holds it", ourHeld: true, protocol: GroupProtocolConsumer, maxWait: grace / 2},
		// A rebuild closes the old client first: Kafka keeps a static
		// member that left until its session expires, so the rebuild
		// does not wait.
		{name: "our earlier member left", ourLeft: true, protocol: GroupProtocolConsumer, maxWait: grace / 2},
		{name: "another member holds it", holder: true, protocol: GroupProtocolConsumer, fenced: true, maxWait: grace / 2},
		{name: "a newer process takes the free ID", takeAt: time.Second, protocol: GroupProtocolConsumer, fenced: true, minWait: time.Second, maxWait: grace},
		{name: "nobody comes", protocol: GroupProtocolConsumer, minWait: grace, maxWait: 3 * grace},
		{name: "classic protocol", holder: true, protocol: GroupProtocolClassic, maxWait: grace / 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			group := kafkatest.Name(t, "g")
			join848(t, cl, group, "other", topic)
			ours := []string{"expired-member"}
			switch {
			case tc.ourHeld:
				ours = append(ours, join848(t, cl, group, "i", topic))
			case tc.ourLeft:
				m := join848(t, cl, group, "i", topic)
				heartbeat848(t, cl, group, "i", topic, m, -2)
				ours = append(ours, m)
			case tc.holder:
				join848(t, cl, group, "i", topic)
			case tc.takeAt > 0:
				joined := make(chan struct{})
				defer func() { <-joined }()
				time.AfterFunc(tc.takeAt, func() { join848(t, cl, group, "i", topic); close(joined) })
			}
			cfg := Config{Brokers: c.Brokers, Group: group, InstanceID: "i", GroupProtocol: tc.protocol}
			start := time.Now()
			e := YieldToSuccessor(context.Background(), cfg, ours, grace, time.After)
			took := time.Since(start)
			if fenced := e != nil && errors.Is(e, ErrFenced); fenced != tc.fenced || (e != nil && !fenced) {
				t.Fatalf("YieldToSuccessor: %v, want fenced=%v", e, tc.fenced)
			}
			if took < tc.minWait || took > tc.maxWait {
				t.Errorf("YieldToSuccessor returned after %v, want %v to %v", took.Round(time.Millisecond), tc.minWait, tc.maxWait)
			}
		})
	}
}

// join848 joins group with a raw KIP-848 heartbeat as a static member of
// instance and returns its member ID. It sends no more heartbeats: the
// member stays for the group's session timeout (45s by default).
func join848(t *testing.T, cl *kgo.Client, group, instance, topic string) string {
	id := make([]byte, 16)
	_, _ = rand.Read(id)
	member := base64.RawURLEncoding.EncodeToString(id)
	heartbeat848(t, cl, group, instance, topic, member, 0)
	return member
}

// heartbeat848 sends one raw KIP-848 heartbeat at epoch (0 joins, -2 is a
// static member's leave).
func heartbeat848(t *testing.T, cl *kgo.Client, group, instance, topic, member string, epoch int32) {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch = group, member, epoch
	req.InstanceID = kmsg.StringPtr(instance)
	req.RebalanceTimeoutMillis = 10_000
	req.SubscribedTopicNames = []string{topic}
	req.ServerAssignor = kmsg.StringPtr("uniform")
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		resp, err := req.RequestWith(ctx, cl)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err == nil {
			return
		}
		// A fresh cluster creates __consumer_offsets on the first request.
		if !kerr.IsRetriable(err) || ctx.Err() != nil {
			t.Errorf("%s: heartbeat at epoch %d to %s: %v", instance, epoch, group, err)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}
