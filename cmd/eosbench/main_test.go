package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/onceflow/onceflow/internal/bench"
	"github.com/onceflow/onceflow/internal/kafkatest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if builtDir != "" {
		os.RemoveAll(builtDir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// contract lists the JSON fields that scripts rely on.
var contract = []string{
	"scenario", "mode", "messages", "sessions", "partitions", "seconds", "throughput",
	"latency_p50_ms", "latency_p90_ms", "latency_p99_ms", "latency_max_ms",
	"outputs", "dlq", "duplicates", "lost", "order_violations", "exactly_once",
	"ratio_to_franz_gts", "ratio_to_alo_raw",
}

// summaryContract lists the fields of each mode's summary that scripts
// rely on.
var summaryContract = []string{
	"mode", "runs", "throughput_median", "throughput_min", "throughput_max",
	"ratio_to_franz_gts", "exactly_once",
}

// decode parses eosbench -json output, checking every contract field is
// present in every result and every summary.
func decode(t *testing.T, out []byte) []bench.Result {
	t.Helper()
	rs, _ := decodeAll(t, out)
	return rs
}

// decodeAll is decode with the summary.
func decodeAll(t *testing.T, out []byte) ([]bench.Result, []bench.Summary) {
	t.Helper()
	var raw struct {
		Results []map[string]json.RawMessage `json:"results"`
		Summary []map[string]json.RawMessage `json:"summary"`
	}
	require.NoError(t, json.Unmarshal(out, &raw), "output: %s", out)
	require.NotNil(t, raw.Summary, "a summary array: %s", out)
	for _, r := range raw.Results {
		for _, k := range contract {
			require.Contains(t, r, k)
		}
	}
	for _, s := range raw.Summary {
		for _, k := range summaryContract {
			require.Contains(t, s, k)
		}
	}
	var parsed struct {
		Results []bench.Result  `json:"results"`
		Summary []bench.Summary `json:"summary"`
	}
	require.NoError(t, json.Unmarshal(out, &parsed))
	return parsed.Results, parsed.Summary
}

// runSmall runs eosbench on a fresh cluster with 5,000 inputs of 100
// sessions, 5% transient faults, one run of each of the given modes and
// extra flags, and returns its JSON output, decoded and raw.
func runSmall(t *testing.T, modes string, extra ...string) ([]bench.Result, string) {
	t.Helper()
	stdout, _ := runSmallOutput(t, modes, extra...)
	return decode(t, []byte(stdout)), stdout
}

// runSmallOutput is runSmall's run, returning stdout and stderr.
func runSmallOutput(t *testing.T, modes string, extra ...string) (string, string) {
	t.Helper()
	c := kafkatest.New(t)
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	status := run(ctx, append([]string{
		"-brokers", strings.Join(c.Brokers, ","),
		"-messages", "5000", "-sessions", "100",
		"-modes", modes, "-count", "1",
		"-fault-rate", "0.05", "-retry-initial", "1ms",
		"-timeout", "90s", "-json",
	}, extra...), strings.NewReader(""), &stdout, &stderr)
	require.Equal(t, 0, status, "stderr: %s", stderr.String())
	return stdout.String(), stderr.String()
}

// TestDefaultPipeline runs the default scenario, small, through the same
// code path as main.
func TestDefaultPipeline(t *testing.T) {
	rs, stdout := runSmall(t, "franz-gts,onceflow-session")
	require.Len(t, rs, 2)
	for _, k := range []string{`"commit_ns": `, `"commit_p50_ns": `, `"commit_p99_ns": `, `"commit_max_ns": `} {
		require.Equal(t, 2, strings.Count(stdout, k), "%s in each result's counters", k)
	}
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
		c := r.Counters
		require.Positive(t, c.Commits)
		require.Positive(t, c.CommitP50, "the median commit round trip")
		require.LessOrEqual(t, c.CommitP50, c.CommitP99)
		require.LessOrEqual(t, c.CommitP99, c.CommitMax)
		require.LessOrEqual(t, c.CommitMax, c.CommitNanos, "one commit's round trip is within their total")
	}
	require.Equal(t, bench.ModeGTS, rs[0].Mode)
	require.Equal(t, bench.ModeSession, rs[1].Mode)
}

// TestCount: -count 2 runs the modes twice, interleaved, each run verified;
// the summary has one entry per mode with the median, min and max of its
// runs and the ratio of medians; the warm-up is reported on stderr.
func TestCount(t *testing.T) {
	stdout, stderr := runSmallOutput(t, "franz-gts,onceflow-session", "-count", "2")
	rs, ss := decodeAll(t, []byte(stdout))
	require.Len(t, rs, 4)
	for i, want := range []struct {
		mode bench.Mode
		run  int
	}{{bench.ModeGTS, 1}, {bench.ModeSession, 1}, {bench.ModeGTS, 2}, {bench.ModeSession, 2}} {
		r := rs[i]
		require.Equal(t, want.mode, r.Mode, "run %d", i)
		require.Equal(t, want.run, r.Run, "run %d", i)
		require.True(t, r.ExactlyOnce, "%+v", r)
		require.Equal(t, bench.VerdictPass, r.Verdict, r.Failure)
		require.Equal(t, 5000, r.Outputs)
		require.Positive(t, r.Throughput)
		require.NotNil(t, r.RatioToGTS)
	}
	require.Len(t, ss, 2)
	for i, s := range ss {
		a, b := rs[i], rs[i+2] // the mode's two runs
		require.Equal(t, a.Mode, s.Mode)
		require.Equal(t, 2, s.Runs)
		require.InDelta(t, min(a.Throughput, b.Throughput), s.ThroughputMin, 1e-6)
		require.InDelta(t, max(a.Throughput, b.Throughput), s.ThroughputMax, 1e-6)
		require.InDelta(t, (a.Throughput+b.Throughput)/2, s.ThroughputMedian, 1e-6)
		require.True(t, s.ExactlyOnce)
		require.Equal(t, bench.VerdictPass, s.Verdict)
		require.NotNil(t, s.RatioToGTS)
		require.Nil(t, s.RatioToALO, "alo-raw did not run")
	}
	require.InDelta(t, 1, *ss[0].RatioToGTS, 1e-9)
	require.InDelta(t, ss[1].ThroughputMedian/ss[0].ThroughputMedian, *ss[1].RatioToGTS, 1e-9)
	require.InDelta(t, rs[1].Throughput/ss[0].ThroughputMedian, *rs[1].RatioToGTS, 1e-9, "a run's ratio is to the median")
	require.Contains(t, stdout, `"throughput_median": `)
	require.Regexp(t, `eosbench: default: warm-up took \S+: a committed transaction`, stderr)
	require.Equal(t, 1, strings.Count(stderr, "warm-up took"), stderr)
}

// TestCountTable: the text output has a row per run and a row per mode.
func TestCountTable(t *testing.T) {
	c := kafkatest.New(t)
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	status := run(ctx, []string{
		"-brokers", strings.Join(c.Brokers, ","),
		"-messages", "2000", "-sessions", "50",
		"-modes", "franz-gts,onceflow-session,onceflow-session+metrics", "-count", "2",
		"-timeout", "90s",
	}, strings.NewReader(""), &stdout, &stderr)
	require.Equal(t, 0, status, "stderr: %s", stderr.String())
	out := stdout.String()
	require.Regexp(t, `(?m)^\s+default\s+onceflow-session\s+2\s+2,000\s`, out, "the second run's row")
	require.Regexp(t, `(?m)^\s+scenario\s+mode\s+runs\s+median rec/s\s+min rec/s\s+max rec/s\s+×gts`, out)
	require.Regexp(t, `(?m)^\s+default\s+franz-gts\s+2\s+[\d,]+\s+[\d,]+\s+[\d,]+\s+1\.00\s+-\s+2/2\s+PASS$`, out, "franz-gts's summary")
	require.Contains(t, out, "default onceflow-session+metrics: metrics on: ")
	require.Contains(t, out, "(medians of their runs in this phase)")
	for _, who := range []string{"franz-gts run 1", "franz-gts run 2", "onceflow-session run 1", "onceflow-session run 2"} {
		require.Regexp(t, `(?m)^default `+who+`: [\d,]+ commits, commit round trip median [\d.,]+ ms, p99 [\d.,]+ ms, max [\d.,]+ ms, mean [\d.,]+ ms \(flush, offsets, EndTxn\)$`, out)
	}
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
		{"-count", "0"},
		{"-handler-cpu", "-1us"},
		{"-handler-cpu", "fast"},
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
