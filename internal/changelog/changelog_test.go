package changelog_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/onceflow/onceflow/internal/changelog"
	"github.com/onceflow/onceflow/internal/kafkatest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// memTarget is a keyspace in memory.
type memTarget struct {
	mu   sync.Mutex
	kv   map[string]string
	next int64
	ok   bool
}

func (m *memTarget) Checkpoint() ([16]byte, int64, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return [16]byte{}, m.next, false, nil
}

func (m *memTarget) Reset() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.kv, m.ok = map[string]string{}, false
	return nil
}

func (m *memTarget) Apply(recs []*kgo.Record, _ [16]byte, next int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range recs {
		m.kv[string(r.Key)] = string(r.Value)
	}
	m.next, m.ok = next, true
	return nil
}

func txnProducer(t *testing.T, c *kafkatest.Cluster, id, topic string) *kgo.Client {
	return c.Client(t, kgo.TransactionalID(kafkatest.Name(t, id)), kgo.DefaultProduceTopic(topic),
		kgo.TransactionTimeout(30*time.Second))
}

// TestRestoreWaitsForOpenTransactions: a zombie's transaction, still open,
// precedes writes that a later owner committed. The last stable offset
// stops before the zombie's writes, but the committed writes after them
// belong to the keyspace: Restore must wait for the zombie's transaction
// to end and include them, not return without them.
func TestRestoreWaitsForOpenTransactions(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		topic := c.CreateTopic(t, "changelog", 1, nil)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()

		zombie := txnProducer(t, c, "zombie", topic)
		require.NoError(t, zombie.BeginTransaction())
		require.NoError(t, zombie.ProduceSync(ctx, &kgo.Record{Key: []byte("k"), Value: []byte("zombie")}).FirstErr())

		owner := txnProducer(t, c, "owner", topic)
		require.NoError(t, owner.BeginTransaction())
		require.NoError(t, owner.ProduceSync(ctx, &kgo.Record{Key: []byte("k"), Value: []byte("committed")}).FirstErr())
		require.NoError(t, owner.EndTransaction(ctx, kgo.TryCommit))

		var tgt memTarget
		done := make(chan error, 1)
		go func() {
			_, err := changelog.Restore(ctx, c.Brokers, nil, topic, 0, &tgt, slog.New(slog.DiscardHandler))
			done <- err
		}()
		select {
		case err := <-done:
			t.Fatalf("Restore returned (%v) while a transaction before committed writes was open: %v", err, tgt.kv)
		case <-time.After(500 * time.Millisecond):
		}
		require.NoError(t, zombie.EndTransaction(ctx, kgo.TryAbort))
		require.NoError(t, <-done)
		require.Equal(t, map[string]string{"k": "committed"}, tgt.kv)
	})
}

// TestRestoreRetriesUnhostedPartition: on a cluster, a changelog created
// just before is in the metadata before its partition leader hosts it, and
// the leader answers ListOffsets with UNKNOWN_TOPIC_OR_PARTITION for a
// while. Restore must ask again, not fail the processor (a worker exited 1
// on the 3-node cluster this way).
func TestRestoreRetriesUnhostedPartition(t *testing.T) {
	if kafkatest.Real() {
		t.Skip("injects ListOffsets errors into the embedded cluster")
	}
	c := kafkatest.New(t)
	topic := c.CreateTopic(t, "changelog", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := c.Client(t, kgo.DefaultProduceTopic(topic))
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Key: []byte("k"), Value: []byte("v")}).FirstErr())

	c.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.ListOffsets}, Topic: topic, Err: kerr.UnknownTopicOrPartition, Count: 4})
	var tgt memTarget
	_, err := changelog.Restore(ctx, c.Brokers, nil, topic, 0, &tgt, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.Equal(t, map[string]string{"k": "v"}, tgt.kv)
}
