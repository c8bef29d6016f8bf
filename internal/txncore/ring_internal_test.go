package txncore

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/internal/kafkatest"
)

// ringConfig is a Options for instance "i" of group with a ring of n,
// under the protocol the tests run with.
func ringConfig(c *kafkatest.Cluster, group, topic string, n int) Options {
	cfg := Options{
		Brokers: c.Brokers, Group: group, InstanceID: "i", Topics: []string{topic}, Pipeline: n,
		TransactionTimeout: 10 * time.Second, SessionTimeout: 6 * time.Second, RebalanceTimeout: 10 * time.Second,
		ConsumerOpts: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())},
	}
	if kafkatest.Consumer848() {
		cfg.GroupProtocol = GroupProtocolConsumer
	}
	return cfg
}

// TestClaimFencesLeftoverRing: an instance restarted with a smaller ring
// (here 2, after 4) aborts the transactions its predecessor left open
// under the ring IDs it no longer uses, which would otherwise hold the
// output partition's last stable offset until the transaction timeout.
// Ring IDs that were never used are left alone.
func TestClaimFencesLeftoverRing(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		in := c.CreateTopic(t, "in", 1, nil)
		out := c.CreateTopic(t, "out", 1, nil)
		group := kafkatest.Name(t, "g")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		// The predecessor's producers 2 and 3, each with a transaction
		// open: a ring of 4 that crashed.
		for _, k := range []int{2, 3} {
			p := c.Client(t, kgo.TransactionalID(RingID(group, "i", k)), kgo.TransactionTimeout(time.Minute))
			if err := p.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			if err := p.ProduceSync(ctx, &kgo.Record{Topic: out, Value: []byte("left open")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		states := func() map[string]string {
			described, err := kadm.NewClient(c.Client(t)).DescribeTransactions(ctx, RingID(group, "i", 2), RingID(group, "i", 3))
			if err != nil {
				t.Fatal(err)
			}
			m := map[string]string{}
			for id, d := range described {
				m[id] = d.State
			}
			return m
		}
		t.Logf("before the restart: %v", states())

		s, err := NewSession(ringConfig(c, group, in, 2))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.Claim(ctx); err != nil {
			t.Fatal(err)
		}
		for id, state := range states() {
			if state == "Ongoing" {
				t.Errorf("%s still has a transaction open after the claim", id)
			}
		}
		// The output's last stable offset moved past them: a record
		// committed now is readable at once.
		tx, err := s.Begin()
		if err != nil {
			t.Fatal(err)
		}
		tx.Produce(ctx, &kgo.Record{Topic: out, Value: []byte("after")}, nil)
		if ok, err := tx.Commit(ctx, nil); !ok || err != nil {
			t.Fatalf("commit: %v %v", ok, err)
		}
		c.Settle(t, 10*time.Second, out)
		recs := c.ReadCommitted(t, out)
		if len(recs) != 1 || string(recs[0].Value) != "after" {
			t.Fatalf("read_committed: %d records, want only the one committed after the claim", len(recs))
		}
	})
}

// TestRingZombieFenced: a newer process with the same instance ID fences
// every producer of the old one's ring, not only its first: the old
// process's transaction on its second producer cannot commit, and its
// record never becomes visible.
func TestRingZombieFenced(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		in := c.CreateTopic(t, "in", 1, nil)
		out := c.CreateTopic(t, "out", 1, nil)
		group := kafkatest.Name(t, "g")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cfg := ringConfig(c, group, in, 2)
		old, err := NewSession(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer old.Close()
		if err := old.Claim(ctx); err != nil {
			t.Fatal(err)
		}
		joined(t, func(ctx context.Context) { old.Poll(ctx, 10) }, old.Client())
		commit := func(s *Session, value string) (*Txn, bool, error) {
			tx, err := s.Begin()
			if err != nil {
				t.Fatal(err)
			}
			tx.Produce(ctx, &kgo.Record{Topic: out, Value: []byte(value)}, nil)
			ok, err := tx.Commit(ctx, nil)
			return tx, ok, err
		}
		if _, ok, err := commit(old, "old 1"); !ok || err != nil {
			t.Fatalf("old process's first commit: %v %v", ok, err)
		}
		// Its second transaction runs on producer #1; it is left open
		// while the newer process starts.
		tx, err := old.Begin()
		if err != nil {
			t.Fatal(err)
		}
		if tx.TransactionalID() != RingID(group, "i", 1) {
			t.Fatalf("second transaction on %s, want the ring's second producer", tx.TransactionalID())
		}
		tx.Produce(ctx, &kgo.Record{Topic: out, Value: []byte("zombie")}, nil)
		if err := tx.Flush(ctx); err != nil {
			t.Fatal(err)
		}

		newer, err := NewSession(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer newer.Close()
		if err := newer.Claim(ctx); err != nil {
			t.Fatal(err)
		}
		joined(t, func(ctx context.Context) { newer.Poll(ctx, 10) }, newer.Client())

		if ok, err := tx.Commit(ctx, nil); ok {
			t.Fatalf("the old process's transaction on its second producer committed after a newer process claimed the ring (err %v)", err)
		} else {
			t.Logf("old process's commit: %v (class %v)", err, ClassOf(err))
		}
		if _, ok, err := commit(newer, "newer"); !ok || err != nil {
			t.Fatalf("newer process's commit: %v %v", ok, err)
		}
		c.Settle(t, 10*time.Second, out)
		var got []string
		for _, r := range c.ReadCommitted(t, out) {
			got = append(got, string(r.Value))
		}
		if len(got) != 2 || got[0] != "old 1" || got[1] != "newer" {
			t.Fatalf("read_committed %q, want the old process's first commit and the newer one's", got)
		}
	})
}

// TestOffsetCommitFailureAborts: an offset commit that fails for a reason
// that is neither the group's (abortableCommitErr) nor fencing, such as
// a transport error while its coordinator's node restarts, aborts the
// transaction and the Session goes on: Commit reports an abort, not an
// error. It returned the error (class abortable), which stopped the
// processor's Run in a 20-minute soak on the 3-node cluster (a worker
// exited with "TxnOffsetCommit: unable to dial").
func TestOffsetCommitFailureAborts(t *testing.T) {
	if kafkatest.Real() {
		t.Skip("kfake fault injection")
	}
	c := kafkatest.New(t)
	in := c.CreateTopic(t, "in", 1, nil)
	out := c.CreateTopic(t, "out", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := NewSession(ringConfig(c, kafkatest.Name(t, "g"), in, 2))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	commit := func(value string) (bool, error) {
		tx, err := s.Begin()
		if err != nil {
			t.Fatal(err)
		}
		tx.Produce(ctx, &kgo.Record{Topic: out, Value: []byte(value)}, nil)
		return tx.Commit(ctx, func(req *kmsg.TxnOffsetCommitRequest) error {
			rt := kmsg.NewTxnOffsetCommitRequestTopic()
			rt.Topic = in
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Offset = 0
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = []kmsg.TxnOffsetCommitRequestTopic{rt}
			return nil
		})
	}
	c.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.TxnOffsetCommit}, Err: kerr.InvalidCommitOffsetSize})
	if ok, err := commit("aborted"); ok || err != nil {
		t.Fatalf("commit whose offset commit failed: committed %v, err %v; want an abort and no error", ok, err)
	}
	if ok, err := commit("committed"); !ok || err != nil {
		t.Fatalf("the next commit: %v %v", ok, err)
	}
	c.Settle(t, 10*time.Second, out)
	recs := c.ReadCommitted(t, out)
	if len(recs) != 1 || string(recs[0].Value) != "committed" {
		t.Fatalf("read_committed: %d records, want only the second commit's", len(recs))
	}
}
