package processor

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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

// TestEnsureChangelogsWaitsForNewInput: on a cluster, the broker asked may
// not list an input topic created a moment before through another broker
// (a worker exited 1 on the 3-node cluster that way). ensureChangelogs
// asks again for a while; an input that never shows is still an error.
func TestEnsureChangelogsWaitsForNewInput(t *testing.T) {
	c := kafkatest.New(t)
	in := kafkatest.Name(t, "late-in")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := defaults()
	cfg.brokers, cfg.inputs = c.Brokers, []string{in}
	cfg.group = kafkatest.Name(t, "app")
	cfg.stateDir = "state" // only named: the changelog is wanted, nothing is opened
	t.Cleanup(func() { _, _ = c.Admin.DeleteTopics(context.Background(), in, changelogTopic(cfg.group, in)) })

	created := time.AfterFunc(300*time.Millisecond, func() { _, _ = c.Admin.CreateTopic(ctx, 2, -1, nil, in) })
	defer created.Stop()
	ids, err := ensureChangelogs(ctx, &cfg)
	require.NoError(t, err)
	require.NotZero(t, ids[changelogTopic(cfg.group, in)])

	cfg.inputs = []string{kafkatest.Name(t, "never-in")}
	_, err = ensureChangelogs(ctx, &cfg)
	require.ErrorContains(t, err, "does not exist")
}
