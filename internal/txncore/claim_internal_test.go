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

// TestClaimOrder848: of two Sessions with one instance ID, the one that
// claimed last is the newest; the other one finds its claim superseded
// (checkClaim: ClassReset), and a Session without a claim is unordered.
func TestClaimOrder848(t *testing.T) {
	c := kafkatest.New(t)
	topic := c.CreateTopic(t, "in", 1, nil)
	group := kafkatest.Name(t, "g")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	session := func(claim bool) *Session { return newSession848(ctx, t, c, group, topic, claim) }
	older, newer, unclaimed := session(true), session(true), session(false)
	for _, tc := range []struct {
		name string
		s    *Session
		want claimState
	}{
		{"older", older, claimSuperseded},
		{"newer", newer, claimNewest},
		{"unclaimed", unclaimed, claimUnknown},
	} {
		if got := tc.s.standing(ctx); got != tc.want {
			t.Errorf("%s: standing %v, want %v", tc.name, got, tc.want)
		}
	}
	if e := older.checkClaim(ctx); e == nil || e.Class != ClassReset || !errors.Is(e, errSuperseded) {
		t.Errorf("older checkClaim: %v, want a ClassReset superseded error", e)
	}
	if e := newer.checkClaim(ctx); e != nil {
		t.Errorf("newer checkClaim: %v", e)
	}
	classic := consumerConfig(c, group, "j", topic)
	classic.GroupProtocol = GroupProtocolClassic
	s, err := NewSession(classic)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Claim(ctx); err != nil || s.claimed {
		t.Errorf("classic Claim: %v, claimed %v; want a no-op", err, s.claimed)
	}
}

// TestClaimStandsAfterTransactions848: a claim stays the newest through
// the Session's own transactions, whose ends bump the epoch under
// transactions v2 (so a later check, after a rejoin, sees no newer
// process where there is none), and is superseded by a later claim.
func TestClaimStandsAfterTransactions848(t *testing.T) {
	c := kafkatest.New(t)
	topic := c.CreateTopic(t, "in", 1, nil)
	group := kafkatest.Name(t, "g")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := newSession848(ctx, t, c, group, topic, true)
	cl := s.ring[0].cl // the producer of the instance's own transactional ID
	_, before, _ := cl.ProducerID(ctx)
	for i := range 3 {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(i%2 == 0)); err != nil {
			t.Fatal(err)
		}
	}
	_, after, _ := cl.ProducerID(ctx)
	t.Logf("producer epoch %d at the claim, %d after three transactions", before, after)
	if got := s.standing(ctx); got != claimNewest {
		t.Fatalf("after its own transactions: standing %v, want %v", got, claimNewest)
	}
	newSession848(ctx, t, c, group, topic, true) // a later claim
	if got := s.standing(ctx); got != claimSuperseded {
		t.Errorf("after a later claim: standing %v, want %v", got, claimSuperseded)
	}
}

// newSession848 is a consumer-protocol Session for instance "i" of
// group, closed when the test ends; claim makes it claim the
// transactional ID.
func newSession848(ctx context.Context, t *testing.T, c *kafkatest.Cluster, group, topic string, claim bool) *Session {
	t.Helper()
	s, err := NewSession(consumerConfig(c, group, "i", topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if claim {
		if err := s.Claim(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// TestJoinsAfterClaim848: a consumer-protocol Session joins the group at
// Claim, not before. franz-go joins as soon as a client's metadata names
// its topics; a Session built with them held the instance ID unclaimed
// while its Claim waited for an unreachable transaction coordinator and,
// with rebalances blocked until the first poll, stopped heartbeating
// until the group expelled it (a KIP-848 cluster soak, w90#176).
func TestJoinsAfterClaim848(t *testing.T) {
	c := kafkatest.New(t)
	topic := c.CreateTopic(t, "in", 1, nil)
	group := kafkatest.Name(t, "g")
	cl := c.Client(t)
	kafkatest.Join848(t, cl, group, "other", topic) // ConsumerGroupDescribe needs the group
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	holder := func() string {
		h, _, err := holder848(ctx, cl, group, "i")
		if err != nil {
			t.Fatal(err)
		}
		return h
	}

	s := newSession848(ctx, t, c, group, topic, false)
	// Time for the client to load metadata and join, were it to: a
	// fraction of a second on kfake and on the cluster.
	time.Sleep(2 * time.Second)
	if h := holder(); h != "" {
		t.Fatalf("the Session joined as %s before its claim", h)
	}
	if err := s.Claim(ctx); err != nil {
		t.Fatal(err)
	}
	for holder() == "" {
		if ctx.Err() != nil {
			t.Fatal("the Session did not join after its claim")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestStaticLeave848: a Session that closes leaves the group as a static
// member (epoch -2), which lets a process with its instance ID replace
// it at once. Kafka refuses such a leave without the instance ID
// (INVALID_REQUEST, "InstanceId can't be null"), as upstream franz-go
// v1.22.3 sends it, and the member then held its ID until its session
// expired; kfake accepts it (this test passes there either way).
func TestStaticLeave848(t *testing.T) {
	c := kafkatest.New(t, kafkatest.KeepParkedStaticMembers())
	topic := c.CreateTopic(t, "in", 1, nil)
	group := kafkatest.Name(t, "g")
	s, err := NewSession(consumerConfig(c, group, "i", topic))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, epoch := s.Client().GroupMetadata(); epoch <= 0; _, epoch = s.Client().GroupMetadata() {
		pctx, pcancel := context.WithTimeout(ctx, 100*time.Millisecond)
		s.Poll(pctx, 0)
		pcancel()
		s.AllowRebalance()
		if ctx.Err() != nil {
			t.Fatal("the Session did not join")
		}
	}
	member, _ := s.Client().GroupMetadata()
	s.Close()
	holder, epoch, err := holder848(ctx, c.Client(t), group, "i")
	if err != nil {
		t.Fatal(err)
	}
	if holder != "" && (holder != member || epoch != leftStaticEpoch) {
		t.Errorf("after Close the group has member %s (ours %s) at epoch %d for the instance ID, want it left (epoch %d) or gone", holder, member, epoch, leftStaticEpoch)
	}
}

// TestClaimRetriedBeforeJoin848: a process whose claim failed because its
// transaction coordinator could not answer joined the group unclaimed,
// and, unordered, took the instance ID from a newer process that waited
// for it (a KIP-848 cluster soak, w56#122). Under the consumer protocol
// Instance.Claim retries until the claim succeeds, and the member joins
// only then; a refusal the broker calls final is not retried.
func TestClaimRetriedBeforeJoin848(t *testing.T) {
	if kafkatest.Real() {
		t.Skip("kfake: the fault injection")
	}
	c := kafkatest.New(t)
	topic := c.CreateTopic(t, "in", 1, nil)
	// instance is an Instance whose claim attempts each last 300ms, its
	// retries counted.
	instance := func(t *testing.T, group string, retries *atomic.Int32) (*Instance, *Session) {
		cfg := consumerConfig(c, group, "i", topic)
		cfg.TransactionTimeout = 300 * time.Millisecond
		in := NewInstance(InstanceOptions{Options: cfg, Clock: wallClock{},
			OnClaimRetry: func(error, time.Duration) { retries.Add(1) }})
		s, err := in.NewSession(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return in, s
	}

	t.Run("the coordinator answers again", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		group := kafkatest.Name(t, "g")
		txnID := ID(group, "i")
		down := c.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.InitProducerID}, TxnID: txnID, Err: kerr.CoordinatorNotAvailable, Count: -1})
		hb := c.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.ConsumerGroupHeartbeat}, Group: group, Observe: true, Count: -1})
		defer hb.Remove()
		var retries atomic.Int32
		in, _ := instance(t, group, &retries)
		done := make(chan error, 1)
		go func() { done <- in.Claim(ctx) }()
		for deadline := time.Now().Add(30 * time.Second); retries.Load() < 2; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("Claim did not retry")
			}
		}
		if hb.Hits() > 0 {
			t.Fatal("the member joined the group before its claim succeeded")
		}
		down.Remove()
		if err := <-done; err != nil {
			t.Fatalf("Claim: %v, want it to succeed once the coordinator answers", err)
		}
		if !in.check.claimed {
			t.Fatal("the claim does not order the Session")
		}
		for deadline := time.Now().Add(30 * time.Second); hb.Hits() == 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the member did not join after its claim")
			}
		}
	})

	t.Run("a final refusal", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		group := kafkatest.Name(t, "g")
		refused := c.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.InitProducerID}, TxnID: ID(group, "i"), Err: kerr.TransactionalIDAuthorizationFailed, Count: -1})
		defer refused.Remove()
		var retries atomic.Int32
		in, _ := instance(t, group, &retries)
		if err := in.Claim(ctx); !errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
			t.Fatalf("Claim: %v, want the refusal", err)
		}
		if n := retries.Load(); n != 0 {
			t.Errorf("a final refusal was retried %d times", n)
		}
	})
}
