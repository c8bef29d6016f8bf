package main

// Not part of the quick start: TestModuleAsServed (internal/quickstart)
// puts this file beside the README's main.go in a module of its own, which
// gets onceflow as the Go proxy serves it and franz-go from upstream, and
// runs it once per group protocol (ONCEFLOW_GROUP_PROTOCOL).

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/processor"
)

// TestQuickstartJob runs the quick start's job (its topics and handler,
// confirm) on kfake with two instances: the second joins a third of the
// way in, the first stops two thirds of the way in. Every request must
// come out exactly once, as an event or a dead letter, read
// read_committed, within a bounded time.
func TestQuickstartJob(t *testing.T) {
	protocol := processor.GroupProtocol(os.Getenv("ONCEFLOW_GROUP_PROTOCOL"))
	if protocol == "" {
		protocol = processor.GroupProtocolClassic
	}
	const requests, trips = 10_000, 200
	const in, out, dlq = "booking-requests", "booking-events", "booking-requests-dlq"
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(4, in, out), kfake.SeedTopics(1, dlq),
		kfake.GroupMinSessionTimeout(100*time.Millisecond),
		kfake.BrokerConfigs(map[string]string{ // KIP-848 groups take these from the broker
			"group.consumer.session.timeout.ms":    "6000",
			"group.consumer.heartbeat.interval.ms": "250",
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if protocol == processor.GroupProtocolConsumer {
		// Kafka hands a stopped static member's partitions on after
		// the session timeout; kfake keeps them for ever. Make its
		// leave a full one (internal/kafkatest does the same).
		c.ControlKey(int16(kmsg.ConsumerGroupHeartbeat), func(req kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			if hb := req.(*kmsg.ConsumerGroupHeartbeatRequest); hb.MemberEpoch == -2 {
				hb.MemberEpoch = -1
			}
			return nil, nil, false
		})
	}
	brokers := c.ListenAddrs()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// The requests arrive over about 15s, so that instances join and
	// leave while transactions are open.
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(in))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produced := make(chan error, 1)
	go func() {
		const batch = 50
		for i := 0; i < requests; i += batch {
			rs := make([]*kgo.Record, 0, batch)
			for j := i; j < i+batch; j++ {
				// Every fifth request asks for no seats: a dead letter.
				v := fmt.Appendf(nil, `{"id":"b-%d","seats":%d}`, j, j%5)
				rs = append(rs, &kgo.Record{Key: fmt.Appendf(nil, "trip-%d", j%trips), Value: v})
			}
			if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
				produced <- err
				return
			}
			time.Sleep(75 * time.Millisecond)
		}
		produced <- nil
	}()

	seen := newSeen()
	rd, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(out, dlq),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	readCtx, stopReading := context.WithCancel(ctx)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		for readCtx.Err() == nil {
			rd.PollFetches(readCtx).EachRecord(seen.add)
		}
	}()

	start := time.Now()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	runInstance := func(name string) (stop func() error) {
		p, err := processor.New(
			processor.WithBrokers(brokers...),
			processor.WithGroup("bookings"),
			processor.WithInstanceID(name),
			processor.WithInputTopics(in),
			processor.WithOutputTopic(out),
			processor.WithDLQTopic(dlq),
			processor.WithHandler(confirm),
			processor.WithLogger(log.With("instance", name)),
			processor.WithGroupProtocol(protocol),
			processor.WithSessionTimeout(6*time.Second),
			processor.WithRebalanceTimeout(10*time.Second),
			processor.WithTransactionTimeout(10*time.Second),
			processor.WithDrainTimeout(2*time.Second),
		)
		if err != nil {
			t.Fatal(err)
		}
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- p.Run(runCtx) }()
		return func() error {
			cancel()
			select {
			case err := <-done:
				return err
			case <-time.After(60 * time.Second):
				return fmt.Errorf("instance %s: Run did not return within 60s of its stop", name)
			}
		}
	}
	waitFor := func(n int, what string) {
		deadline := time.Now().Add(90 * time.Second)
		for seen.count() < n {
			if time.Now().After(deadline) {
				t.Fatalf("%s (%s protocol): %d of %d requests out after %v", what, protocol, seen.count(), requests, time.Since(start).Round(time.Millisecond))
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Logf("%d requests out after %v: %s", seen.count(), time.Since(start).Round(time.Millisecond), what)
	}

	stopA := runInstance("a")
	waitFor(requests/3, "a alone")
	stopB := runInstance("b")
	waitFor(2*requests/3, "a and b")
	if err := stopA(); err != nil {
		t.Fatalf("stopping a: %v", err)
	}
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	waitFor(requests, "b after a stopped")
	if err := stopB(); err != nil {
		t.Fatalf("stopping b: %v", err)
	}
	time.Sleep(time.Second) // a duplicate would come now
	stopReading()
	<-readDone
	rd.Close()

	events, dead, dups := seen.result()
	if dups != 0 || events+dead != requests || dead != requests/5 {
		t.Fatalf("not exactly once (%s protocol): %d events, %d dead letters, %d duplicates, of %d requests (%d should be dead letters)",
			protocol, events, dead, dups, requests, requests/5)
	}
	t.Logf("exactly once (%s protocol): %d events, %d dead letters, in %v", protocol, events, dead, time.Since(start).Round(time.Millisecond))
}

// seen counts the requests read back, by ID.
type seen struct {
	mu                 sync.Mutex
	ids                map[string]int
	events, dead, dups int
}

func newSeen() *seen { return &seen{ids: make(map[string]int)} }

func (s *seen) add(r *kgo.Record) {
	var v struct{ ID string }
	_ = json.Unmarshal(r.Value, &v) // an event, or a dead letter: the request
	id := v.ID
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ids[id]++; s.ids[id] > 1 {
		s.dups++
		return
	}
	if r.Topic == "booking-events" {
		s.events++
	} else {
		s.dead++
	}
}

func (s *seen) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ids)
}

func (s *seen) result() (events, dead, dups int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.events, s.dead, s.dups
}
