package txncore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/kafkatest"
)

// TestClaimOrder848: of two Sessions with one instance ID, the one that
// claimed last is the newest; the other one finds its claim superseded
// (CheckClaim: ClassReset), and a Session without a claim is unordered.
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
	if e := older.CheckClaim(ctx); e == nil || e.Class != ClassReset || !errors.Is(e, errSuperseded) {
		t.Errorf("older CheckClaim: %v, want a ClassReset superseded error", e)
	}
	if e := newer.CheckClaim(ctx); e != nil {
		t.Errorf("newer CheckClaim: %v", e)
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
