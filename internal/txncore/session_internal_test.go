package txncore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/onceflow/onceflow/internal/kafkatest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// joined polls until cl is a group member and returns its member ID.
func joined(t *testing.T, poll func(context.Context), cl *kgo.Client) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		poll(ctx)
		cancel()
		if m, _ := cl.GroupMetadata(); m != "" {
			return m
		}
	}
	t.Fatal("never joined the group")
	return ""
}

// TestEndTimeoutOfReplacedZombie: a zombie whose End (or flush) times out (its group
// loop is blocked, so the FENCED_INSTANCE_ID of its heartbeat never
// surfaces) while a newer process holds its instance ID is fenced, not an
// unknown outcome: rebuilding would rejoin under the instance ID and fence
// the newer process (seen in the soak on Kafka 4.2.0, docs/reliability.md
// finding 6). Without a newer holder the timeout stays outcome-unknown.
func TestEndTimeoutOfReplacedZombie(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		topic := c.CreateTopic(t, "in", 2, nil)
		group := kafkatest.Name(t, "g")
		cfg := Options{
			Brokers: c.Brokers, Group: group, InstanceID: "x", Topics: []string{topic},
			TransactionTimeout: 10 * time.Second, SessionTimeout: 6 * time.Second, RebalanceTimeout: 10 * time.Second,
		}
		zombie, err := NewSession(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer zombie.Close()
		old := joined(t, func(ctx context.Context) { zombie.Poll(ctx, 10) }, zombie.Client())

		ztx, err := zombie.Begin()
		if err != nil {
			t.Fatal(err)
		}
		timeout := context.DeadlineExceeded
		if fenced, _ := zombie.endFenced(context.Background(), old, timeout); fenced {
			t.Fatal("End timeout judged fenced while this member still holds the instance ID")
		}
		if e := ztx.FlushFailed(context.Background(), timeout); e.Class != ClassReset {
			t.Fatalf("flush timeout while this member still holds the instance ID: %v, want reset", e.Class)
		}

		newer := c.Client(t, kgo.ConsumerGroup(group), kgo.InstanceID("x"), kgo.ConsumeTopics(topic),
			kgo.SessionTimeout(6*time.Second))
		mNew := joined(t, func(ctx context.Context) { newer.PollFetches(ctx) }, newer)
		if mNew == old {
			t.Fatalf("the newer client kept the old member ID %s", old)
		}
		if fenced, _ := zombie.endFenced(context.Background(), old, timeout); !fenced {
			t.Errorf("End timeout under member %s, instance now held by %s: judged outcome-unknown, want fenced", old, mNew)
		}
		if e := ztx.FlushFailed(context.Background(), timeout); e.Class != ClassFenced {
			t.Errorf("flush timeout of a transaction begun under %s, instance now held by %s: %v, want fenced", old, mNew, e.Class)
		} else if !errors.Is(e, context.DeadlineExceeded) || !strings.Contains(e.Error(), fmt.Sprintf("holders: %q", mNew)) {
			// A process that stops as fenced names the holder it saw.
			t.Errorf("fenced flush %q: want the cause, and the holder %s named", e, mNew)
		}
		if fenced, _ := zombie.endFenced(context.Background(), old, errors.New("i/o timeout")); fenced {
			t.Error("a non-timeout, non-fencing End error judged fenced")
		}
		if fenced, _ := zombie.endFenced(context.Background(), "", timeout); fenced {
			t.Error("unknown own member ID judged fenced")
		}
	})
}

// TestFetchMaxWait pins the session's fetch.max.wait below the Java
// default of 500ms: a partition resumed after the processor's
// backpressure waits that long for a fetch already in flight to its
// broker when the broker's other partitions have nothing new, which took
// up to 0.5 s of a 2.5 s embedded eosbench run (docs/benchmarks.md, "A resumed
// partition no longer waits out fetch.max.wait").
func TestFetchMaxWait(t *testing.T) {
	s, err := NewSession(Options{Brokers: []string{"127.0.0.1:1"}, Group: "g", InstanceID: "i", Topics: []string{"t"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.Client().OptValue(kgo.FetchMaxWait); got != 100*time.Millisecond {
		t.Errorf("fetch.max.wait %v, want 100ms", got)
	}
}
