package processor_test

import (
	"context"
	"log/slog"
	"sync"
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

// waitOutputs waits until at least n committed outputs are visible.
func (pl *pipeline) waitOutputs(t *testing.T, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for len(pl.c.ReadCommitted(t, pl.out)) < n {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d outputs after %v", n, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestCrashMidTransaction: an instance dies abruptly (its connections cut:
// no EndTxn, no LeaveGroup) while transactions are open; a replacement with
// the same instance ID fences it, takes its partitions without waiting for
// the session timeout, and the output holds every input exactly once.
func TestCrashMidTransaction(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		pl := newPipeline(t, c, 3, 6000, 200)
		pl.produce(t, 0, pl.inputs/2)
		slow := func(ctx context.Context, r *kgo.Record, out processor.Emitter) error {
			time.Sleep(200 * time.Microsecond)
			return copyHandler(ctx, r, out)
		}
		var cut kafkatest.Cutter
		a := start(t, append(pl.opts("i1", slow), processor.WithKgoOpts(cut.Opt()))...)
		pl.waitOutputs(t, 1000, 30*time.Second)
		cut.Cut()
		crashed := time.Now()
		before := len(pl.c.ReadCommitted(t, pl.out))
		t.Logf("crashed after %d committed outputs", before)

		// The replacement has the rest of the input to do (and whatever
		// the crashed instance left), so new output must appear.
		b := start(t, pl.opts("i1", copyHandler)...)
		pl.produce(t, pl.inputs/2, pl.inputs)
		pl.waitOutputs(t, before+1, 30*time.Second)
		t.Logf("output visible again %v after the crash", time.Since(crashed).Round(time.Millisecond))
		rep := pl.waitDone(t, 60*time.Second)
		require.NoError(t, b.stop(t))
		_ = a.stop(t) // the crashed instance's error is of no interest
		rep = pl.read(t)
		require.True(t, rep.ExactlyOnce(), rep.String())
		require.Equal(t, pl.inputs, rep.Outputs)
	})
}

// TestZombieSameInstance: instance A stalls inside its handler; B starts with
// the same instance ID and takes over. When A wakes, nothing it produces
// becomes visible and Run returns ErrFenced.
//
// Under the consumer protocol (KIP-848) a live member keeps its instance ID:
// B waits until A's session expires, so A is also cut off from the cluster
// (a network partition, or a process paused) past its session timeout. When
// it heals, the group refuses its rejoin (UNRELEASED_INSTANCE_ID) and A
// must stop rather than wait for the ID.
func TestZombieSameInstance(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		pl := newPipeline(t, c, 2, 2000, 50)
		pl.produce(t, 0, pl.inputs)
		wake := make(chan struct{})
		var stalled atomic.Int64
		stall := func(ctx context.Context, r *kgo.Record, out processor.Emitter) error {
			if r.Offset >= 100 {
				stalled.Add(1)
				<-wake
			}
			return copyHandler(ctx, r, out)
		}
		var cut kafkatest.Cutter
		a := start(t, append(pl.opts("i1", stall), processor.WithKgoOpts(cut.Opt()))...)
		require.Eventually(t, func() bool { return stalled.Load() > 0 }, 30*time.Second, 10*time.Millisecond)
		time.Sleep(300 * time.Millisecond) // let A commit what it finished
		if kafkatest.Consumer848() {
			cut.CutFor(6*time.Second + 3*time.Second) // past newPipeline's session timeout
		}

		b := start(t, pl.opts("i1", copyHandler)...)
		rep := pl.waitDone(t, 60*time.Second)
		require.Zero(t, rep.Lost, rep.String())
		close(wake)

		require.ErrorIs(t, a.wait(t, 30*time.Second), processor.ErrFenced)
		require.NoError(t, b.stop(t))
		rep = pl.read(t)
		require.True(t, rep.ExactlyOnce(), rep.String())
		require.Equal(t, pl.inputs, rep.Outputs)
	})
}

// TestRebuildYieldsToNewerProcess (KIP-848): A's commit ends in an
// unknown outcome, so A rebuilds its client, and its member is gone from
// the group by then (on Kafka because A was stopped past its session, as
// integration's TestZombie once saw; here kfake drops a closed static
// member at once, see kafkatest). B, a newer process with A's instance
// ID, asks for the ID a second later, while it is free. The coordinator
// gives a free ID to whoever asks first, so A must leave B the time to
// take it and then stop with ErrFenced, rather than rejoin at once and
// leave B waiting for an ID it will not get. Under the classic protocol
// the newest joiner takes the ID whatever the order
// (TestZombieSameInstance).
func TestRebuildYieldsToNewerProcess(t *testing.T) {
	if !kafkatest.Consumer848() {
		t.Skip("the consumer protocol's rule: ONCEFLOW_GROUP_PROTOCOL=consumer")
	}
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		if c.Fake == nil {
			t.Skip("needs kfake fault injection, and a member that is gone when its client closes")
		}
		pl := newPipeline(t, c, 2, 4000, 50)
		pl.produce(t, 0, pl.inputs/2)
		a := start(t, pl.opts("i1", copyHandler)...)
		pl.waitOutputs(t, pl.inputs/2, 30*time.Second)

		// The next commit is applied, then answered with an error.
		h := c.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.RequestTimedOut, Count: 1})
		pl.produce(t, pl.inputs/2, pl.inputs)
		require.Eventually(t, func() bool { return h.Hits() == 1 }, 30*time.Second, 10*time.Millisecond)
		time.Sleep(time.Second) // A rejoining at once would hold the ID by then
		b := start(t, pl.opts("i1", copyHandler)...)

		require.ErrorIs(t, a.wait(t, 30*time.Second), processor.ErrFenced)
		pl.waitDone(t, 60*time.Second)
		require.NoError(t, b.stop(t))
		rep := pl.read(t)
		require.True(t, rep.ExactlyOnce(), rep.String())
		require.Equal(t, pl.inputs, rep.Outputs)
	})
}

// TestLostMemberYieldsToNewerProcess (KIP-848): A, idle, is cut off
// from the cluster (a pause, or a network partition) past its session, so
// the group expels its member; B, a newer process with A's instance ID,
// is cut off too until A is back. When A's connection heals, its heartbeat
// learns it was expelled and franz-go rejoins: if A took the free ID at
// once, B, a moment later, would wait for an ID held by a live process
// and stop. A must instead leave B the time to take the ID (txncore.Instance.YieldOnLost)
// and stop with ErrFenced; B does the rest of the work exactly once.
func TestLostMemberYieldsToNewerProcess(t *testing.T) {
	if !kafkatest.Consumer848() {
		t.Skip("the consumer protocol's rule: ONCEFLOW_GROUP_PROTOCOL=consumer")
	}
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		pl := newPipeline(t, c, 2, 2000, 50)
		var cutA, cutB kafkatest.Cutter
		a := pl.startHolder(t, "i1", &cutA)

		cutA.Cut()
		cutB.Cut()
		b := start(t, append(pl.opts("i1", copyHandler), processor.WithKgoOpts(cutB.Opt(), quickRetries))...)
		require.Eventually(t, func() bool { return pl.holder(t, "i1") == "" }, 30*time.Second, 50*time.Millisecond,
			"A's member was not expelled")
		cutA.Heal()
		time.Sleep(time.Second) // without the yield, A holds the ID again by now
		cutB.Heal()

		require.ErrorIs(t, a.wait(t, 30*time.Second), processor.ErrFenced)
		pl.finishSecondHalf(t, b)
	})
}

// TestShortCutKeepsTheMember: a holder cut off from the cluster for less
// than its session. Its heartbeat fails, so franz-go calls
// OnPartitionsLost, but the group keeps the member, and franz-go rejoins
// under it in place. The yield before that rejoin (txncore.Instance.YieldOnLost) must
// not take the client's own live member for one a closed client left
// behind and wait for it to expire: from 5152757 until this test, every
// such blip (a node fault, a network hiccup) took the holder out of its
// group for a session timeout and a grace. On kfake the member must stay;
// Kafka refuses a static member's rejoin in place, so there the holder
// must rejoin once its member expired. The work finishes exactly once.
func TestShortCutKeepsTheMember(t *testing.T) {
	if !kafkatest.Consumer848() {
		t.Skip("the consumer protocol's rule: ONCEFLOW_GROUP_PROTOCOL=consumer")
	}
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		pl := newPipeline(t, c, 2, 2000, 50)
		var cut kafkatest.Cutter
		lostLog, lost := logSignals(t, "holder", lostMsg)
		holder := pl.startHolder(t, "i1", &cut, lostLog, processor.WithClientLogLevel(slog.LevelInfo))
		member := pl.holder(t, "i1")

		cut.Cut()
		waitSignal(t, lost[0], "the cut-off holder's client did not lose its partitions")
		cut.Heal()
		if kafkatest.Real() {
			// Kafka 4.4.0 refuses the rejoin in place
			// (UNRELEASED_INSTANCE_ID: the ID is "owned by" the same
			// member): the client joins anew once its member expired.
			require.Eventually(t, func() bool { return pl.holder(t, "i1") != "" }, 30*time.Second, 100*time.Millisecond,
				"the holder did not rejoin after the cut")
		} else {
			// The session is 6s (newPipeline): an expiry shows within 8s.
			for end := time.Now().Add(8 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
				require.Equal(t, member, pl.holder(t, "i1"), "the holder's member left the group after a cut shorter than its session")
			}
		}
		pl.finishSecondHalf(t, holder)
	})
}

// lostMsg is the processor's log line (at info) when the client loses its
// partitions (OnPartitionsLost).
const lostMsg = "partitions lost: the group expelled or fenced this member, or its heartbeats failed"

// TestDuplicateInstance: a second process starts with the instance ID of a
// live one (a misconfiguration, or a replacement started while the first
// was only paused). One of them must stop with ErrFenced and the other
// finish the work exactly once: the newcomer wins. Under the classic
// protocol it takes the ID at once and fences the first. Under the
// consumer protocol (KIP-848) the group refuses it the ID while the first
// holds it, but its claim of the transactional ID (internal/txncore/claim.go) fences
// the first one's producer: the first one's next commit fails, and
// before rebuilding it yields the ID to the waiting newcomer. (Before
// claims the first one kept the ID and the newcomer stopped after twice
// the session timeout, taking the holder for a live older process.)
func TestDuplicateInstance(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		pl := newPipeline(t, c, 2, 2000, 50)
		pl.produce(t, 0, pl.inputs/2)
		a := start(t, pl.opts("i1", copyHandler)...)
		require.Eventually(t, func() bool { return pl.read(t).Outputs == pl.inputs/2 }, 30*time.Second, 50*time.Millisecond)

		b := start(t, pl.opts("i1", copyHandler)...)
		pl.produce(t, pl.inputs/2, pl.inputs)
		require.ErrorIs(t, a.wait(t, 30*time.Second), processor.ErrFenced)
		rep := pl.waitDone(t, 60*time.Second)
		require.NoError(t, b.stop(t))
		require.True(t, rep.ExactlyOnce(), rep.String())
		require.Equal(t, pl.inputs, rep.Outputs)
	})
}

// TestCrashWithTwoTransactionsInFlight: with transactions pipelined
// (WithTransactionPipeline), an instance dies while one transaction's
// EndTxn is at the coordinator and the next one, on the ring's other
// producer, has records out. The replacement's claim of every ring ID
// aborts the open one, the one that ended is either committed or not (the
// crash hid the answer), and the output holds every input exactly once,
// in session order. kfake only: it holds the EndTxn until the other
// producer's records arrive.
func TestCrashWithTwoTransactionsInFlight(t *testing.T) {
	if kafkatest.Real() {
		t.Skip("holds an EndTxn in the embedded cluster")
	}
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		pl := newPipeline(t, c, 3, 6000, 200)
		pl.produce(t, 0, pl.inputs)
		var cut kafkatest.Cutter
		var mu sync.Mutex
		open := make(map[string]bool) // transactional IDs with records since their last EndTxn
		var commits int
		var crashed atomic.Bool
		twoOpen := func(id string) bool {
			for other, o := range open {
				if other != id && o {
					return true
				}
			}
			return false
		}
		c.Fake.ControlKey(kmsg.Produce.Int16(), func(kr kmsg.Request) (kmsg.Response, error, bool) {
			c.Fake.KeepControl()
			if req := kr.(*kmsg.ProduceRequest); req.TransactionID != nil {
				mu.Lock()
				open[*req.TransactionID] = true
				mu.Unlock()
			}
			return nil, nil, false
		})
		c.Fake.ControlKey(kmsg.EndTxn.Int16(), func(kr kmsg.Request) (kmsg.Response, error, bool) {
			c.Fake.KeepControl()
			req := kr.(*kmsg.EndTxnRequest)
			mu.Lock()
			defer mu.Unlock()
			open[req.TransactionalID] = false
			// From the third commit on, once outputs flow: the first
			// EndTxn that meets another producer's records out is
			// applied, and the instance crashes before it hears.
			if commits++; req.Commit && commits >= 3 && !crashed.Load() && twoOpen(req.TransactionalID) {
				cut.Cut()
				crashed.Store(true)
			}
			return nil, nil, false
		})
		// The offset commit takes a moment, as a replicated
		// coordinator's does: the next transaction's records go out
		// meanwhile.
		c.Fake.ControlKey(kmsg.TxnOffsetCommit.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
			c.Fake.KeepControl()
			c.Fake.SleepControl(func() { time.Sleep(20 * time.Millisecond) })
			return nil, nil, false
		})
		slow := func(ctx context.Context, r *kgo.Record, out processor.Emitter) error {
			time.Sleep(time.Millisecond) // input for many transactions
			return copyHandler(ctx, r, out)
		}
		// One lane per partition: the input spreads over many
		// transactions, each ending while records keep finishing.
		a := start(t, append(pl.opts("i1", slow), processor.WithOrdering(processor.OrderByPartition), processor.WithKgoOpts(cut.Opt()))...)
		require.Eventually(t, crashed.Load, 30*time.Second, 10*time.Millisecond, "no EndTxn met another producer's records out")
		before := len(pl.c.ReadCommitted(t, pl.out))
		t.Logf("crashed with two transactions in flight, after %d committed outputs", before)

		b := start(t, pl.opts("i1", copyHandler)...)
		pl.waitDone(t, 60*time.Second)
		require.NoError(t, b.stop(t))
		_ = a.stop(t)
		rep := pl.read(t)
		require.True(t, rep.ExactlyOnce(), rep.String())
		require.Equal(t, pl.inputs, rep.Outputs)
	})
}
