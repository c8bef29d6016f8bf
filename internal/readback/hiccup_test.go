package readback_test

import (
	"context"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/internal/readback"
)

// The read-back meets what a cluster passes through by itself (issue 45:
// a ListOffsets dial refused during a node fault ended a clean run FAIL).
// Each test reads back every record exactly once, where before it failed.

const hiccupRecords = 30

// seeded starts a 3-broker cluster with a 3-partition topic holding
// hiccupRecords records, and returns it, the topic and the address of
// partition 0's leader.
func seeded(t *testing.T) (*kfake.Cluster, string, string) {
	t.Helper()
	const topic = "out"
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, topic))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic(topic))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range hiccupRecords {
		r := &kgo.Record{Partition: int32(i % 3), Value: []byte(strconv.Itoa(i))}
		require.NoError(t, cl.ProduceSync(ctx, r).FirstErr())
	}
	meta, err := kadm.NewClient(cl).Metadata(ctx, topic)
	require.NoError(t, err)
	p0 := meta.Topics[topic].Partitions[0]
	i := slices.IndexFunc(meta.Brokers, func(b kadm.BrokerDetail) bool { return b.NodeID == p0.Leader })
	require.GreaterOrEqual(t, i, 0)
	b := meta.Brokers[i]
	return c, topic, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
}

// requireAllOnce checks that recs are the seeded records, each once.
func requireAllOnce(t *testing.T, recs []*kgo.Record) {
	t.Helper()
	got := make([]int, 0, len(recs))
	for _, r := range recs {
		n, err := strconv.Atoi(string(r.Value))
		require.NoError(t, err)
		got = append(got, n)
	}
	slices.Sort(got)
	want := make([]int, hiccupRecords)
	for i := range want {
		want[i] = i
	}
	require.Equal(t, want, got)
}

// quick shrinks franz-go's own retries of a request to one, and its
// pauses (a retry's, a metadata refresh's 5 s minimum) to milliseconds: a
// fault then outlasts franz-go's retries within a few requests, as a long
// leader election outlasts the default 20, and the test takes a second.
func quick() []kgo.Opt {
	return []kgo.Opt{
		kgo.RequestRetries(1),
		kgo.RetryBackoffFn(func(int) time.Duration { return 5 * time.Millisecond }),
		kgo.MetadataMinAge(10 * time.Millisecond),
	}
}

// TestReadBackRetriesRefusedDial: partition 0's leader refuses the first
// dials, as a restarting node does while the metadata still names it (the
// other brokers are the seeds: the first refusal is the ListOffsets').
func TestReadBackRetriesRefusedDial(t *testing.T) {
	c, topic, leader := seeded(t)
	seeds := slices.DeleteFunc(c.ListenAddrs(), func(a string) bool { return a == leader })
	var ref kafkatest.Refuser
	ref.Refuse(leader, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs, err := readback.ReadCommittedWith(ctx, seeds, []kgo.Opt{ref.Opt()}, topic)
	require.NoError(t, err)
	require.Equal(t, 4, ref.Refused(leader), "every planned refusal was met")
	requireAllOnce(t, recs)
}

// TestReadBackRetriesMovedLeader: ListOffsets and Fetch are answered
// NOT_LEADER_OR_FOLLOWER for a while, as during a leader election.
func TestReadBackRetriesMovedLeader(t *testing.T) {
	c, topic, _ := seeded(t)
	lists := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.ListOffsets}, Topic: topic, Err: kerr.NotLeaderForPartition, Count: 5})
	fetches := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: topic, Err: kerr.NotLeaderForPartition, Count: 5})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs, err := readback.ReadCommittedWith(ctx, c.ListenAddrs(), quick(), topic)
	require.NoError(t, err)
	require.Equal(t, 5, lists.Hits())
	require.Equal(t, 5, fetches.Hits())
	requireAllOnce(t, recs)
}

// TestReadBackWaitsForUnknownTopic: the brokers answer
// UNKNOWN_TOPIC_OR_PARTITION for the first requests, as brokers do that
// have not learned of a topic yet.
func TestReadBackWaitsForUnknownTopic(t *testing.T) {
	c, topic, _ := seeded(t)
	var hs []*kfake.FaultHandle
	for _, k := range []kmsg.Key{kmsg.Metadata, kmsg.ListOffsets, kmsg.Fetch} {
		hs = append(hs, c.Fault(kfake.Fault{Keys: []kmsg.Key{k}, Topic: topic, Err: kerr.UnknownTopicOrPartition, Count: 3}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs, err := readback.ReadCommittedWith(ctx, c.ListenAddrs(), quick(), topic)
	require.NoError(t, err)
	for i, h := range hs {
		require.Equal(t, 3, h.Hits(), "fault %d", i)
	}
	requireAllOnce(t, recs)
}

// TestReadBackFailsAtOnceOnRefusal: an authorization refusal is no
// hiccup: the read fails at once, saying so, rather than at the deadline.
func TestReadBackFailsAtOnceOnRefusal(t *testing.T) {
	c, topic, _ := seeded(t)
	c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.ListOffsets}, Topic: topic, Err: kerr.TopicAuthorizationFailed, Count: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	_, err := readback.ReadCommittedWith(ctx, c.ListenAddrs(), nil, topic)
	require.ErrorIs(t, err, kerr.TopicAuthorizationFailed)
	require.Less(t, time.Since(start), 10*time.Second, "failed at once, not at the deadline")
}
