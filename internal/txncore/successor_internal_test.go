package txncore

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/internal/kafkatest"
)

// TestYieldToSuccessor848: before a rebuild under KIP-848, a process whose
// member expired gives a newer process waiting for its instance ID the
// time to take it, and stops if it does (integration's TestZombie under
// the consumer protocol once saw the older process win the free ID and the
// newest one stop). Raw KIP-848 joins stand for the other processes; each
// group keeps a member of another instance so that it is described.
func TestYieldToSuccessor848(t *testing.T) {
	// A static member's leave (epoch -2) stays a leave here: the
	// processor's tests make it a full one on kfake (see kafkatest).
	c := kafkatest.New(t, kafkatest.KeepParkedStaticMembers())
	topic := c.CreateTopic(t, "in", 1, nil)
	cl := c.Client(t)
	const grace, ownHold = 3 * time.Second, 2 * time.Second
	for _, tc := range []struct {
		name     string
		holder   bool          // a member other than ours holds the ID from the start
		ourHeld  bool          // our earlier member still holds it
		ourLeft  bool          // our earlier member left as a static member (closed)
		takeAt   time.Duration // >0: a newer member takes the free ID then
		protocol GroupProtocol
		fenced   bool
		minWait  time.Duration // Yield returns no sooner
		maxWait  time.Duration // and no later
	}{
		// Our earlier member (its client closed without a leave) keeps
		// the ID until its session ends (here it leaves after ownHold):
		// a rebuild at once would claim the transactional ID anew and
		// supersede a newer process waiting for the ID (a KIP-848
		// cluster soak, w86#182).
		{name: "our earlier member holds it, nobody comes", ourHeld: true, protocol: GroupProtocolConsumer, minWait: ownHold + grace, maxWait: ownHold + 3*grace},
		{name: "our earlier member holds it, a newer process takes the ID after it", ourHeld: true, takeAt: ownHold + time.Second, protocol: GroupProtocolConsumer, fenced: true, minWait: ownHold + time.Second, maxWait: ownHold + grace},
		// A rebuild closes the old client first: Kafka keeps a static
		// member that left until its session expires, but lets any
		// member with its instance ID replace it (a KIP-848 soak saw a
		// rebuilt zombie win the ID that way), so the rebuild waits as
		// for a free ID.
		{name: "our earlier member left, nobody comes", ourLeft: true, protocol: GroupProtocolConsumer, minWait: grace, maxWait: 3 * grace},
		{name: "our earlier member left, a newer process takes the ID", ourLeft: true, takeAt: time.Second, protocol: GroupProtocolConsumer, fenced: true, minWait: time.Second, maxWait: grace},
		{name: "another member holds it", holder: true, protocol: GroupProtocolConsumer, fenced: true, maxWait: grace / 2},
		{name: "a newer process takes the free ID", takeAt: time.Second, protocol: GroupProtocolConsumer, fenced: true, minWait: time.Second, maxWait: grace},
		{name: "nobody comes", protocol: GroupProtocolConsumer, minWait: grace, maxWait: 3 * grace},
		{name: "classic protocol", holder: true, protocol: GroupProtocolClassic, maxWait: grace / 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			group := kafkatest.Name(t, "g")
			kafkatest.Join848(t, cl, group, "other", topic)
			ours := []string{"expired-member"}
			switch {
			case tc.ourHeld:
				m := kafkatest.Join848(t, cl, group, "i", topic)
				left := make(chan struct{})
				defer func() { <-left }()
				time.AfterFunc(ownHold, func() { kafkatest.Heartbeat848(t, cl, group, "i", topic, m, -2); close(left) })
				ours = append(ours, m)
			case tc.ourLeft:
				m := kafkatest.Join848(t, cl, group, "i", topic)
				kafkatest.Heartbeat848(t, cl, group, "i", topic, m, -2)
				ours = append(ours, m)
			case tc.holder:
				kafkatest.Join848(t, cl, group, "i", topic)
			}
			if tc.takeAt > 0 {
				joined := make(chan struct{})
				defer func() { <-joined }()
				time.AfterFunc(tc.takeAt, func() { kafkatest.Join848(t, cl, group, "i", topic); close(joined) })
			}
			cfg := Options{Brokers: c.Brokers, Group: group, InstanceID: "i", GroupProtocol: tc.protocol}
			start := time.Now()
			in := NewInstance(InstanceOptions{Options: cfg, Clock: wallClock{}})
			in.grace = grace
			for _, m := range ours {
				in.Held(m)
			}
			e := in.YieldToSuccessor(context.Background())
			took := time.Since(start)
			if fenced := e != nil && errors.Is(e, ErrFenced); fenced != tc.fenced || (e != nil && !fenced) {
				t.Fatalf("YieldToSuccessor: %v, want fenced=%v", e, tc.fenced)
			}
			if took < tc.minWait || took > tc.maxWait {
				t.Errorf("YieldToSuccessor returned after %v, want %v to %v", took.Round(time.Millisecond), tc.minWait, tc.maxWait)
			}
		})
	}
}

// TestEveryLossReported848: franz-go's GroupTransactSession called
// OnPartitionsLost only for the first loss between two Ends. A process
// that waited for its instance ID (each refused join is a loss) and then
// got it was expelled before its first End: the second loss never reached
// the callback, so the yield before franz-go's rejoin (YieldOnLost) did
// not run, and the process took the ID back from a newer one (a KIP-848
// cluster soak, w95#207). onceflow patched franz-go for it; a Session's
// own callbacks (Options.OnLost) must pass on every loss.
func TestEveryLossReported848(t *testing.T) {
	if kafkatest.Real() {
		t.Skip("kfake: the fault injection")
	}
	c := kafkatest.New(t)
	topic := c.CreateTopic(t, "in", 1, nil)
	group := kafkatest.Name(t, "g")
	c.ConsumerGroupTimeouts(t, group, 2*time.Second, 200*time.Millisecond)
	cl := c.Client(t)
	kafkatest.Join848(t, cl, group, "i", topic) // a crashed predecessor: no more heartbeats

	var losses atomic.Int32
	cfg := consumerConfig(c, group, "i", topic)
	cfg.ClientOpts = []kgo.Opt{kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond })}
	cfg.OnLost = func(context.Context, *kgo.Client, map[string][]int32) { losses.Add(1) }
	s, err := NewSession(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, stop := context.WithCancel(context.Background())
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for ctx.Err() == nil {
			pctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			s.Poll(pctx, 0)
			cancel()
			s.AllowRebalance()
		}
	}()
	defer func() { stop(); <-polled }()

	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	waitFor("a refused join reported as a loss", func() bool { return losses.Load() >= 1 })
	waitFor("the ID after the predecessor's session", func() bool { _, epoch := s.Client().GroupMetadata(); return epoch > 0 })
	before := losses.Load()
	c.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.ConsumerGroupHeartbeat}, Err: kerr.UnknownMemberID,
		When: func(req kmsg.Request) bool { return req.(*kmsg.ConsumerGroupHeartbeatRequest).MemberEpoch > 0 }})
	waitFor("the expulsion reported as a loss", func() bool { return losses.Load() > before })
}

// wallClock is the Instance's clock in tests that wait for real brokers.
type wallClock struct{}

func (wallClock) Now() time.Time                         { return time.Now() }
func (wallClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
