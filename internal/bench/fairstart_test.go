package bench

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
)

// TestFairStart: a paced run of a pipeline that takes 2 s to start (as
// Kafka Streams' start does on a real cluster) times its records from
// when it has produced its first outputs, not from its start. Without the
// primer, the records produced during those 2 s would wait up to 2 s each
// and the median latency would be about a second; with it, the run's p50
// is a few commit intervals, and its time to first output says what the
// start cost.
func TestFairStart(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.GroupMinSessionTimeout(100*time.Millisecond))
	require.NoError(t, err)
	defer c.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	env, err := NewEnv(c.ListenAddrs(), false, log)
	require.NoError(t, err)
	defer env.Close()
	const delay = 2 * time.Second
	r := &Runner{Env: env, Log: log, startDelay: delay}
	cfg := Default()
	cfg.Modes, cfg.Count = []Mode{ModeALO}, 1
	cfg.Messages, cfg.Sessions, cfg.Partitions, cfg.Rate = 2000, 50, 3, 1000
	cfg.Timeout = time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rs, err := r.Run(ctx, cfg)
	require.NoError(t, err)
	require.Len(t, rs, 1)
	res := rs[0]
	require.Equal(t, VerdictALO, res.Verdict, "%+v", res)
	require.Zero(t, res.Lost)
	require.Positive(t, res.Primer)
	require.Less(t, res.Primer, cfg.Messages/10+1)
	require.GreaterOrEqual(t, res.FirstOutputMs, float64(delay/time.Millisecond), "the first output came after the start delay")
	// The timed records were produced after the pipeline was up: their
	// median waits for a commit or two, not for the start.
	require.Less(t, res.LatencyP50, 500.0, "p50 %.1f ms: the start-up was counted as latency", res.LatencyP50)
	require.Equal(t, int64(cfg.Messages-res.Primer), res.hist.TotalCount(), "every timed input, and no primer input, has a latency")
}

// TestPrimerSize: the primer is the shortest prefix of IDs whose sessions
// reach every partition the sessions reach, at most a tenth of the input.
func TestPrimerSize(t *testing.T) {
	require.Equal(t, 1, primerSize(1000, 1000, 1))
	k := primerSize(100_000, 1000, 6)
	require.GreaterOrEqual(t, k, 6)
	require.Less(t, k, 100)
	// 10 sessions cannot reach more than 10 of 300 partitions: the primer
	// stops once those are reached, within the first 10 IDs.
	require.LessOrEqual(t, primerSize(100_000, 10, 300), 10)
	require.Equal(t, 10, primerSize(100, 1000, 300), "capped at a tenth")
	require.Zero(t, primerSize(0, 10, 6))
}
