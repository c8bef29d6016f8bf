package kafkatest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// netFixture is a kfake cluster and a Net in front of it, plaintext, in
// process (the proxy's own test: it does not depend on KAFKA_BROKERS).
func netFixture(t *testing.T) (*kfake.Cluster, *Net) {
	t.Helper()
	fake, err := kfake.NewCluster(kfake.NumBrokers(2))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	return fake, NewNet(t, fake.ListenAddrs())
}

func endClient(t *testing.T, fake *kfake.Cluster, e *End, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(fake.ListenAddrs()...), e.Opt(),
		kgo.RequestTimeoutOverhead(time.Second), kgo.RetryTimeout(time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// metadata sends a Metadata request to broker node through cl and returns
// how long it took.
func metadata(ctx context.Context, cl *kgo.Client, node int32) (time.Duration, error) {
	start := time.Now()
	_, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl.Broker(int(node)))
	return time.Since(start), err
}

func TestNetLatencyBlackholeCut(t *testing.T) {
	fake, n := netFixture(t)
	a, b := n.End("a"), n.End("b")
	ca, cb := endClient(t, fake, a), endClient(t, fake, b)
	ctx := context.Background()
	for _, cl := range []*kgo.Client{ca, cb} {
		if _, err := metadata(ctx, cl, 0); err != nil {
			t.Fatalf("through the proxy: %v", err)
		}
	}
	if acc, _ := a.Link(fake.ListenAddrs()[0]).Stats(); acc == 0 {
		t.Fatal("a's client did not connect through its link")
	}

	a.SetLatency(150 * time.Millisecond)
	if d, err := metadata(ctx, ca, 0); err != nil || d < 150*time.Millisecond {
		t.Errorf("with 150ms latency: round trip %v, %v", d, err)
	}
	if d, err := metadata(ctx, cb, 0); err != nil || d >= 150*time.Millisecond {
		t.Errorf("b's round trip with a's latency: %v, %v (b has none)", d, err)
	}
	a.SetLatency(0)

	// A blackhole on a's link to broker 0: a's request hangs, b's passes,
	// and a's goes through once healed.
	l0 := a.Link(fake.ListenAddrs()[0])
	l0.Blackhole()
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err := metadata(short, ca, 0)
	cancel()
	if err == nil {
		t.Error("a request through a blackholed link was answered")
	}
	if _, err := metadata(ctx, ca, 1); err != nil {
		t.Errorf("a to broker 1 while broker 0 is blackholed: %v", err)
	}
	if _, err := metadata(ctx, cb, 0); err != nil {
		t.Errorf("b to broker 0 while a's link is blackholed: %v", err)
	}
	l0.Heal()
	if _, err := metadata(ctx, ca, 0); err != nil {
		t.Errorf("after the heal: %v", err)
	}

	// A cut: refused at once (well before the blackhole's timeout).
	a.Cut()
	start := time.Now()
	short, cancel = context.WithTimeout(ctx, 3*time.Second)
	_, err = metadata(short, ca, 1)
	cancel()
	if err == nil {
		t.Error("a request through a cut link was answered")
	}
	if _, resets := a.Link(fake.ListenAddrs()[1]).Stats(); resets == 0 {
		t.Error("the cut reset no connection")
	}
	a.Heal()
	if _, err := metadata(ctx, ca, 1); err != nil {
		t.Errorf("after the cut healed (%v after it): %v", time.Since(start), err)
	}
}

// TestNetTriggerEndTxn: a commit's EndTxn fires the trigger on the
// coordinator's link; with forward the coordinator commits although the
// client never hears so.
func TestNetTriggerEndTxn(t *testing.T) {
	fake, n := netFixture(t)
	adm := endClient(t, fake, n.End("admin"))
	topic := "netfault-endtxn"
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, 1
	req.Topics = append(req.Topics, rt)
	if _, err := req.RequestWith(context.Background(), adm); err != nil {
		t.Fatal(err)
	}
	e := n.End("producer")
	cl := endClient(t, fake, e, kgo.TransactionalID("tx"), kgo.DefaultProduceTopic(topic))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	commit := func(v string) error {
		if err := cl.BeginTransaction(); err != nil {
			return err
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			return err
		}
		return cl.EndTransaction(ctx, kgo.TryCommit)
	}
	if err := commit("one"); err != nil {
		t.Fatal(err)
	}
	isCommit := func(r kmsg.Request) bool { return r.(*kmsg.EndTxnRequest).Commit }
	tr := e.ArmOnRequest(int16(kmsg.EndTxn), isCommit, true, 300*time.Millisecond)
	err := commit("two")
	select {
	case <-tr.Fired():
	default:
		t.Fatalf("the commit's EndTxn did not fire the trigger (commit: %v)", err)
	}
	fired, healed := tr.At()
	t.Logf("fired on %s; held %v; the commit returned %v", tr.Link(), healed.Sub(fired), err)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the commit did not return after the heal: %v", err)
	}
}
