package main

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/onceflow/onceflow/internal/bench"
	"github.com/onceflow/onceflow/internal/kafkatest"
)

// TestScaleBadInput: counts of zero, more instances than partitions, and
// a sweep the machine cannot hold are refused with exit status 2 before
// anything is made. The brokers given cannot be reached (nothing listens
// on port 1): had eosbench got as far as creating a topic, it would have
// failed differently, and only after retrying.
func TestScaleBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-scale-partitions", "0,6"}, "-scale-partitions: 0 is not a partition count"},
		{[]string{"-scale-instances", "0"}, "-scale-instances: 0 is not an instance count"},
		{[]string{"-scale-partitions", "6", "-scale-instances", "12"}, "no point of the sweep has at least as many partitions ([6]) as instances ([12])"},
		{[]string{"-scale-partitions", "x"}, `"x" is not a whole number`},
		{[]string{"-scale-full", "-count", "3"}, "partitions at once (15 runs) need about"},
		{[]string{"-scale-partitions", "6", "-workers", "7"}, "-workers 7 is more instances than -partitions 6"},
	} {
		var stdout, stderr bytes.Buffer
		start := time.Now()
		args := append([]string{"-scenario", "scale", "-brokers", "127.0.0.1:1"}, tc.args...)
		status := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr)
		require.Equal(t, 2, status, "%v: stderr: %s", tc.args, stderr.String())
		require.Contains(t, stderr.String(), tc.want, tc.args)
		require.Less(t, time.Since(start), 5*time.Second, "refused before any broker was asked")
		require.Empty(t, stdout.String())
	}
	// Outside the scale scenario too.
	var stderr bytes.Buffer
	require.Equal(t, 2, run(context.Background(), []string{"-brokers", "127.0.0.1:1", "-workers", "7"}, strings.NewReader(""), &bytes.Buffer{}, &stderr))
	require.Contains(t, stderr.String(), "-workers 7 is more instances than -partitions 6")
}

// TestScaleScenario runs a small sweep: 4 partitions × 1 and 2 instances
// (8 × ... would be skipped), onceflow-session and alo-raw, each point
// from a backlog and paced, every run verified, the table printed.
func TestScaleScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs subprocesses")
	}
	c := kafkatest.New(t)
	bin := buildBinary(t)
	args := []string{
		"-scenario", "scale", "-brokers", strings.Join(c.Brokers, ","),
		"-scale-partitions", "4", "-scale-instances", "1,2,8",
		"-modes", "onceflow-session,alo-raw", "-messages", "3000", "-scale-rate", "3000",
		"-timeout", "90s",
	}
	cmd := exec.Command(bin, append(args, "-json")...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("stderr:\n%s", stderr.String())
	require.NoError(t, err, "stdout:\n%s", stdout.String())
	require.Contains(t, stderr.String(), "scale: 4 partitions × 8 instances skipped")
	rs := decode(t, stdout.Bytes())
	require.Len(t, rs, 8, "2 points × (backlog, paced) × 2 modes")
	for _, r := range rs {
		require.Contains(t, []string{bench.VerdictPass, bench.VerdictALO}, r.Verdict, "%s %s: %s", r.Scenario, r.Mode, r.Failure)
		require.Zero(t, r.Lost, r.Scenario)
		require.Equal(t, 4, r.Partitions)
		require.Positive(t, r.Workers)
		require.Positive(t, r.CPUSeconds, "%s %s: the workers' CPU", r.Scenario, r.Mode)
		require.Positive(t, r.Counters.RequestCount, "%s %s: requests counted", r.Scenario, r.Mode)
		require.Positive(t, r.FirstOutputMs, r.Scenario)
		if r.Rate > 0 {
			require.Positive(t, r.Primer, "%s: paced runs are primed", r.Scenario)
			require.Positive(t, r.LatencyP50)
		}
		if r.Mode == bench.ModeSession {
			require.True(t, r.ExactlyOnce, r.Scenario)
		}
	}
	// The table: rerun the report from the same results is not possible
	// from JSON, so check it through WriteScaleTable's own test; here the
	// scenario names say which point each run belongs to.
	require.Equal(t, "scale/p4/i1", rs[0].Scenario)
	require.Equal(t, "scale/p4/i2/rate3000", rs[len(rs)-1].Scenario)
}
