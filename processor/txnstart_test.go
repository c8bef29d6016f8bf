package processor_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/processor"
)

// TestTransactionStartRace pins the multi-broker stall of finding 9. A
// replicated cluster answers the first produce of a transaction with
// CONCURRENT_TRANSACTIONS, after a while, when it arrives before the
// coordinator has finished the previous transaction. The embedded cluster
// does the same here to the first produce request of every producer epoch
// (transaction.version=2 bumps the epoch on every commit). A batch of an
// output partition that reaches the broker before the same partition's
// first batch of that epoch was accepted is what a broker refuses with
// OUT_OF_ORDER_SEQUENCE_NUMBER, after which franz-go waited for a metadata
// refresh: none may arrive. And the retry must not wait for franz-go's
// default metadata min age (5 s): it took 45 s to get through this test.
func TestTransactionStartRace(t *testing.T) {
	if kafkatest.Real() {
		t.Skip("injects broker answers into the embedded cluster")
	}
	c := kafkatest.New(t) // the current versions: an epoch per transaction
	pl := newPipeline(t, c, 3, 20_000, 40)
	pl.produce(t, 0, pl.inputs)
	outID := c.Fake.TopicInfo(pl.out).TopicID

	type partState struct {
		epoch     int16
		accepted  bool      // this epoch's first batch (sequence 0) got in
		refusedAt time.Time // when it was refused, if it was
	}
	var (
		mu         sync.Mutex
		parts      = map[int32]*partState{}
		delayed    = map[int16]bool{} // epochs whose first request was refused
		overtaking []string
		slowest    time.Duration // from a refusal to the retry's acceptance
	)
	c.Fake.ControlKey(kmsg.Produce.Int16(), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake.KeepControl()
		req := kr.(*kmsg.ProduceRequest)
		mu.Lock()
		defer mu.Unlock()
		refuse := false
		var firsts []*partState
		for _, rt := range req.Topics {
			if rt.Topic != pl.out && rt.TopicID != outID {
				continue
			}
			for _, rp := range rt.Partitions {
				var b kmsg.RecordBatch
				if err := b.ReadFrom(rp.Records); err != nil {
					continue
				}
				st := parts[rp.Partition]
				if st == nil || b.ProducerEpoch > st.epoch {
					st = &partState{epoch: b.ProducerEpoch}
					parts[rp.Partition] = st
				}
				if b.FirstSequence == 0 {
					firsts = append(firsts, st)
					if !delayed[b.ProducerEpoch] {
						delayed[b.ProducerEpoch] = true
						refuse = true
					}
				} else if !st.accepted {
					overtaking = append(overtaking, fmt.Sprintf("partition %d epoch %d sequence %d", rp.Partition, b.ProducerEpoch, b.FirstSequence))
				}
			}
		}
		if !refuse {
			for _, st := range firsts {
				st.accepted = true
				if !st.refusedAt.IsZero() {
					slowest = max(slowest, time.Since(st.refusedAt))
				}
			}
			return nil, nil, false
		}
		for _, st := range firsts {
			st.refusedAt = time.Now()
		}
		// As the broker does: the coordinator is still busy for a while.
		mu.Unlock()
		c.Fake.SleepControl(func() { time.Sleep(30 * time.Millisecond) })
		mu.Lock()
		return refuseProduce(req, kerr.ConcurrentTransactions.Code), nil, true
	})

	// A millisecond per record spreads the input over tens of transactions.
	slowCopy := func(ctx context.Context, r *kgo.Record, out processor.Emitter) error {
		time.Sleep(time.Millisecond)
		return copyHandler(ctx, r, out)
	}
	opts := append(pl.opts("i1", slowCopy), processor.WithCommitInterval(20*time.Millisecond))
	r := start(t, opts...)
	rep := pl.waitDone(t, 60*time.Second)
	require.NoError(t, r.stop(t))
	require.True(t, rep.ExactlyOnce(), rep.String())
	require.Zero(t, rep.OrderViolations, rep.String())

	mu.Lock()
	defer mu.Unlock()
	require.GreaterOrEqual(t, len(delayed), 5, "too few transactions met a refused first produce for the test to mean anything")
	require.Empty(t, overtaking, "batches sent before their partition's first batch of the transaction was accepted")
	require.Less(t, slowest, 2500*time.Millisecond, "a refused first produce waited this long for its retry")
}
