package kafkatest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/onceflow/onceflow/internal/kafkatest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func produceTxn(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, values []string, end kgo.TransactionEndTry) error {
	t.Helper()
	if err := cl.BeginTransaction(); err != nil {
		return err
	}
	for _, v := range values {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr(); err != nil {
			_ = cl.AbortBufferedRecords(ctx)
			_ = cl.EndTransaction(ctx, kgo.TryAbort)
			return err
		}
	}
	return cl.EndTransaction(ctx, end)
}

func values(rs []*kgo.Record) []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, string(r.Value))
	}
	return out
}

// TestTransactionsVisibility checks the harness against what every later
// test relies on: committed records are visible read_committed, aborted ones
// never are.
func TestTransactionsVisibility(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		topic := c.CreateTopic(t, "txn", 1, nil)
		cl := c.Client(t, kgo.TransactionalID(kafkatest.Name(t, "txid")), kgo.DefaultProduceTopic(topic))

		require.NoError(t, produceTxn(ctx, t, cl, topic, []string{"c1", "c2"}, kgo.TryCommit))
		require.NoError(t, produceTxn(ctx, t, cl, topic, []string{"a1", "a2"}, kgo.TryAbort))
		require.NoError(t, produceTxn(ctx, t, cl, topic, []string{"c3"}, kgo.TryCommit))

		c.AwaitStable(t, topic) // c3's commit marker may still be on its way
		require.Equal(t, []string{"c1", "c2", "c3"}, values(c.ReadCommitted(t, topic)))
	})
}

// TestZombieFenced: a second producer with the same transactional ID fences
// the first; the first's open transaction never becomes visible and it
// cannot commit.
func TestZombieFenced(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		topic := c.CreateTopic(t, "zombie", 1, nil)
		txid := kafkatest.Name(t, "txid")
		old := c.Client(t, kgo.TransactionalID(txid), kgo.DefaultProduceTopic(topic))

		require.NoError(t, old.BeginTransaction())
		require.NoError(t, old.ProduceSync(ctx, kgo.StringRecord("zombie-1")).FirstErr())

		successor := c.Client(t, kgo.TransactionalID(txid), kgo.DefaultProduceTopic(topic))
		require.NoError(t, produceTxn(ctx, t, successor, topic, []string{"new-1"}, kgo.TryCommit))

		// The zombie's produce or commit must fail with a fencing error.
		err := old.ProduceSync(ctx, kgo.StringRecord("zombie-2")).FirstErr()
		if err == nil {
			err = old.EndTransaction(ctx, kgo.TryCommit)
		}
		require.Error(t, err, "zombie must not be able to commit")
		require.True(t, isFencing(err), "want a fencing error, got %v", err)

		c.AwaitStable(t, topic) // new-1's commit marker may still be on its way
		require.Equal(t, []string{"new-1"}, values(c.ReadCommitted(t, topic)))
	})
}

func isFencing(err error) bool {
	for _, e := range []error{kerr.ProducerFenced, kerr.InvalidProducerEpoch, kerr.InvalidTxnState, kerr.TransactionalIDAuthorizationFailed} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
