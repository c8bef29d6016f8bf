package processor_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/processor"
)

// TestRebalanceJoinLeave: a second instance joins mid-run and later leaves
// (static member: its partitions return after the session timeout) while
// input keeps arriving; exactly-once and per-session order hold.
func TestRebalanceJoinLeave(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		pl := newPipeline(t, c, 4, 8000, 300)
		slow := func(ctx context.Context, r *kgo.Record, out processor.Emitter) error {
			time.Sleep(100 * time.Microsecond)
			return copyHandler(ctx, r, out)
		}
		pl.produce(t, 0, 2000)
		a := start(t, pl.opts("i1", slow)...)
		pl.waitOutputs(t, 500, 30*time.Second)

		b := start(t, pl.opts("i2", slow)...)
		pl.produce(t, 2000, 5000)
		pl.waitOutputs(t, 4000, 60*time.Second)
		require.NoError(t, b.stop(t))
		pl.produce(t, 5000, pl.inputs)

		pl.waitDone(t, 90*time.Second)
		require.NoError(t, a.stop(t))
		rep := pl.read(t)
		require.True(t, rep.ExactlyOnce(), rep.String())
		require.Equal(t, pl.inputs, rep.Outputs)
		sa, sb := a.p.Stats(), b.p.Stats()
		t.Logf("reprocessed after rebalances: a=%d b=%d; aborts a=%d b=%d; commits a=%d b=%d",
			sa.Reprocessed, sb.Reprocessed, sa.Aborts, sb.Aborts, sa.Commits, sb.Commits)
	})
}

// TestAbortedTransactionsInvisible: offset commits refused with an abortable
// error make the processor abort and redo; nothing of the aborted
// transactions becomes visible.
func TestAbortedTransactionsInvisible(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		if c.Fake == nil {
			t.Skip("needs kfake fault injection")
		}
		pl := newPipeline(t, c, 2, 3000, 100)
		pl.produce(t, 0, pl.inputs)
		c.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.TxnOffsetCommit}, Err: kerr.UnknownServerError, Count: 3})
		r := start(t, pl.opts("i1", copyHandler)...)
		pl.waitDone(t, 60*time.Second)
		require.NoError(t, r.stop(t))
		rep := pl.read(t)
		require.True(t, rep.ExactlyOnce(), rep.String())
		require.Equal(t, pl.inputs, rep.Outputs)
		require.Positive(t, r.p.Stats().Aborts, "the fault must have aborted transactions")
	})
}

// TestOutcomeUnknown: EndTxn is applied by the broker but answered with an
// error, so the client cannot know whether it committed. The processor must
// neither duplicate (assume aborted) nor lose (assume committed).
func TestOutcomeUnknown(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		if c.Fake == nil {
			t.Skip("needs kfake fault injection")
		}
		pl := newPipeline(t, c, 2, 3000, 100)
		pl.produce(t, 0, pl.inputs)
		// REQUEST_TIMED_OUT on EndTxn: kfake applies the request, then
		// answers with the error, as a real broker can.
		h := c.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.RequestTimedOut, Count: 2})
		r := start(t, pl.opts("i1", copyHandler)...)
		pl.waitDone(t, 60*time.Second)
		require.NoError(t, r.stop(t))
		require.Equal(t, 2, h.Hits())
		rep := pl.read(t)
		require.True(t, rep.ExactlyOnce(), rep.String())
		require.Equal(t, pl.inputs, rep.Outputs)
		t.Logf("stats: %+v", r.p.Stats())
	})
}

// cutAfterEndTxn cuts the client's connections right after it has written
// an EndTxn request, n times: the broker gets the request, the client never
// gets the answer. Works on kfake and on a real broker.
type cutAfterEndTxn struct {
	cut *kafkatest.Cutter
	n   atomic.Int32
}

func (h *cutAfterEndTxn) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == int16(kmsg.EndTxn) && err == nil && h.n.Add(-1) >= 0 {
		h.cut.CutFor(300 * time.Millisecond)
	}
}

// TestOutcomeUnknownConnectionLost: the connection drops right after EndTxn
// is sent, so the client cannot know whether it committed.
func TestOutcomeUnknownConnectionLost(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		pl := newPipeline(t, c, 2, 3000, 100)
		pl.produce(t, 0, pl.inputs)
		var cut kafkatest.Cutter
		hook := &cutAfterEndTxn{cut: &cut}
		hook.n.Store(3)
		slow := func(ctx context.Context, r *kgo.Record, out processor.Emitter) error {
			time.Sleep(time.Millisecond) // spread the input over many transactions
			return copyHandler(ctx, r, out)
		}
		r := start(t, append(pl.opts("i1", slow), processor.WithOrdering(processor.OrderByPartition), processor.WithKgoOpts(cut.Opt(), kgo.WithHooks(hook)))...)
		pl.waitDone(t, 90*time.Second)
		require.NoError(t, r.stop(t))
		require.LessOrEqual(t, hook.n.Load(), int32(0), "every planned cut must have happened")
		rep := pl.read(t)
		require.True(t, rep.ExactlyOnce(), rep.String())
		require.Equal(t, pl.inputs, rep.Outputs)
		t.Logf("stats: %+v", r.p.Stats())
	})
}

// TestExpelledMidTransaction (KIP-848): the group expels the member while
// a transaction with offsets is open (a heartbeat answered
// FENCED_MEMBER_EPOCH, or UNKNOWN_MEMBER_ID after a coordinator move).
// franz-go waits for the loop's commit before it gives the partitions up,
// and the commit's End forces a heartbeat that no heartbeat loop is left
// to send: End must abort at once rather than wait out its context (twice
// the transaction timeout) while the member is out of the group, as a
// cluster soak saw around node restarts. Each fault is tried with the
// offset commit accepted and refused.
func TestExpelledMidTransaction(t *testing.T) {
	if !kafkatest.Consumer848() {
		t.Skip("the consumer protocol's heartbeat: ONCEFLOW_GROUP_PROTOCOL=consumer")
	}
	for _, tc := range []struct {
		name string
		hb   *kerr.Error
		// commit is the TxnOffsetCommit's answer (nil: accepted). Kafka
		// answers a transactional commit with a stale member epoch
		// ILLEGAL_GENERATION, which a transactional producer knows.
		commit *kerr.Error
	}{
		{"fenced epoch, commit accepted", kerr.FencedMemberEpoch, nil},
		{"fenced epoch, commit refused", kerr.FencedMemberEpoch, kerr.IllegalGeneration},
		{"unknown member, commit refused", kerr.UnknownMemberID, kerr.UnknownMemberID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
				if c.Fake == nil {
					t.Skip("needs kfake fault injection")
				}
				pl := newPipeline(t, c, 2, 6000, 100)
				pl.produce(t, 0, 1000)
				// Commits 2s apart: a heartbeat (every 500ms) finds a
				// transaction with offsets open, not only End's own.
				r := start(t, append(pl.opts("i1", copyHandler),
					processor.WithCommitInterval(2*time.Second), processor.WithMinCommitInterval(2*time.Second))...)
				pl.waitOutputs(t, 1000, 30*time.Second)
				faults := []kfake.Fault{{Keys: []kmsg.Key{kmsg.ConsumerGroupHeartbeat}, Err: tc.hb,
					When: func(req kmsg.Request) bool { return req.(*kmsg.ConsumerGroupHeartbeatRequest).MemberEpoch > 0 }}}
				if tc.commit != nil {
					faults = append(faults, kfake.Fault{Keys: []kmsg.Key{kmsg.TxnOffsetCommit}, Err: tc.commit})
				}
				h := c.Fake.Fault(faults...)
				for from := 1000; from < pl.inputs; from += 100 {
					pl.produce(t, from, from+100)
					time.Sleep(40 * time.Millisecond)
				}
				require.Positive(t, h.Hits())
				pl.waitDone(t, 90*time.Second)
				require.NoError(t, r.stop(t))
				rep := pl.read(t)
				require.True(t, rep.ExactlyOnce(), rep.String())
				require.Equal(t, pl.inputs, rep.Outputs)
				// An End that waits out its context leaves the commit's
				// outcome unknown, and the client is rebuilt.
				require.Zero(t, r.p.Stats().Rebuilds, "a commit waited for a heartbeat nobody sends")
			})
		})
	}
}
