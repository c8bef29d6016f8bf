package processor

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow/internal/kafkatest"
)

// TestEnsureChangelogsConcurrently: instances of one application started
// together all see the changelog missing and all create it; the losers'
// TOPIC_ALREADY_EXISTS must not fail Run (seen in the integration suite:
// one of three workers started at once exited 1).
func TestEnsureChangelogsConcurrently(t *testing.T) {
	c := kafkatest.New(t)
	in := c.CreateTopic(t, "in", 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for round := range 3 {
		cfg := defaults()
		cfg.brokers, cfg.inputs = c.Brokers, []string{in}
		cfg.group = kafkatest.Name(t, "app")
		cfg.stateDir = "state" // only named: the changelog is wanted, nothing is opened
		t.Cleanup(func() { _, _ = c.Admin.DeleteTopics(context.Background(), changelogTopic(cfg.group, in)) })
		const n = 4
		var wg sync.WaitGroup
		errs := make([]error, n)
		ids := make([][16]byte, n)
		for i := range n {
			wg.Go(func() {
				got, err := ensureChangelogs(ctx, &cfg)
				errs[i], ids[i] = err, got[changelogTopic(cfg.group, in)]
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d, instance %d: %v", round, i, err)
			}
			if ids[i] != ids[0] || ids[i] == [16]byte{} {
				t.Fatalf("round %d: instances see changelog IDs %x and %x", round, ids[0], ids[i])
			}
		}
	}
}
