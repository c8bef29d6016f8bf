package readback

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestResetFailsTheRead: a fetch answered OFFSET_OUT_OF_RANGE mid-way sends
// franz-go back to the start of the partition. The read must fail, naming
// the reset, and not go on to count the records it reads again: a clean
// output must never be judged duplicated (issue 42 asked whether the
// read-back could count 280,523 duplicates so; it cannot).
func TestResetFailsTheRead(t *testing.T) {
	const topic, n = "out", 50
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic))
	require.NoError(t, err)
	defer c.Close()
	brokers := c.ListenAddrs()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range n {
		// One batch each: a fetch of one batch at a time gets mid-way.
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr())
	}

	var resets atomic.Int32
	c.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kr.(*kmsg.FetchRequest)
		if resets.Load() > 0 || len(req.Topics) == 0 || req.Topics[0].Partitions[0].FetchOffset < n/2 {
			return nil, nil, false
		}
		resets.Add(1)
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewFetchResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewFetchResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, kerr.OffsetOutOfRange.Code
				sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})

	recs, err := ReadCommittedWith(ctx, brokers, []kgo.Opt{kgo.FetchMaxPartitionBytes(1)}, topic)
	require.Equal(t, int32(1), resets.Load(), "the fetch was answered out of range once")
	var loss *kgo.ErrDataLoss
	require.ErrorAs(t, err, &loss)
	require.ErrorContains(t, err, "readback: fetching out/0")
	for i, r := range recs {
		require.Equal(t, int64(i), r.Offset, "no record twice before the read failed")
	}
}
