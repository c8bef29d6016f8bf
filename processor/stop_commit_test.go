package processor_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/internal/kafkatest"
)

// TestStopDuringCommit: Run's context is canceled while the broker holds a
// commit's EndTxn. The commit must finish regardless (it may already be
// applied: canceling it turns it into an unknown outcome and a rebuild),
// so the stop is clean and Stats count exactly the outputs that were
// committed. Before the fix Stats missed the whole transaction.
func TestStopDuringCommit(t *testing.T) {
	if kafkatest.Real() {
		t.Skip("holds an EndTxn in the embedded cluster")
	}
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		pl := newPipeline(t, c, 2, 200, 20)
		pl.produce(t, 0, pl.inputs)

		held := make(chan struct{})
		release := make(chan struct{})
		var once sync.Once
		var holding atomic.Bool
		c.Fake.ControlKey(kmsg.EndTxn.Int16(), func(kr kmsg.Request) (kmsg.Response, error, bool) {
			c.Fake.KeepControl()
			// Hold the first commit: it has every output (nothing is
			// committed before the records are handled).
			if req := kr.(*kmsg.EndTxnRequest); req.Commit && holding.CompareAndSwap(false, true) {
				once.Do(func() { close(held) })
				c.Fake.SleepControl(func() { <-release })
			}
			return nil, nil, false // then handled as usual
		})
		t.Cleanup(func() {
			select {
			case <-release:
			default:
				close(release)
			}
		})

		r := start(t, pl.opts("i1", copyHandler)...)
		select {
		case <-held:
		case <-time.After(30 * time.Second):
			t.Fatal("no commit reached the broker")
		}
		r.cancel()
		// Give a canceled End time to give up (what it did before the
		// fix), then let the broker answer.
		time.Sleep(200 * time.Millisecond)
		close(release)
		require.NoError(t, r.wait(t, 60*time.Second))

		// Records not fetched before the stop are not lost but left for
		// the next start: only duplicates and disorder would be wrong.
		rep := pl.read(t)
		require.Zero(t, rep.Duplicates, rep.String())
		require.Zero(t, rep.OrderViolations, rep.String())
		s := r.p.Stats()
		require.Zero(t, s.Rebuilds, "the held commit must not become an unknown outcome")
		require.Positive(t, rep.Outputs)
		require.Equal(t, int64(rep.Outputs), s.Outputs, "Stats.Outputs counts every committed output")
	})
}
