package changelog_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/changelog"
	"github.com/onceflow/onceflow/internal/kafkatest"
)

// TestLast: the last committed record of each partition, past aborted
// transactions that fill more than the first window, and without waiting
// for a transaction still open at the end.
func TestLast(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		topic := c.CreateTopic(t, "positions", 3, nil)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cl := c.Client(t, kgo.TransactionalID(kafkatest.Name(t, "owner")), kgo.DefaultProduceTopic(topic),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(30*time.Second))
		txn := func(end kgo.TransactionEndTry, part int32, value string) {
			t.Helper()
			require.NoError(t, cl.BeginTransaction())
			require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Partition: part, Value: []byte(value)}).FirstErr())
			require.NoError(t, cl.EndTransaction(ctx, end))
		}
		txn(kgo.TryCommit, 1, "a")
		for range 40 { // 80 offsets: past the first window and the second
			txn(kgo.TryAbort, 1, "aborted")
		}
		txn(kgo.TryCommit, 2, "x")
		txn(kgo.TryCommit, 2, "y")

		zombie := c.Client(t, kgo.TransactionalID(kafkatest.Name(t, "zombie")), kgo.DefaultProduceTopic(topic),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(30*time.Second))
		require.NoError(t, zombie.BeginTransaction())
		require.NoError(t, zombie.ProduceSync(ctx, &kgo.Record{Partition: 2, Value: []byte("open")}).FirstErr())

		last, err := changelog.Last(ctx, c.Brokers, nil, topic, []int32{0, 1, 2})
		require.NoError(t, err)
		require.Len(t, last, 3)
		require.Nil(t, last[0], "an empty partition has no last record")
		require.NotNil(t, last[1])
		require.Equal(t, "a", string(last[1].Value), "aborted records are not committed ones")
		require.NotNil(t, last[2])
		require.Equal(t, "y", string(last[2].Value), "an open transaction is neither waited for nor read")
		require.NoError(t, zombie.EndTransaction(ctx, kgo.TryAbort))

		last, err = changelog.Last(ctx, c.Brokers, nil, kafkatest.Name(t, "missing"), []int32{0})
		require.NoError(t, err)
		require.Equal(t, map[int32]*kgo.Record{0: nil}, last, "a missing topic has no records")
	})
}
