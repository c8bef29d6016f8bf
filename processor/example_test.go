package processor_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/processor"
)

// The README's quick start, on an in-process cluster: booking requests in,
// booking events out, and a request that cannot be parsed to the
// dead-letter topic, all committed exactly once with the input offsets.
func ExampleNew() {
	cluster, err := kfake.NewCluster(kfake.SeedTopics(1, "booking-requests", "booking-events", "booking-requests-dlq"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs() // a real job: the bootstrap servers
	ctx := context.Background()

	in, _ := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic("booking-requests"))
	in.ProduceSync(ctx,
		&kgo.Record{Key: []byte("trip-1"), Value: []byte("book London")},
		&kgo.Record{Key: []byte("trip-2"), Value: []byte("bok Rome")},
		&kgo.Record{Key: []byte("trip-1"), Value: []byte("book Paris")},
	)
	in.Close()

	p, err := processor.New(
		processor.WithBrokers(brokers...),
		processor.WithGroup("bookings"),
		processor.WithInstanceID("instance-1"), // stable across restarts: os.Getenv("POD_NAME"), say
		processor.WithInputTopics("booking-requests"),
		processor.WithOutputTopic("booking-events"),
		processor.WithDLQTopic("booking-requests-dlq"),
		processor.WithHandler(func(ctx context.Context, rec *kgo.Record, out processor.Emitter) error {
			city, ok := strings.CutPrefix(string(rec.Value), "book ")
			if !ok {
				return processor.Permanent(fmt.Errorf("unknown request %q", rec.Value)) // to the DLQ, no retries
			}
			// An emitted record without a key takes the input's: a
			// session's outputs stay in one partition, in order.
			out.Emit(&kgo.Record{Value: fmt.Appendf(nil, "%s booked to %s", rec.Key, city)})
			return nil // a plain error is retried
		}),
	)
	if err != nil {
		fmt.Println(err) // invalid options fail here, with the option's name
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- p.Run(ctx) }() // until ctx is done; then drains and commits

	// What read_committed consumers see.
	rd, _ := kgo.NewClient(kgo.SeedBrokers(brokers...),
		kgo.ConsumeTopics("booking-events", "booking-requests-dlq"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	defer rd.Close()
	var events, dead []string
	for len(events) < 2 || len(dead) < 1 {
		rd.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			if r.Topic == "booking-events" {
				events = append(events, string(r.Value))
				return
			}
			for _, h := range r.Headers {
				if h.Key == processor.HeaderReason {
					dead = append(dead, fmt.Sprintf("%s (%s)", r.Value, h.Value))
				}
			}
		})
	}
	cancel()
	fmt.Println("Run:", <-done)
	fmt.Println(strings.Join(events, "\n"))
	fmt.Println("dead letter:", strings.Join(dead, ", "))
	// Output:
	// Run: <nil>
	// trip-1 booked to London
	// trip-1 booked to Paris
	// dead letter: bok Rome (permanent)
}
