package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/onceflow/onceflow/internal/bench"
	"github.com/onceflow/onceflow/internal/kafkatest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// contract lists the JSON fields that scripts rely on.
var contract = []string{
	"scenario", "mode", "messages", "sessions", "partitions", "seconds", "throughput",
	"latency_p50_ms", "latency_p90_ms", "latency_p99_ms", "latency_max_ms",
	"outputs", "dlq", "duplicates", "lost", "order_violations", "exactly_once",
	"ratio_to_franz_gts", "ratio_to_alo_raw",
}

// decode parses eosbench -json output, checking every contract field is
// present in every result.
func decode(t *testing.T, out []byte) []bench.Result {
	t.Helper()
	var raw struct {
		Results []map[string]json.RawMessage `json:"results"`
	}
	require.NoError(t, json.Unmarshal(out, &raw), "output: %s", out)
	for _, r := range raw.Results {
		for _, k := range contract {
			require.Contains(t, r, k)
		}
	}
	var parsed struct {
		Results []bench.Result `json:"results"`
	}
	require.NoError(t, json.Unmarshal(out, &parsed))
	return parsed.Results
}

// runSmall runs eosbench on a fresh cluster with 5,000 inputs of 100
// sessions, 5% transient faults and the given modes and extra flags, and
// returns its JSON output, decoded and raw.
func runSmall(t *testing.T, modes string, extra ...string) ([]bench.Result, string) {
	t.Helper()
	c := kafkatest.New(t)
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	status := run(ctx, append([]string{
		"-brokers", strings.Join(c.Brokers, ","),
		"-messages", "5000", "-sessions", "100",
		"-modes", modes,
		"-fault-rate", "0.05", "-retry-initial", "1ms",
		"-timeout", "90s", "-json",
	}, extra...), strings.NewReader(""), &stdout, &stderr)
	require.Equal(t, 0, status, "stderr: %s", stderr.String())
	return decode(t, stdout.Bytes()), stdout.String()
}

// TestDefaultPipeline runs the default scenario, small, through the same
// code path as main.
func TestDefaultPipeline(t *testing.T) {
	rs, _ := runSmall(t, "franz-gts,onceflow-session")
	require.Len(t, rs, 2)
	for _, r := range rs {
		require.True(t, r.ExactlyOnce, "%+v", r)
		require.Equal(t, bench.VerdictPass, r.Verdict)
		require.Equal(t, 5000, r.Outputs)
		require.Zero(t, r.Duplicates)
		require.Zero(t, r.Lost)
		require.Zero(t, r.OrderViolations)
		require.Positive(t, r.Throughput)
		require.Positive(t, r.Counters.Retries, "faults were injected")
		require.NotNil(t, r.RatioToGTS)
		require.Nil(t, r.RatioToALO, "alo-raw did not run")
	}
	require.Equal(t, bench.ModeGTS, rs[0].Mode)
	require.Equal(t, bench.ModeSession, rs[1].Mode)
}

// TestBadUsage: flag errors exit 2 without touching a cluster.
func TestBadUsage(t *testing.T) {
	for _, args := range [][]string{
		{"-modes", "nope"},
		{"-scenario", "nope"},
		{"-order", "sideways"},
		{"-size", "3"},
		{"-kill-every", "1s"},
		{"-handler-latency", "5-1ms"},
		{"-modes", "franz-gts+obs"},
		{"-modes", "nope+obs"},
	} {
		var stdout, stderr bytes.Buffer
		status := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr)
		require.Equal(t, 2, status, "%v: %s", args, stderr.String())
	}
}

// TestStatefulPipeline: with -stateful, onceflow keeps a per-session
// counter in its state store under transient faults; the output stays
// exactly once and every session's count in the changelog is right.
func TestStatefulPipeline(t *testing.T) {
	rs, stdout := runSmall(t, "franz-gts,onceflow-session", "-stateful")
	require.Len(t, rs, 2)
	gts, eos := rs[0], rs[1]
	require.Equal(t, bench.ModeGTS, gts.Mode)
	require.False(t, gts.Stateful, "franz-gts has no state: -stateful is ignored")
	require.Equal(t, bench.VerdictPass, gts.Verdict)

	require.Equal(t, bench.ModeSession, eos.Mode)
	require.True(t, eos.Stateful)
	require.True(t, eos.ExactlyOnce, "%+v", eos)
	require.Equal(t, bench.VerdictPass, eos.Verdict, eos.Failure)
	require.Zero(t, eos.StateViolations)
	require.Zero(t, eos.DLQ, "no record may find its session's state out of step")
	require.Equal(t, 5000, eos.Outputs)
	require.Positive(t, eos.Counters.Retries, "faults were injected")
	require.Contains(t, stdout, `"state_violations": 0`)
}

// TestDupRatePipeline: with -dup-rate, a tenth of the events is sent
// twice. onceflow deduplicates on the event-id header and skips every
// duplicate; franz-gts, which cannot, passes each through exactly once.
func TestDupRatePipeline(t *testing.T) {
	rs, stdout := runSmall(t, "franz-gts,onceflow-session", "-dup-rate", "0.1")
	require.Len(t, rs, 2)
	gts, eos := rs[0], rs[1]
	require.InDelta(t, 500, gts.DupsInjected, 100)
	require.Equal(t, gts.DupsInjected, eos.DupsInjected, "both modes read the same input")

	require.Equal(t, bench.ModeGTS, gts.Mode)
	require.Equal(t, bench.VerdictPass, gts.Verdict, gts.Failure)
	require.Equal(t, gts.DupsInjected, gts.Duplicates, "franz-gts passes duplicates through")
	require.Nil(t, gts.DupsSkipped)

	require.Equal(t, bench.ModeSession, eos.Mode)
	require.Equal(t, bench.VerdictPass, eos.Verdict, eos.Failure)
	require.True(t, eos.ExactlyOnce)
	require.Zero(t, eos.Duplicates)
	require.Equal(t, 5000, eos.Outputs)
	require.NotNil(t, eos.DupsSkipped)
	require.Equal(t, int64(eos.DupsInjected), *eos.DupsSkipped)
	require.Contains(t, stdout, `"duplicates_skipped": `)
}
