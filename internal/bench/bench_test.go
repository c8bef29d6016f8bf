package bench

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/onceflow/onceflow/internal/durations"
	"github.com/onceflow/onceflow/internal/verify"
	"github.com/onceflow/onceflow/processor"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestLatencySet(t *testing.T) {
	for in, want := range map[string]Latency{
		"1ms":     {Min: time.Millisecond},
		"0":       {},
		"0-5ms":   {Max: 5 * time.Millisecond},
		"1ms-2ms": {Min: time.Millisecond, Max: 2 * time.Millisecond},
		"2-5ms":   {Min: 2 * time.Millisecond, Max: 5 * time.Millisecond},
	} {
		var l Latency
		require.NoError(t, l.Set(in), in)
		require.Equal(t, want, l, in)
	}
	for _, bad := range []string{"", "x", "-1ms", "5-1ms", "1ms-"} {
		var l Latency
		require.Error(t, l.Set(bad), bad)
	}
	l := Latency{Min: time.Millisecond, Max: 2 * time.Millisecond}
	for range 100 {
		d := l.draw()
		require.True(t, d >= l.Min && d < l.Max, d)
	}
}

func TestModes(t *testing.T) {
	ms, err := ParseModes("alo-raw, franz-gts,onceflow")
	require.NoError(t, err)
	require.Equal(t, []Mode{ModeALO, ModeGTS, ModeOnceflow}, ms)
	_, err = ParseModes("alo-raw,nope")
	require.Error(t, err)
	ms, err = ParseModes("kafka-streams,kafka-streams+cores")
	require.NoError(t, err)
	require.Equal(t, ModeKafkaStreams, ms[1].base())
	require.True(t, ms[1].jvm())
	for _, bad := range []string{"onceflow-session+cores", "kafka-streams+obs", "franz-gts+cores"} {
		_, err = ParseModes(bad)
		require.Error(t, err, bad)
	}
	require.Equal(t, ModeUnordered, ModeOnceflow.resolve(processor.Unordered))
	require.Equal(t, ModeSession, ModeOnceflow.resolve(processor.OrderBySession))
	require.Equal(t, ModeGTS, ModeGTS.resolve(processor.Unordered))
	require.False(t, ModeALO.ExactlyOnce())
	require.True(t, ModeSession.ExactlyOnce())
}

// TestFaults: the faulty fraction is close to the rate, the same IDs fail
// in every instance, and only their first attempt does.
func TestFaults(t *testing.T) {
	const n = 100_000
	a, b := newWork(Latency{}, 0, 0.1, n), newWork(Latency{}, 0, 0.1, n)
	failed := 0
	for id := range uint64(n) {
		errA, errB := a.do(id, nil), b.do(id, nil)
		require.Equal(t, errA, errB)
		if errA != nil {
			failed++
			require.NoError(t, a.do(id, nil), "second attempt must succeed")
		}
	}
	require.InDelta(t, 0.1*n, failed, 0.01*n)
	require.NoError(t, newWork(Latency{}, 0, 0, n).do(7, nil))
}

func TestScenarios(t *testing.T) {
	for _, name := range ScenarioNames() {
		phases, err := Scenario(name)
		require.NoError(t, err, name)
		for _, c := range phases {
			require.NoError(t, c.Validate(), c.Scenario)
		}
	}
	_, err := Scenario("nope")
	require.Error(t, err)
}

func TestRatios(t *testing.T) {
	rs := []Result{{Mode: ModeALO, Throughput: 200}, {Mode: ModeGTS, Throughput: 100}, {Mode: ModeSession, Throughput: 50}}
	setRatios(rs)
	require.InDelta(t, 0.5, *rs[2].RatioToGTS, 1e-9)
	require.InDelta(t, 0.25, *rs[2].RatioToALO, 1e-9)
	only := []Result{{Mode: ModeSession, Throughput: 50}}
	setRatios(only)
	require.Nil(t, only[0].RatioToGTS)
	require.Nil(t, only[0].RatioToALO)
}

func TestJudge(t *testing.T) {
	rep := verify.Report{Inputs: 10, Outputs: 10, OrderViolations: 2}
	r := Result{Mode: ModeUnordered}
	r.judge(rep, "")
	require.True(t, r.ExactlyOnce)
	require.Equal(t, VerdictPass, r.Verdict)
	r = Result{Mode: ModeSession}
	r.judge(rep, "")
	require.False(t, r.ExactlyOnce)
	require.Equal(t, VerdictFail, r.Verdict)
	r = Result{Mode: ModeALO}
	r.judge(verify.Report{Inputs: 10, Outputs: 12, Duplicates: 2}, "")
	require.Equal(t, VerdictALO, r.Verdict)
	r.judge(verify.Report{Inputs: 10, Outputs: 9, Lost: 1}, "")
	require.Equal(t, VerdictFail, r.Verdict)
	r = Result{Mode: ModeGTS}
	r.judge(verify.Report{Inputs: 10, Outputs: 10}, "timed out")
	require.Equal(t, VerdictFail, r.Verdict)
}

func TestStateViolations(t *testing.T) {
	count := func(s, n int) *kgo.Record {
		return &kgo.Record{Key: append(SessionKey(s), countSuffix...), Value: binary.BigEndian.AppendUint64(nil, uint64(n))}
	}
	// 10 inputs over 3 sessions: sessions 0, 1, 2 hold 4, 3 and 3.
	good := []*kgo.Record{count(0, 1), count(1, 3), count(0, 4), count(2, 3)}
	require.Zero(t, stateViolations(good, 10, 3))
	require.Equal(t, 1, stateViolations(append(good, count(1, 4)), 10, 3), "a doubled write")
	require.Equal(t, 1, stateViolations(good[1:3], 10, 3), "a session missing")
	require.Equal(t, 1, stateViolations(append(good, &kgo.Record{Key: good[3].Key}), 10, 3), "deleted")
	require.Equal(t, 1, stateViolations(append(good, count(7, 1)), 10, 3), "a stray key")
	require.Zero(t, stateViolations([]*kgo.Record{count(0, 1)}, 1, 3), "sessions without input have no count")

	r := Result{Mode: ModeSession, Stateful: true, StateViolations: 1}
	r.judge(verify.Report{Inputs: 10, Outputs: 10}, "")
	require.True(t, r.ExactlyOnce)
	require.Equal(t, VerdictFail, r.Verdict)
	r = Result{Mode: ModeSession, Stateful: true, stateDLQ: 1}
	r.judge(verify.Report{Inputs: 10, Outputs: 9, DLQ: 1}, "")
	require.Equal(t, VerdictFail, r.Verdict)
	r = Result{Mode: ModeSession, Stateful: true}
	r.judge(verify.Report{Inputs: 10, Outputs: 10}, "")
	require.Equal(t, VerdictPass, r.Verdict)
	require.True(t, stateDeadLetter(&kgo.Record{Headers: []kgo.RecordHeader{{Key: processor.HeaderError, Value: []byte("state out of step: session s1 count 2, record seq 3")}}}))
}

// TestDupSchedule: about the asked fraction of events is sent twice, each
// duplicate after its original and at most dupMaxGap records later (or at
// the end), the same events whatever the run.
func TestDupSchedule(t *testing.T) {
	const n = 100_000
	require.Nil(t, newDupSchedule(0, n))
	require.Zero(t, newDupSchedule(0, n).injected())
	d := newDupSchedule(0.1, n)
	require.InDelta(t, 0.1*n, d.injected(), 0.01*n)
	require.Equal(t, d.at, newDupSchedule(0.1, n).at)
	seen := make(map[int]bool)
	for i, js := range d.at {
		for _, j := range js {
			require.GreaterOrEqual(t, i, j)
			require.True(t, i-j <= dupMaxGap || i == n-1, "event %d sent again after %d", j, i)
			require.False(t, seen[j])
			seen[j] = true
		}
	}
	require.Equal(t, n, newDupSchedule(1, n).injected())
}

// TestCommitCounters: a baseline's commit round trips give Counters their
// median, p99 and max; several workers' counters keep the highest of each;
// a worker's report carries them through JSON.
func TestCommitCounters(t *testing.T) {
	var none durations.Recorder
	var c Counters
	c.setCommits(&none)
	require.Zero(t, c, "no commit, no quantiles")

	var ct durations.Recorder
	for _, ms := range []int{20, 10, 15, 11, 19, 12, 18, 13, 17, 14, 16} {
		ct.Record(time.Duration(ms) * time.Millisecond)
	}
	c.setCommits(&ct)
	require.Equal(t, int64(11), c.Commits)
	require.Equal(t, int64(11*15e6), c.CommitNanos, "the total is exact")
	require.InEpsilon(t, 15e6, c.CommitP50, 0.01)
	require.Equal(t, int64(20e6), c.CommitP99, "p99 of 11: the max, capped at it")
	require.Equal(t, int64(20e6), c.CommitMax)

	sum := Counters{Commits: 11, CommitNanos: 11 * 15e6, CommitP50: c.CommitP50, CommitP99: c.CommitP99, CommitMax: c.CommitMax}
	sum.add(Counters{Commits: 3, CommitNanos: 3 * 30e6, CommitP50: 30e6, CommitP99: 31e6, CommitMax: 31e6})
	sum.add(Counters{Commits: 5, CommitNanos: 5 * 5e6, CommitP50: 5e6, CommitP99: 6e6, CommitMax: 90e6})
	require.Equal(t, Counters{Commits: 19, CommitNanos: 11*15e6 + 3*30e6 + 5*5e6, CommitP50: 30e6, CommitP99: 31e6, CommitMax: 90e6}, sum)

	js, err := json.Marshal(WorkerReport{Peaks: Peaks{Goroutines: 7}, Counters: sum})
	require.NoError(t, err)
	for _, k := range []string{`"commit_ns":`, `"commit_p50_ns":30000000`, `"commit_p99_ns":31000000`, `"commit_max_ns":90000000`} {
		require.Contains(t, string(js), k)
	}
	var back WorkerReport
	require.NoError(t, json.Unmarshal(js, &back))
	require.Equal(t, sum, back.Counters)
	require.Equal(t, 7, back.Goroutines)
}

// TestCommitNote: each run that committed has a line with its commit
// round trip's median, p99, max and mean.
func TestCommitNote(t *testing.T) {
	ms := func(f float64) int64 { return int64(f * 1e6) }
	commits := Counters{Commits: 11, CommitNanos: 11 * ms(18.7), CommitP50: ms(18.2), CommitP99: ms(40.1), CommitMax: ms(52)}
	var buf bytes.Buffer
	require.NoError(t, WriteTable(&buf, []Result{
		{Scenario: "default", Mode: ModeALO, Run: 1, Counters: Counters{Commits: 4, CommitNanos: 4 * ms(2), CommitP50: ms(2), CommitP99: ms(3), CommitMax: ms(3)}},
		{Scenario: "default", Mode: ModeGTS, Run: 1, Counters: commits},
		{Scenario: "default", Mode: ModeSession, Run: 1, Counters: commits},
		{Scenario: "default", Mode: ModeSession, Run: 2},
		{Scenario: "crash", Mode: ModeSession, Run: 1, Workers: 3, Counters: commits},
	}))
	out := buf.String()
	require.Contains(t, out, "\ndefault alo-raw: 4 commits, commit round trip median 2.0 ms, p99 3.0 ms, max 3.0 ms, mean 2.0 ms (flush, offsets)\n")
	require.Contains(t, out, "\ndefault franz-gts: 11 commits, commit round trip median 18.2 ms, p99 40.1 ms, max 52.0 ms, mean 18.7 ms (flush, offsets, EndTxn)\n")
	require.Contains(t, out, "\ndefault onceflow-session run 1: 11 commits, commit round trip median 18.2 ms, p99 40.1 ms, max 52.0 ms, mean 18.7 ms (flush, offsets, EndTxn)\n")
	require.NotContains(t, out, "default onceflow-session run 2: ", "no commit, no line")
	require.Contains(t, out, "\ncrash onceflow-session: 11 commits, commit round trip median 18.2 ms, p99 40.1 ms, max 52.0 ms, mean 18.7 ms (flush, offsets, EndTxn; median and p99: the highest of the workers')\n")
}
