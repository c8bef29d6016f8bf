package bench

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/onceflow/onceflow/internal/verify"
)

// TestScalePhases: a backlog and a paced phase per point, points with more
// instances than partitions skipped and named, bad counts refused.
func TestScalePhases(t *testing.T) {
	sw := DefaultScaleSweep(false)
	ps, skipped, err := ScalePhases(ScaleBase(false), sw)
	require.NoError(t, err)
	require.Empty(t, skipped)
	require.Len(t, ps, 2*len(sw.Partitions)*len(sw.Instances))
	for i := 0; i < len(ps); i += 2 {
		backlog, paced := ps[i], ps[i+1]
		require.NoError(t, backlog.Validate())
		require.NoError(t, paced.Validate())
		require.Zero(t, backlog.Rate)
		require.Equal(t, 5000.0, paced.Rate)
		require.Equal(t, 50_000, paced.Messages)
		require.Equal(t, backlog.Partitions, paced.Partitions)
		require.Positive(t, backlog.Workers)
		require.GreaterOrEqual(t, backlog.Sessions, 4*backlog.Partitions)
		require.True(t, backlog.DropTopics && backlog.Bounded)
	}
	require.Equal(t, "scale/p300/i3", ps[len(ps)-2].Scenario)
	require.Equal(t, "scale/p300/i3/rate5000", ps[len(ps)-1].Scenario)

	full := DefaultScaleSweep(true)
	ps, skipped, err = ScalePhases(ScaleBase(true), full)
	require.NoError(t, err)
	require.Equal(t, []Skipped{{6, 12, "12 instances for 6 partitions: the extra instances would own nothing"}}, skipped)
	require.Len(t, ps, 2*(4*4-1))
	require.Contains(t, ps[0].Modes, ModeKafkaStreams)

	for _, bad := range []ScaleSweep{
		{Partitions: []int{0, 6}, Instances: []int{1}, Rate: 1, PacedFor: time.Second},
		{Partitions: []int{6}, Instances: []int{-1}, Rate: 1, PacedFor: time.Second},
		{Partitions: []int{6}, Instances: []int{12}, Rate: 1, PacedFor: time.Second},
		{Partitions: nil, Instances: []int{1}, Rate: 1, PacedFor: time.Second},
	} {
		_, _, err := ScalePhases(ScaleBase(false), bad)
		require.Error(t, err, "%+v", bad)
	}
}

// TestCheckFit: memory, this process's files, and the files and maps of
// brokers on this machine are each checked; an embedded cluster or remote
// brokers skip the brokers' part.
func TestCheckFit(t *testing.T) {
	roomy := Machine{MemAvailable: 20 << 30, OpenFiles: 20_000, MaxMapCount: 65_530}
	c := ScaleBase(true)
	c.Partitions, c.Workers, c.Rate = 1000, 12, 5000
	require.NoError(t, CheckFit([]Config{c}, roomy, false, true), "5 runs of 2,001 partitions fit in 20,000 files")

	many := c
	many.Count = 3
	err := CheckFit([]Config{many}, roomy, false, true)
	require.ErrorContains(t, err, "30,015 partitions at once (15 runs)")
	require.ErrorContains(t, err, "ulimit -n")
	require.NoError(t, CheckFit([]Config{many}, roomy, true, false), "kfake holds partitions in memory, not files")
	require.NoError(t, CheckFit([]Config{many}, roomy, false, false), "remote brokers: their limits are unknown here")

	maps := roomy
	maps.OpenFiles, maps.MaxMapCount = 1<<20, 10_000
	require.ErrorContains(t, CheckFit([]Config{c}, maps, false, true), "vm.max_map_count")

	small := roomy
	small.MemAvailable = 8 << 30
	err = CheckFit([]Config{c}, small, true, false)
	require.ErrorContains(t, err, "12 instances need about 15,360 MiB")
	goOnly := c
	goOnly.Modes = ScaleModes
	require.NoError(t, CheckFit([]Config{goOnly}, small, true, false), "Go workers are small")

	files := roomy
	files.OpenFiles = 100
	require.ErrorContains(t, CheckFit([]Config{goOnly}, files, true, false), "open files in this process")
	require.NoError(t, CheckFit([]Config{goOnly}, Machine{}, false, true), "unknown limits are not checked")
}

func TestLocalBrokers(t *testing.T) {
	require.True(t, LocalBrokers([]string{"127.0.0.1:20100", "localhost:9092", "[::1]:9"}))
	require.False(t, LocalBrokers([]string{"127.0.0.1:20100", "kafka-1:9092"}))
	require.False(t, LocalBrokers(nil))
}

// TestJudgeDNF: a bounded run cut short is a DNF when what it output
// verified, a FAIL when that holds a duplicate.
func TestJudgeDNF(t *testing.T) {
	ch := verify.NewChecker(3)
	p := verify.Payload{ID: 0, Seq: 0}
	ch.Output(verify.Observed{Session: "s0", Payload: p})
	var r Result
	r.Mode = ModeGTS
	r.judgeDNF(ch.Report(), "timed out after 1s with 1 of 3 inputs accounted for")
	require.Equal(t, VerdictDNF, r.Verdict)
	require.False(t, r.Failed())
	require.Equal(t, 2, r.Lost)
	ch.Output(verify.Observed{Session: "s0", Payload: p})
	r.judgeDNF(ch.Report(), "timed out")
	require.Equal(t, VerdictFail, r.Verdict)
	require.Contains(t, r.Failure, "not exactly once")
}

// TestWriteScaleTable: one row per point and mode, the backlog phase's
// figures beside the paced phase's latency.
func TestWriteScaleTable(t *testing.T) {
	backlog := Result{Scenario: "scale/p60/i3", Mode: ModeSession, Messages: 200_000, Partitions: 60, Workers: 3,
		Throughput: 150_000, Verdict: VerdictPass, CPUSeconds: 6, Peaks: &Peaks{RSSBytes: 100 << 20},
		Counters: Counters{Commits: 100, CommitP50: int64(50 * time.Millisecond), RequestCount: 1000, RequestBytes: 100 << 20}}
	paced := Result{Scenario: "scale/p60/i3/rate5000", Mode: ModeSession, Messages: 50_000, Partitions: 60, Workers: 3,
		Rate: 5000, LatencyP50: 210, LatencyP99: 800, FirstOutputMs: 1500, Verdict: VerdictPass}
	dnf := Result{Scenario: "scale/p60/i3", Mode: ModeGTS, Messages: 200_000, Partitions: 60, Workers: 3,
		Throughput: 900, Verdict: VerdictDNF, Failure: "timed out after 5m0s with 12 of 200000 inputs accounted for"}
	var buf bytes.Buffer
	require.NoError(t, WriteScaleTable(&buf, []Result{{Scenario: "default"}, backlog, paced, dnf}))
	out := buf.String()
	t.Log(out)
	require.Contains(t, out, "partitions  instances")
	// rec/s, p50, p99, commit p50, rec/txn, req/commit, KiB/commit, RSS,
	// CPU s per M records per instance (6 s / 0.2 M / 3), first output.
	require.Regexp(t, `60\s+3\s+onceflow-session\s+150,000\s+210\s+800\s+50\s+2,000\s+10\.0\s+1,024\s+100\s+10\.0\s+1,500\s+PASS,PASS`, out)
	require.Regexp(t, `60\s+3\s+franz-gts\s+900\s+-`, out)
	require.Contains(t, out, "scale/p60/i3 franz-gts: did not finish: timed out after 5m0s with 12 of 200000")
	buf.Reset()
	require.NoError(t, WriteScaleTable(&buf, []Result{{Scenario: "default"}}))
	require.Empty(t, buf.String())

	require.True(t, HasScale([]Result{{Scenario: "default"}, backlog}))
	require.False(t, HasScale([]Result{{Scenario: "default"}}))
	wide := backlog
	wide.Scenario, wide.Partitions, wide.Throughput = "scale/p300/i3", 300, 90_000
	require.NoError(t, WriteScalePlot(&buf, []Result{backlog, paced, dnf, wide}))
	require.Contains(t, buf.String(), "<svg")
	require.Contains(t, buf.String(), "onceflow-session × 3")
}
