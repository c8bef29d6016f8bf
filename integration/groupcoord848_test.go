package integration

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/internal/kafkatest"
)

// TestCoordinator848ParkedStaticMember pins, with raw KIP-848 heartbeats,
// what kafkatest works around on kfake under the consumer protocol: a
// static member that leaves with epoch -2 (what franz-go sends when a
// static member closes) keeps its partitions until its session expires;
// then Kafka hands them to the others. kfake
// (v0.0.0-20260918054303-01f206a7e32c) keeps them parked forever, so the
// test expects that there: when a kfake release hands them on, this test
// fails, and kafkatest.expireParkedStaticMembers can go.
func TestCoordinator848ParkedStaticMember(t *testing.T) {
	kafkatest.ProtocolIndependent(t)
	c := kafkatest.New(t, kafkatest.KeepParkedStaticMembers())
	topic := c.CreateTopic(t, "in", 2, nil)
	group := kafkatest.Name(t, "g")
	const session = 2 * time.Second
	c.SetConsumerGroupTimeouts(t, group, session, 500*time.Millisecond)
	cl := c.Client(t)

	a := &raw848{cl: cl, group: group, instance: "a", topic: topic}
	a.heartbeat(t) // join
	if !a.waitAssigned(t, 2, 10*time.Second) {
		t.Fatalf("a was never assigned both partitions (has %d)", a.owned())
	}
	a.epoch = -2 // static leave
	a.heartbeat(t)

	b := &raw848{cl: cl, group: group, instance: "b", topic: topic}
	b.heartbeat(t)
	got := b.waitAssigned(t, 2, session+6*time.Second)
	switch {
	case c.Fake == nil && !got:
		t.Errorf("Kafka: b holds %d partitions %v after a's session expired, want 2", b.owned(), session+6*time.Second)
	case c.Fake != nil && got:
		t.Errorf("kfake handed a parked static member's partitions on: drop kafkatest.expireParkedStaticMembers")
	}
}

// raw848 is a KIP-848 group member driven by hand.
type raw848 struct {
	cl                     *kgo.Client
	group, instance, topic string
	member                 string
	epoch                  int32
	assigned               []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic
}

func (m *raw848) owned() int {
	n := 0
	for _, tp := range m.assigned {
		n += len(tp.Partitions)
	}
	return n
}

// heartbeat sends one heartbeat (the first one joins), acknowledging what
// it owns.
func (m *raw848) heartbeat(t *testing.T) {
	t.Helper()
	if m.member == "" {
		id := make([]byte, 16)
		_, _ = rand.Read(id)
		m.member = base64.RawURLEncoding.EncodeToString(id)
	}
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch = m.group, m.member, m.epoch
	req.InstanceID = kmsg.StringPtr(m.instance)
	req.RebalanceTimeoutMillis = 10_000
	req.SubscribedTopicNames = []string{m.topic}
	req.ServerAssignor = kmsg.StringPtr("uniform")
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	for _, tp := range m.assigned {
		rt := kmsg.NewConsumerGroupHeartbeatRequestTopic()
		rt.TopicID, rt.Partitions = tp.TopicID, tp.Partitions
		req.Topics = append(req.Topics, rt)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, m.cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		t.Fatalf("%s: heartbeat at epoch %d: %v", m.instance, m.epoch, err)
	}
	if m.epoch < 0 {
		return
	}
	m.epoch = resp.MemberEpoch
	if resp.Assignment != nil {
		m.assigned = resp.Assignment.Topics
	}
}

// waitAssigned heartbeats until the member owns n partitions or within has
// passed.
func (m *raw848) waitAssigned(t *testing.T, n int, within time.Duration) bool {
	t.Helper()
	for deadline := time.Now().Add(within); time.Now().Before(deadline); {
		if m.owned() == n {
			return true
		}
		time.Sleep(250 * time.Millisecond)
		m.heartbeat(t)
	}
	return m.owned() == n
}
