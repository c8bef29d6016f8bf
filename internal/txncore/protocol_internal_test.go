package txncore

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/kafkatest"
)

func consumerConfig(c *kafkatest.Cluster, group, instance, topic string) Options {
	return Options{
		Brokers: c.Brokers, Group: group, InstanceID: instance, Topics: []string{topic},
		TransactionTimeout: 10 * time.Second, RebalanceTimeout: 10 * time.Second,
		GroupProtocol: GroupProtocolConsumer,
	}
}

// TestCommitWhileReassigned848: under the consumer protocol with
// BlockRebalanceOnPoll, a heartbeat that brings a new assignment stops
// heartbeats until the loop allows the rebalance. franz-go's
// GroupTransactSession.End forced a heartbeat before EndTxn, which then
// went unanswered until End's context expired (an unknown outcome and a
// rebuild on every rebalance that met a transaction; onceflow carried a
// franz-go patch for it). A Session's commit sends no heartbeat (KIP-447's
// member epoch on the offset commit is the fence, as in the Java client):
// it must commit the transaction first, as under the classic protocol, so
// the revoked partitions' work is not redone by their next owner.
func TestCommitWhileReassigned848(t *testing.T) {
	if kafkatest.Real() {
		t.Skip("kfake: the real-broker passes cover this through the processor's rebalance tests")
	}
	c := kafkatest.New(t)
	in := c.CreateTopic(t, "in", 4, nil)
	out := c.CreateTopic(t, "out", 1, nil)
	group := kafkatest.Name(t, "g")
	produce := func(n int) {
		cl := c.Client(t, kgo.DefaultProduceTopic(in), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
		for range n {
			if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(8)

	var wanted atomic.Bool
	cfg := consumerConfig(c, group, "a", in)
	cfg.ConsumerOpts = []kgo.Opt{
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsCallbackBlocked(func(context.Context, *kgo.Client) { wanted.Store(true) }),
	}
	a, err := NewSession(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.CheckGroupProtocol(context.Background()); err != nil {
		t.Fatal(err)
	}
	polled := 0
	for deadline := time.Now().Add(30 * time.Second); polled < 8 && time.Now().Before(deadline); {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		polled += a.Poll(ctx, 0).NumRecords()
		cancel()
	}
	if polled < 8 {
		t.Fatalf("polled %d of 8 records", polled)
	}
	tx, err := a.Begin()
	if err != nil {
		t.Fatal(err)
	}
	tx.Produce(context.Background(), &kgo.Record{Topic: out, Value: []byte("y")}, nil)

	// A second member joins while the transaction is open: the
	// coordinator takes partitions from a, whose heartbeats stop until
	// the rebalance is allowed.
	bcfg := consumerConfig(c, group, "b", in)
	b, err := NewSession(bcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	bctx, stopB := context.WithCancel(context.Background())
	bDone := make(chan struct{})
	go func() {
		defer close(bDone)
		for bctx.Err() == nil {
			b.Poll(bctx, 0)
			b.AllowRebalance()
		}
	}()
	defer func() { stopB(); <-bDone }()
	for deadline := time.Now().Add(30 * time.Second); !wanted.Load(); {
		if time.Now().After(deadline) {
			t.Fatal("the second member's join never reached a")
		}
		time.Sleep(10 * time.Millisecond)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	committed, err := tx.Commit(ctx, nil)
	if err != nil || !committed {
		t.Fatalf("Commit with a reassignment pending: committed=%v err=%v, want a commit", committed, err)
	}
	a.AllowRebalance()
	if got := len(c.ReadCommitted(t, out)); got != 1 {
		t.Fatalf("%d committed outputs, want 1", got)
	}
}

// TestCheckGroupProtocol: brokers without KIP-848 are refused before the
// client joins (franz-go would fall back to the classic protocol in
// silence), brokers with it pass.
func TestCheckGroupProtocol(t *testing.T) {
	if kafkatest.Real() {
		t.Skip("kfake's version pins")
	}
	for _, tc := range []struct {
		name string
		opts []kafkatest.Option
		want error
	}{
		{"current", nil, nil},
		{"kafka-3.9", []kafkatest.Option{kafkatest.PreKIP890()}, ErrGroupProtocolUnsupported},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := kafkatest.New(t, tc.opts...)
			s, err := NewSession(consumerConfig(c, kafkatest.Name(t, "g"), "x", "in"))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.CheckGroupProtocol(context.Background()); !errors.Is(err, tc.want) {
				t.Fatalf("CheckGroupProtocol: %v, want %v", err, tc.want)
			}
		})
	}
}

// TestJudgeHolder848: under KIP-848 another member ID holding our instance
// ID is always newer, since the coordinator never lets a member take an
// instance ID that is still held.
func TestJudgeHolder848(t *testing.T) {
	for _, tc := range []struct {
		name   string
		holder string
		ours   []string
		want   holder
	}{
		{"we hold it", "m1", []string{"m1"}, holderOurs},
		{"our earlier client holds it", "m0", []string{"m0", "m1"}, holderOurs},
		{"another member holds it", "m2", []string{"m0", "m1"}, holderNewer},
		{"nobody holds it", "", []string{"m1"}, holderUnknown},
		{"our member unknown", "m2", []string{""}, holderUnknown},
	} {
		if got := judgeHolder848(tc.holder, tc.ours...); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestReplaced848: when UNRELEASED_INSTANCE_ID means this process was
// replaced (stop) and when it waits.
func TestReplaced848(t *testing.T) {
	const patience = 6 * time.Second
	type check struct {
		holder string
		at     time.Duration // since the first check
		want   bool
	}
	for _, tc := range []struct {
		name      string
		ours      []string
		checks    []check
		waitedFor string
		// coordinators are the group coordinator's node at each check
		// (-1: not found); nil: node 0 throughout.
		coordinators []int32
		// standing is what the transaction coordinator says of our
		// claim (claim.go); the zero value, claimUnknown, judges as
		// before claims existed.
		standing claimState
	}{
		{"our earlier client holds it", []string{"m0", "m1"}, []check{{"m0", 0, false}, {"m0", time.Minute, false}}, "", nil, claimUnknown},
		{"held it, another holds it now", []string{"m0"}, []check{{"n", 0, true}}, "", nil, claimUnknown},
		{"never held it, one holder within patience", nil, []check{{"d", 0, false}, {"d", time.Second, false}, {"d", patience, false}}, "d", nil, claimUnknown},
		{"never held it, the holder changed", nil, []check{{"d", 0, false}, {"n", time.Second, true}}, "d", nil, claimUnknown},
		// A newer process took the ID before this one first looked (it
		// was stopped meanwhile): only time tells it from a dead holder.
		{"never held it, one holder past patience", nil, []check{{"n", 0, false}, {"n", patience + time.Millisecond, true}}, "n", nil, claimUnknown},
		{"nobody holds it", nil, []check{{"", 0, false}, {"", time.Minute, false}}, "", nil, claimUnknown},
		{"nobody, then a holder: patience starts then", nil, []check{{"", 0, false}, {"d", time.Minute, false}, {"d", time.Minute + patience, false}}, "d", nil, claimUnknown},
		// The new coordinator restarted the dead holder's session timer.
		{"never held it, the coordinator moved: patience starts again", nil,
			[]check{{"d", 0, false}, {"d", 2 * time.Second, false}, {"d", patience + 2*time.Second, false}, {"d", patience + 2*time.Second + time.Millisecond, true}},
			"d", []int32{0, 1, 1, 1}, claimUnknown},
		{"never held it, the coordinator not found for a while", nil,
			[]check{{"d", 0, false}, {"d", time.Second, false}, {"d", patience + time.Millisecond, true}},
			"d", []int32{0, -1, 0}, claimUnknown},
		{"never held it, the coordinator moved and came back", nil,
			[]check{{"d", 0, false}, {"d", time.Second, false}, {"d", 2 * time.Second, false}, {"d", patience + 2*time.Second, false}, {"d", patience + 2*time.Second + time.Millisecond, true}},
			"d", []int32{0, 1, 0, 0, 0}, claimUnknown},
		{"held it: a moved coordinator changes nothing", []string{"m0"}, []check{{"n", 0, true}}, "", []int32{1}, claimUnknown},
		// Two processes waited for a dead holder's ID and the older one
		// (a claim before ours) asked first: it yields when it joins.
		{"never held it, the holder changed, our claim the newest", nil,
			[]check{{"d", 0, false}, {"o", time.Second, false}, {"o", time.Second + patience + time.Millisecond, false}, {"", 30 * time.Second, false}},
			"o", nil, claimNewest},
		// An idle older holder yields at its next transaction.
		{"never held it, one holder past patience, our claim the newest", nil,
			[]check{{"o", 0, false}, {"o", patience + time.Millisecond, false}, {"o", 3 * patience, false}}, "o", nil, claimNewest},
		{"never held it, the holder changed, our claim superseded", nil, []check{{"d", 0, false}, {"n", time.Second, true}}, "d", nil, claimSuperseded},
		{"never held it, one holder past patience, our claim superseded", nil, []check{{"n", 0, false}, {"n", patience + time.Millisecond, true}}, "n", nil, claimSuperseded},
		// Claims order processes that never held the ID, not a process
		// that did against the newer one that took it after it was
		// expelled (that one holds a claim after ours, or our claim
		// would have been superseded by its).
		{"held it, another holds it now, our claim the newest", []string{"m0"}, []check{{"n", 0, true}}, "", nil, claimNewest},
	} {
		w := holderWait{patience: patience}
		t0 := time.Unix(1000, 0)
		for i, c := range tc.checks {
			coordinator := int32(0)
			if tc.coordinators != nil {
				coordinator = tc.coordinators[i]
			}
			standing := func() claimState { return tc.standing }
			if got := replaced(c.holder, coordinator, tc.ours, &w, t0.Add(c.at), standing) != ""; got != c.want {
				t.Errorf("%s: check %d (holder %q at %v): replaced=%v, want %v", tc.name, i, c.holder, c.at, got, c.want)
			}
		}
		if w.holder != tc.waitedFor {
			t.Errorf("%s: waited for %q, want %q", tc.name, w.holder, tc.waitedFor)
		}
	}
}
