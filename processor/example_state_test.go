package processor_test

import (
	"context"
	"fmt"
	"os"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/processor"
	"github.com/onceflow/onceflow/statestore"
)

// A stateful booking job: each session's destination lives in state, and
// a correction is applied to the booking before it, never instead of it.
func ExampleStateFrom() {
	cluster, _ := kfake.NewCluster(kfake.SeedTopics(1, "requests", "events"))
	defer cluster.Close()
	brokers := cluster.ListenAddrs()

	in, _ := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic("requests"))
	in.ProduceSync(context.Background(),
		&kgo.Record{Key: []byte("trip-1"), Value: []byte("book London")},
		&kgo.Record{Key: []byte("trip-1"), Value: []byte("set Paris")},
	)
	in.Close()

	dir, _ := os.MkdirTemp("", "bookings")
	defer os.RemoveAll(dir)
	p, err := processor.New(
		processor.WithBrokers(brokers...),
		processor.WithGroup("bookings"),
		processor.WithInstanceID("instance-1"),
		processor.WithInputTopics("requests"),
		processor.WithOutputTopic("events"),
		processor.WithStateStore(dir, nil),
		processor.WithHandler(func(ctx context.Context, rec *kgo.Record, out processor.Emitter) error {
			state := processor.StateFrom(ctx)
			key := []byte(string(rec.Key) + "/destination")
			var cmd, city string
			fmt.Sscan(string(rec.Value), &cmd, &city)
			if cmd == "set" {
				if _, booked, err := state.Get(key); err != nil || !booked {
					return processor.Permanent(fmt.Errorf("no booking to correct: %v", err))
				}
			}
			state.Set(key, []byte(city))
			out.Emit(&kgo.Record{Value: fmt.Appendf(nil, "%s is going to %s", rec.Key, city)})
			return nil
		}),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- p.Run(ctx) }()
	// What a read_committed consumer of the output sees.
	rd, _ := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics("events"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	defer rd.Close()
	for seen := 0; seen < 2; {
		rd.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			seen++
			fmt.Println(string(r.Value))
		})
	}
	cancel()
	<-done

	// The processor's store holds the committed state; with the
	// processor stopped, it can be opened to inspect it.

	store, _ := statestore.Open(dir, nil)
	defer store.Close()
	v, _, _ := store.Get(statestore.Partition{Topic: "requests", Partition: 0}, []byte("trip-1/destination"))
	fmt.Println("final state:", string(v))
	// Output:
	// trip-1 is going to London
	// trip-1 is going to Paris
	// final state: Paris
}
