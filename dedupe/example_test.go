package dedupe_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/onceflow/onceflow/dedupe"
)

// A job calls an external HTTP endpoint once per event. Once skips events
// that were already handled; the event ID also travels as an
// Idempotency-Key header so that, in the rare case of a crash between the
// call and the durable mark, the receiver can drop the repeated call.
func Example() {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		fmt.Println("server: charge", r.Header.Get("Idempotency-Key"))
	}))
	defer srv.Close()

	store, err := dedupe.Open("dedupe", &dedupe.Options{
		FS:     vfs.NewMem(), // a real job passes a directory on disk
		Sync:   true,         // a returned mark survives a crash
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	charge := func(ctx context.Context, eventID string) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, nil)
		if err != nil {
			return err
		}
		req.Header.Set("Idempotency-Key", eventID)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("charge %s: %s", eventID, resp.Status)
		}
		return nil
	}

	ctx := context.Background()
	// The same event is delivered twice, as at-least-once transports do.
	for _, eventID := range []string{"order-42", "order-42"} {
		ran, err := store.Once(ctx, []byte(eventID), func(ctx context.Context) error {
			return charge(ctx, eventID)
		})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("deliver %s: ran=%v\n", eventID, ran)
	}
	fmt.Println("server calls:", calls.Load())
	// Output:
	// server: charge order-42
	// deliver order-42: ran=true
	// deliver order-42: ran=false
	// server calls: 1
}
