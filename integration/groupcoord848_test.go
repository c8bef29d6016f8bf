package integration

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
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
	var resp *kmsg.ConsumerGroupHeartbeatResponse
	for {
		var err error
		resp, err = req.RequestWith(ctx, m.cl)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err == nil {
			break
		}
		// A fresh cluster's first group request creates __consumer_offsets.
		if !kerr.IsRetriable(err) || ctx.Err() != nil {
			t.Fatalf("%s: heartbeat at epoch %d: %v", m.instance, m.epoch, err)
		}
		time.Sleep(100 * time.Millisecond)
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

// TestCoordinator848TxnCommitAtOlderEpoch pins, with raw requests, how a
// transactional offset commit's member epoch is checked under KIP-848
// when the member's epoch moved on because another of its partitions was
// reassigned: a commit sent at the older epoch for a partition the member
// kept. Kafka 4.3.0 and later take it (KIP-1251: the epoch need only be
// at least the partition's assignment epoch), so a transaction that ends
// across such a reassignment commits. Kafka 4.2.0 and kfake
// (v0.0.0-20260918054303-01f206a7e32c) want the member's current epoch and
// refuse it, so there the transaction aborts and its records are redone
// (docs/benchmarks.md's storm figures; why GroupProtocolConsumer recommends 4.3+).
// All refuse the older epoch for the partition that moved away, which is
// KIP-447's fencing of a stale member. On Kafka the expectation follows
// KAFKA_VERSION (unset: broker.sh's cluster default, 4.4.0).
func TestCoordinator848TxnCommitAtOlderEpoch(t *testing.T) {
	kafkatest.ProtocolIndependent(t)
	c := kafkatest.New(t)
	topic := c.CreateTopic(t, "in", 2, nil)
	group := kafkatest.Name(t, "g")
	cl := c.Client(t)

	a := &raw848{cl: cl, group: group, instance: "a", topic: topic}
	a.heartbeat(t) // join
	if !a.waitAssigned(t, 2, 10*time.Second) {
		t.Fatalf("a was never assigned both partitions (has %d)", a.owned())
	}
	older := a.epoch
	b := &raw848{cl: cl, group: group, instance: "b", topic: topic}
	b.heartbeat(t)
	// a gives one partition up and, once it acknowledges that, moves to a
	// newer epoch.
	for deadline := time.Now().Add(10 * time.Second); a.owned() != 1 || a.epoch == older; {
		if time.Now().After(deadline) {
			t.Fatalf("a still owns %d partitions at epoch %d (joined at %d)", a.owned(), a.epoch, older)
		}
		time.Sleep(250 * time.Millisecond)
		a.heartbeat(t)
	}
	kept := a.assigned[0].Partitions[0]
	moved := 1 - kept

	// Each commit is a transaction of its own transactional ID, aborted
	// after the offset commit's answer.
	commit := func(partition, epoch int32) error {
		t.Helper()
		txid := kafkatest.Name(t, "tx")
		txc := c.Client(t, kgo.TransactionalID(txid))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		pid, pepoch, err := txc.ProducerID(ctx)
		if err != nil {
			t.Fatalf("producer ID: %v", err)
		}
		add := kmsg.NewPtrAddOffsetsToTxnRequest()
		add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = txid, pid, pepoch, group
		addResp, err := add.RequestWith(ctx, txc)
		if err == nil {
			err = kerr.ErrorForCode(addResp.ErrorCode)
		}
		if err != nil {
			t.Fatalf("AddOffsetsToTxn: %v", err)
		}
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = txid, group, pid, pepoch
		req.Generation, req.MemberID, req.InstanceID = epoch, a.member, kmsg.StringPtr("a")
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic, rt.TopicID = topic, a.assigned[0].TopicID // by name before v6, by ID from v6
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = partition, 1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, txc)
		if err != nil {
			t.Fatalf("TxnOffsetCommit: %v", err)
		}
		end := kmsg.NewPtrEndTxnRequest()
		end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = txid, pid, pepoch, false
		if endResp, err := end.RequestWith(ctx, txc); err != nil || endResp.ErrorCode != 0 {
			t.Fatalf("EndTxn (abort): %v, code %d", err, endResp.ErrorCode)
		}
		return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
	}

	if err := commit(kept, a.epoch); err != nil {
		t.Fatalf("kept partition %d at the current epoch %d: %v", kept, a.epoch, err)
	}
	errOlder := commit(kept, older)
	t.Logf("kept partition %d at the older epoch %d (now %d): %v", kept, older, a.epoch, errOlder)
	takesOlder := c.Fake == nil && kafkaAtLeast(4, 3)
	switch {
	case takesOlder && errOlder != nil:
		t.Errorf("Kafka %s refused a commit at the older epoch for a kept partition: %v", kafkaVersion(), errOlder)
	case !takesOlder && errOlder == nil:
		t.Errorf("the commit at the older epoch for a kept partition was taken, where Kafka before 4.3 and kfake refuse it: update this test, docs/benchmarks.md's storm section and GroupProtocolConsumer's doc")
	}
	if err := commit(moved, older); err == nil {
		t.Errorf("a commit at the older epoch %d for partition %d, which moved to b, was taken", older, moved)
	} else {
		t.Logf("moved partition %d at the older epoch: %v", moved, err)
	}
}

// kafkaVersion is the Kafka version the real-broker pass runs:
// KAFKA_VERSION, or broker.sh's default for a cluster.
func kafkaVersion() string {
	if v := os.Getenv("KAFKA_VERSION"); v != "" {
		return v
	}
	return "4.4.0"
}

// kafkaAtLeast reports whether kafkaVersion is major.minor or later.
func kafkaAtLeast(major, minor int) bool {
	var ma, mi int
	if _, err := fmt.Sscanf(kafkaVersion(), "%d.%d", &ma, &mi); err != nil {
		return true // not a release number: assume a current build
	}
	return ma > major || ma == major && mi >= minor
}
