package kafkatest

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
)

// Join848 joins group with a raw KIP-848 heartbeat as a static member of
// instance, subscribed to topic, and returns its member ID. It sends no
// more heartbeats: the member stays for the group's session timeout (45s
// by default).
func Join848(t testing.TB, cl *kgo.Client, group, instance, topic string) string {
	id := make([]byte, 16)
	_, _ = rand.Read(id)
	member := base64.RawURLEncoding.EncodeToString(id)
	Heartbeat848(t, cl, group, instance, topic, member, 0)
	return member
}

// Heartbeat848 sends one raw KIP-848 heartbeat at epoch (0 joins, -2 is a
// static member's leave), retried while refused for a retriable reason or
// because another member holds the instance ID.
func Heartbeat848(t testing.TB, cl *kgo.Client, group, instance, topic, member string, epoch int32) {
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
		// A fresh cluster creates __consumer_offsets on the first
		// request; a held instance ID is free once its member's session
		// ends (a join timed for then may come a little early).
		if !(kerr.IsRetriable(err) || errors.Is(err, kerr.UnreleasedInstanceID)) || ctx.Err() != nil {
			t.Errorf("%s: heartbeat at epoch %d to %s: %v", instance, epoch, group, err)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}
