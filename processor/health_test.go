package processor_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/processor"
)

// probe asks p's handler for probe and returns the status and the health
// it served.
func probe(t *testing.T, p *processor.Processor, which processor.Probe) (int, processor.Health) {
	t.Helper()
	rec := httptest.NewRecorder()
	p.HealthHandler(which).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	var h processor.Health
	require.NoError(t, json.NewDecoder(rec.Body).Decode(&h))
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	return rec.Code, h
}

// TestHealth: the readiness and liveness a processor reports through its
// life: not ready before Run; ready once it joined, claimed and restored;
// not live while a handler hangs past the record bound; neither once it
// is fenced (with the reason), nor once it stopped.
func TestHealth(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		pl := newPipeline(t, c, 2, 400, 20)
		wake := make(chan struct{})
		var stalled atomic.Int64
		stall := func(ctx context.Context, r *kgo.Record, out processor.Emitter) error {
			if r.Offset == 50 {
				stalled.Add(1)
				<-wake
			}
			return copyHandler(ctx, r, out)
		}
		var cut kafkatest.Cutter
		a := start(t, append(pl.opts("i1", stall), processor.WithKgoOpts(cut.Opt()), processor.WithHealthRecordBound(2*time.Second))...)

		require.Eventually(t, func() bool { return a.p.Health().Ready }, 30*time.Second, 20*time.Millisecond, "ready once joined and claimed")
		code, h := probe(t, a.p, processor.ProbeReady)
		require.Equal(t, http.StatusOK, code)
		require.True(t, h.Live, "%+v", h)
		require.Equal(t, "running", h.Phase)
		code, _ = probe(t, a.p, processor.ProbeLive)
		require.Equal(t, http.StatusOK, code)

		// A handler that hangs holds its partition: not live past the
		// record bound, and the record is named.
		pl.produce(t, 0, pl.inputs)
		require.Eventually(t, func() bool { return stalled.Load() > 0 }, 30*time.Second, 10*time.Millisecond)
		require.Eventually(t, func() bool { return !a.p.Health().Live }, 30*time.Second, 50*time.Millisecond, "not live while a handler hangs")
		code, h = probe(t, a.p, processor.ProbeLive)
		require.Equal(t, http.StatusServiceUnavailable, code)
		require.NotNil(t, h.Oldest)
		require.Equal(t, int64(50), h.Oldest.Offset)
		require.Contains(t, strings.Join(h.Reasons, "; "), "@50 unfinished for")

		// A newer process with the same instance ID takes over: A, fenced,
		// is neither ready nor live, and says why.
		if kafkatest.Consumer848() {
			cut.CutFor(6*time.Second + 3*time.Second) // past newPipeline's session timeout: see TestZombieSameInstance
		}
		b := start(t, pl.opts("i1", copyHandler)...)
		rep := pl.waitDone(t, 60*time.Second)
		require.Zero(t, rep.Lost, rep.String())
		close(wake)
		require.ErrorIs(t, a.wait(t, 30*time.Second), processor.ErrFenced)
		h = a.p.Health()
		require.False(t, h.Ready)
		require.False(t, h.Live)
		require.Equal(t, "failed", h.Phase)
		require.Contains(t, strings.Join(h.Reasons, "; "), "fenced")

		// A stop: B is neither ready nor live once Run returned.
		require.True(t, b.p.Health().Ready, "%+v", b.p.Health())
		require.NoError(t, b.stop(t))
		code, h = probe(t, b.p, processor.ProbeReady)
		require.Equal(t, http.StatusServiceUnavailable, code)
		require.False(t, h.Live)
		require.Equal(t, "stopped", h.Phase)
		rep = pl.read(t)
		require.True(t, rep.ExactlyOnce(), rep.String())
	})
}

// TestHealthBeforeRun: a processor not yet run is live (nothing hangs)
// and not ready, and says so.
func TestHealthBeforeRun(t *testing.T) {
	p, err := processor.New(processor.WithBrokers("127.0.0.1:1"), processor.WithGroup("g"), processor.WithInstanceID("i"),
		processor.WithInputTopics("in"), processor.WithOutputTopic("out"), processor.WithHandler(copyHandler))
	require.NoError(t, err)
	code, h := probe(t, p, processor.ProbeReady)
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.True(t, h.Live)
	require.Equal(t, "not started", h.Phase)
	require.Equal(t, []string{"not started"}, h.Reasons)
	code, _ = probe(t, p, processor.ProbeLive)
	require.Equal(t, http.StatusOK, code)
}
