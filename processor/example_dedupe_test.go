package processor_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/processor"
)

// A payment job calls an external HTTP endpoint once per event. The
// upstream application sent order-42 twice: WithDedupe skips the repeat
// (no output, no call), and Once keeps the call from running again if the
// record is handled again after an aborted transaction. The event ID also
// travels as an Idempotency-Key header, which lets the endpoint drop the
// rare repeat that remains (a crash right after the call, before its mark
// was written).
func ExampleOnce() {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		fmt.Println("endpoint: charge", r.Header.Get("Idempotency-Key"))
	}))
	defer srv.Close()

	cluster, _ := kfake.NewCluster(kfake.SeedTopics(1, "orders", "payments"))
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	in, _ := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic("orders"))
	order := func(id string) *kgo.Record {
		return &kgo.Record{Key: []byte("customer-7"), Value: []byte(id),
			Headers: []kgo.RecordHeader{{Key: processor.HeaderEventID, Value: []byte(id)}}}
	}
	in.ProduceSync(context.Background(), order("order-41"), order("order-42"), order("order-42"))
	in.Close()

	charge := func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, nil)
		if err != nil {
			return err
		}
		req.Header.Set("Idempotency-Key", string(processor.EventID(ctx)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err // retried, with backoff
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("charge: %s", resp.Status)
		}
		return nil
	}

	dir, _ := os.MkdirTemp("", "payments")
	defer os.RemoveAll(dir)
	p, err := processor.New(
		processor.WithBrokers(brokers...),
		processor.WithGroup("payments"),
		processor.WithInstanceID("instance-1"),
		processor.WithInputTopics("orders"),
		processor.WithOutputTopic("payments"),
		processor.WithDedupe(dir, nil), // event ID: the event-id header
		processor.WithHandler(func(ctx context.Context, rec *kgo.Record, out processor.Emitter) error {
			if _, err := processor.Once(ctx, charge); err != nil {
				return err
			}
			out.Emit(&kgo.Record{Value: fmt.Appendf(nil, "%s paid", rec.Value)})
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
	for s := p.Stats(); s.Outputs < 2 || s.DuplicatesSkipped < 1; s = p.Stats() {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done

	// What a read_committed consumer of the output sees.
	rd, _ := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics("payments"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	defer rd.Close()
	for seen := 0; seen < 2; {
		rd.PollFetches(context.Background()).EachRecord(func(r *kgo.Record) {
			seen++
			fmt.Println(string(r.Value))
		})
	}
	fmt.Println("endpoint calls:", calls.Load(), "duplicates skipped:", p.Stats().DuplicatesSkipped)
	// Output:
	// endpoint: charge order-41
	// endpoint: charge order-42
	// order-41 paid
	// order-42 paid
	// endpoint calls: 2 duplicates skipped: 1
}
