package processor_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/internal/verify"
	"github.com/onceflow/onceflow/processor"
)

// TestMetadataBound: one record stays unfinished while thousands above it
// finish in a pattern that makes the map of finished records large. The
// committed metadata never exceeds the configured bound: completions wait
// and fetching pauses instead. Once the record finishes, all commits.
func TestMetadataBound(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		const bound = 128
		pl := newPipeline(t, c, 1, 3000, 2)
		pl.produce(t, 0, pl.inputs)
		release := make(chan struct{})
		h := func(ctx context.Context, r *kgo.Record, out processor.Emitter) error {
			// Session 0 (even IDs) blocks on its first record, so
			// finished records alternate with unfinished ones: the worst
			// case for the map.
			if p, _ := verify.Decode(r.Value); p.ID == 0 {
				<-release
			}
			return copyHandler(ctx, r, out)
		}
		r := start(t, append(pl.opts("i1", h), processor.WithMaxCommitMetadataBytes(bound))...)

		deadline := time.Now().Add(3 * time.Second)
		maxLen := 0
		for time.Now().Before(deadline) {
			offs, err := c.Admin.FetchOffsets(context.Background(), pl.group)
			if err != nil {
				time.Sleep(50 * time.Millisecond)
				continue // the group may not exist yet
			}
			offs.Each(func(o kadm.OffsetResponse) { maxLen = max(maxLen, len(o.Metadata)) })
			time.Sleep(50 * time.Millisecond)
		}
		require.Positive(t, maxLen, "finished records above the blocked one must be in the metadata")
		require.LessOrEqual(t, maxLen, bound)
		outputs := len(c.ReadCommitted(t, pl.out))
		require.Less(t, outputs, pl.inputs/2, "completions past the bound must wait")
		t.Logf("metadata %d bytes (bound %d), %d outputs committed while blocked", maxLen, bound, outputs)

		close(release)
		pl.waitDone(t, 60*time.Second)
		require.NoError(t, r.stop(t))
		rep := pl.read(t)
		require.True(t, rep.ExactlyOnce(), rep.String())
		require.Equal(t, pl.inputs, rep.Outputs)
	})
}
