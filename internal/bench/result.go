package bench

import (
	"fmt"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/onceflow/onceflow/internal/verify"
)

// Result is one mode's run. The first fields are eosbench's JSON
// contract; the rest are extras, omitted when empty.
type Result struct {
	Scenario        string  `json:"scenario"`
	Mode            Mode    `json:"mode"`
	Messages        int     `json:"messages"` // inputs awaited and verified
	Sessions        int     `json:"sessions"`
	Partitions      int     `json:"partitions"`
	Seconds         float64 `json:"seconds"`    // processing window
	Throughput      float64 `json:"throughput"` // Messages / Seconds
	LatencyP50      float64 `json:"latency_p50_ms"`
	LatencyP90      float64 `json:"latency_p90_ms"`
	LatencyP99      float64 `json:"latency_p99_ms"`
	LatencyMax      float64 `json:"latency_max_ms"`
	Outputs         int     `json:"outputs"`
	DLQ             int     `json:"dlq"`
	Duplicates      int     `json:"duplicates"`
	Lost            int     `json:"lost"`
	OrderViolations int     `json:"order_violations"`
	ExactlyOnce     bool    `json:"exactly_once"`
	// Ratios to the median throughput of the baseline's runs in the
	// phase; null when it did not run.
	RatioToGTS *float64 `json:"ratio_to_franz_gts"`
	RatioToALO *float64 `json:"ratio_to_alo_raw"`
	// RatioToKStreams is to the median of kafka-streams's runs, when it
	// ran in the phase: the peer the other modes are set beside.
	RatioToKStreams *float64 `json:"ratio_to_kafka_streams,omitempty"`
	// Run numbers a mode's runs in the phase from 1 (Config.Count, or the
	// mode listed again in Config.Modes).
	Run int `json:"run"`

	Verdict   string `json:"verdict"` // PASS, ALO (at-least-once kept) or FAIL
	Failure   string `json:"failure,omitempty"`
	Malformed int    `json:"malformed,omitempty"`
	Capped    bool   `json:"capped,omitempty"` // a baseline run on the first inputs only
	// Primer is how many of a paced run's inputs (IDs 0..Primer-1) were
	// written before its clock started and output before the timed feed
	// began (the fair start): verified, but neither timed nor counted in
	// the throughput.
	Primer int `json:"primer,omitempty"`
	// CPUSeconds is the CPU time (user and system) of the run's worker
	// processes, every instance and restart (subprocess and JVM modes;
	// a JVM's includes its start before the clock).
	CPUSeconds float64 `json:"cpu_seconds,omitempty"`
	// StreamThreads is a kafka-streams instance's num.stream.threads.
	StreamThreads int `json:"stream_threads,omitempty"`
	// FirstOutputMs is the time from the run's start (its pipeline
	// started or released) to its first output becoming visible.
	FirstOutputMs float64  `json:"first_output_ms,omitempty"`
	Rate          float64  `json:"offered_rate,omitempty"`
	Workers       int      `json:"workers,omitempty"`
	Kills         int      `json:"kills,omitempty"`
	Crashes       int      `json:"unexpected_exits,omitempty"`
	Counters      Counters `json:"counters"`
	HandlerMs     float64  `json:"handler_mean_ms,omitempty"` // measured mean simulated handler time
	// -handler-cpu: the asked CPU time per record and the SHA-256 rounds
	// it was calibrated to, the same for every run of the phase.
	HandlerCPUMicros float64 `json:"handler_cpu_us,omitempty"`
	HandlerCPURounds int     `json:"handler_cpu_rounds,omitempty"`
	*Peaks
	// Cores used on average while the run processed, of MachineCores: by
	// eosbench's process (in-process pipelines, the embedded cluster, the
	// observer) and by the whole machine, other jobs included. On a shared
	// machine they say what a parallel mode had to work with.
	CoresSelf    float64 `json:"cores_eosbench,omitempty"`
	CoresMachine float64 `json:"cores_machine,omitempty"`
	MachineCores int     `json:"machine_cores,omitempty"`
	Anchor       *Anchor `json:"anchor,omitempty"`
	// RatioToUnobserved, for a twin (ObserveSuffix and the like), is its
	// throughput over the median of the plain mode's runs in the phase.
	RatioToUnobserved *float64 `json:"ratio_to_unobserved,omitempty"`

	// Stateful: the handler kept a per-session counter in the state store
	// (-stateful). StateViolations counts the sessions whose final count,
	// read back from the changelog, is not their number of inputs.
	Stateful        bool `json:"stateful"`
	StateViolations int  `json:"state_violations"`

	// -dup-rate: duplicate input records sent (DupsInjected) and, for
	// onceflow modes, the duplicates the processor counted as skipped
	// (null when unknown: killed workers take their counts with them).
	DupRate      float64 `json:"dup_rate,omitempty"`
	DupsInjected int     `json:"duplicates_injected,omitempty"`
	DupsSkipped  *int64  `json:"duplicates_skipped,omitempty"`

	// Evidence is what a failed run leaves for its diagnosis.
	Evidence *Evidence `json:"evidence,omitempty"`

	hist             *hdrhistogram.Histogram
	stateDLQ         int   // dead letters of records that found their state out of step
	statefulIgnored  bool  // -stateful asked of a mode without state
	commitIntervalMs int64 // the commit interval asked of the mode (kafka-streams: commit.interval.ms)

	timeline *timeline // inputs accounted for over the run (-plot)
}

// Verdicts.
const (
	VerdictPass = "PASS" // exactly once, in session order
	VerdictALO  = "ALO"  // at-least-once mode: nothing lost (duplicates are its nature)
	VerdictFail = "FAIL"
	// VerdictDNF: a bounded run (Config.Bounded) that did not finish in
	// time, whose output so far verified; Failure says how far it got.
	VerdictDNF = "DNF"
)

// Failed reports whether the run failed: verification of an exactly-once
// mode, loss in the at-least-once mode, a timeout or an error.
func (r *Result) Failed() bool { return r.Verdict == VerdictFail }

func (r *Result) judge(rep verify.Report, failure string) {
	r.Outputs, r.DLQ = rep.Outputs, rep.DLQ
	r.Duplicates, r.Lost, r.OrderViolations, r.Malformed = rep.Duplicates, rep.Lost, rep.OrderViolations, rep.Malformed
	r.ExactlyOnce = rep.ExactlyOnce()
	if !r.Mode.ordered() {
		// Unordered promises no order: violations are reported, not judged.
		r.ExactlyOnce = rep.Duplicates == 0 && rep.Lost == 0 && rep.Malformed == 0
	}
	r.Failure = failure
	passThrough := r.DupsInjected > 0 && !r.Mode.dedupes()
	if passThrough {
		// Without deduplication each duplicate input is a record of its
		// own, to be output exactly once: as many duplicate outputs as
		// duplicate inputs is right.
		judged := rep
		judged.Duplicates = max(rep.Duplicates-r.DupsInjected, 0)
		r.ExactlyOnce = judged.ExactlyOnce() && rep.Duplicates >= r.DupsInjected
		if !r.Mode.ordered() {
			r.ExactlyOnce = judged.Duplicates == 0 && rep.Duplicates >= r.DupsInjected && rep.Lost == 0 && rep.Malformed == 0
		}
	}
	switch {
	case failure != "":
		r.Verdict = VerdictFail
	case r.Mode.ExactlyOnce() && !r.ExactlyOnce && passThrough:
		r.Verdict, r.Failure = VerdictFail, fmt.Sprintf("not exactly once: %d duplicate outputs for %d duplicate inputs: %s", rep.Duplicates, r.DupsInjected, rep.String())
	case r.Mode.ExactlyOnce() && !r.ExactlyOnce:
		r.Verdict, r.Failure = VerdictFail, "not exactly once: "+rep.String()
	case r.DupsSkipped != nil && *r.DupsSkipped != int64(r.DupsInjected):
		r.Verdict, r.Failure = VerdictFail, fmt.Sprintf("dedupe: %d duplicates skipped, %d injected", *r.DupsSkipped, r.DupsInjected)
	case r.Stateful && (r.StateViolations > 0 || r.stateDLQ > 0):
		r.Verdict, r.Failure = VerdictFail, fmt.Sprintf("state not exactly once: %d sessions with a wrong final count, %d records dead-lettered with their state out of step",
			r.StateViolations, r.stateDLQ)
	case !r.Mode.ExactlyOnce() && (rep.Lost > 0 || rep.Malformed > 0):
		r.Verdict, r.Failure = VerdictFail, "at-least-once broken: "+rep.String()
	case r.Mode.ExactlyOnce():
		r.Verdict = VerdictPass
	default:
		r.Verdict = VerdictALO
	}
}

// judgeDNF judges a bounded run that did not finish: what it output must
// hold no duplicate (in an exactly-once mode), no order violation (in an
// ordered one) and nothing malformed; missing inputs are what it did not
// get to.
func (r *Result) judgeDNF(rep verify.Report, failure string) {
	r.Outputs, r.DLQ = rep.Outputs, rep.DLQ
	r.Duplicates, r.Lost, r.OrderViolations, r.Malformed = rep.Duplicates, rep.Lost, rep.OrderViolations, rep.Malformed
	r.ExactlyOnce = false
	r.Failure = failure
	dupsJudged := r.Mode.ExactlyOnce() && r.DupsInjected == 0
	switch {
	case dupsJudged && rep.Duplicates > 0, r.Mode.ordered() && rep.OrderViolations > 0, rep.Malformed > 0:
		r.Verdict = VerdictFail
		r.Failure = failure + "; and what it output is not exactly once: " + rep.String()
	default:
		r.Verdict = VerdictDNF
	}
}

func (r *Result) setLatency() {
	h := r.hist
	if h == nil || h.TotalCount() == 0 {
		return
	}
	ms := func(us int64) float64 { return float64(us) / 1000 }
	r.LatencyP50 = ms(h.ValueAtQuantile(50))
	r.LatencyP90 = ms(h.ValueAtQuantile(90))
	r.LatencyP99 = ms(h.ValueAtQuantile(99))
	r.LatencyMax = ms(h.Max())
}

// setRatios fills each result's throughput ratios: to the medians of the
// baselines' runs in the same phase and, for a twin, of the plain mode's
// runs (listing the two alternately, or -count, evens out drift). With one
// run of each they are plain ratios of runs.
func setRatios(rs []Result) {
	med := medians(Summarize(rs))
	for i := range rs {
		r := &rs[i]
		r.RatioToGTS = ratioTo(r.Throughput, med, phaseMode{r.Scenario, ModeGTS})
		r.RatioToALO = ratioTo(r.Throughput, med, phaseMode{r.Scenario, ModeALO})
		r.RatioToKStreams = ratioTo(r.Throughput, med, phaseMode{r.Scenario, ModeKafkaStreams})
		if r.Mode.observed() {
			r.RatioToUnobserved = ratioTo(r.Throughput, med, phaseMode{r.Scenario, r.Mode.base()})
		}
	}
}
