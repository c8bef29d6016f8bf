package bench

import (
	"fmt"
	"io"
	"text/tabwriter"

	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// WriteTable prints the human summary: one row per run, in the order
// they ran, then one row per mode with the median of its runs and their
// range (the ratios are of medians), then the published figures beside
// ours, failures and resource peaks.
func WriteTable(w io.Writer, rs []Result) error {
	pr := message.NewPrinter(language.English) // thousands separators
	tw := newTabWriter(w)
	fmt.Fprintln(tw, "scenario\tmode\trun\tinputs\tsecs\trec/s\t×gts\t×alo\tp50 ms\tp90 ms\tp99 ms\tmax ms\toutputs\tdlq\tdup\tlost\torder\tcores us/all\tverdict\t")
	for _, r := range rs {
		pr.Fprintf(tw, "%s\t%s\t%d\t%d\t%.2f\t%.0f\t%s\t%s\t%.1f\t%.1f\t%.1f\t%.1f\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t\n",
			r.Scenario, r.Mode, r.Run, r.Messages, r.Seconds, r.Throughput, ratio(r.RatioToGTS), ratio(r.RatioToALO),
			r.LatencyP50, r.LatencyP90, r.LatencyP99, r.LatencyMax,
			r.Outputs, r.DLQ, r.Duplicates, r.Lost, r.OrderViolations, cores(r), r.Verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	ss := Summarize(rs)
	if len(ss) > 0 {
		fmt.Fprintln(w)
		if err := writeSummaryTable(w, pr, ss); err != nil {
			return err
		}
	}
	runs := make(map[phaseMode]int, len(ss))
	kstreamsP50 := map[string]float64{}
	for _, s := range ss {
		if s.Mode == ModeKafkaStreams {
			kstreamsP50[s.Scenario] = s.LatencyP50Median
		}
	}
	for _, s := range ss {
		runs[phaseMode{s.Scenario, s.Mode}] = s.Runs
		summaryNotes(pr, w, s, kstreamsP50)
	}
	for _, r := range rs {
		who := fmt.Sprintf("%s %s", r.Scenario, r.Mode)
		if runs[phaseMode{r.Scenario, r.Mode}] > 1 {
			who += fmt.Sprintf(" run %d", r.Run)
		}
		notes(pr, w, who, r)
	}
	return WriteScaleTable(w, rs)
}

func newTabWriter(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
}

// writeSummaryTable prints one row per mode: its runs' median throughput
// and range, the ratios of medians, and how many runs verified exactly
// once.
func writeSummaryTable(w io.Writer, pr *message.Printer, ss []Summary) error {
	tw := newTabWriter(w)
	fmt.Fprintln(tw, "scenario\tmode\truns\tmedian rec/s\tmin rec/s\tmax rec/s\t×gts\t×alo\texactly once\tverdict\t")
	for _, s := range ss {
		pr.Fprintf(tw, "%s\t%s\t%d\t%.0f\t%.0f\t%.0f\t%s\t%s\t%d/%d\t%s\t\n",
			s.Scenario, s.Mode, s.Runs, s.ThroughputMedian, s.ThroughputMin, s.ThroughputMax,
			ratio(s.RatioToGTS), ratio(s.RatioToALO), s.ExactlyOnceRuns, s.Runs, s.Verdict)
	}
	return tw.Flush()
}

// summaryNotes prints what compares a mode's runs as a whole: published
// figures and a twin's cost, both against medians.
// kstreamsP50 maps each phase to kafka-streams's median p50 there.
func summaryNotes(pr *message.Printer, w io.Writer, s Summary, kstreamsP50 map[string]float64) {
	who := fmt.Sprintf("%s %s", s.Scenario, s.Mode)
	of := ""
	if s.Runs > 1 {
		of = pr.Sprintf(", median of %d runs", s.Runs)
	}
	if a := s.Anchor; a != nil {
		pr.Fprintf(w, "%s: published (%s):", who, a.Source)
		if a.Throughput > 0 {
			pr.Fprintf(w, " %.0f rec/s (ours %.0f%s)", a.Throughput, s.ThroughputMedian, of)
		}
		if a.LatencyP50 > 0 {
			pr.Fprintf(w, " median %.1f ms (ours %.1f%s)", a.LatencyP50, s.LatencyP50Median, of)
		}
		if a.Seconds > 0 {
			pr.Fprintf(w, " %.2f s (ours %.2f%s)", a.Seconds, s.SecondsMedian, of)
		}
		if a.Description != "" {
			fmt.Fprintf(w, " [%s]", a.Description)
		}
		fmt.Fprintln(w)
	}
	if k := s.RatioToKStreams; k != nil && s.Mode != ModeKafkaStreams {
		pr.Fprintf(w, "%s: %.2f× the throughput of kafka-streams", who, *k)
		if ks := kstreamsP50[s.Scenario]; ks > 0 && s.LatencyP50Median > 0 {
			pr.Fprintf(w, ", p50 latency %.2f× its (%.1f ms against %.1f)", s.LatencyP50Median/ks, s.LatencyP50Median, ks)
		}
		fmt.Fprintln(w, " (medians of their runs in this phase)")
	}
	if s.RatioToUnobserved != nil {
		pr.Fprintf(w, "%s: %s on: %.3f× the throughput of %s (medians of their runs in this phase)\n", who, s.Mode.instruments(), *s.RatioToUnobserved, s.Mode.base())
	}
}

// cores is a run's "cores us/all": eosbench's process over the whole
// machine's busy cores, of the machine's ("-" for what is unknown).
func cores(r Result) string {
	if r.CoresMachine == 0 {
		return "-"
	}
	us := "-"
	if r.CoresSelf > 0 {
		us = fmt.Sprintf("%.2f", r.CoresSelf)
	}
	return fmt.Sprintf("%s/%.2f of %d", us, r.CoresMachine, r.MachineCores)
}

func ratio(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", *v)
}

// notes prints what is particular to one run.
func notes(pr *message.Printer, w io.Writer, who string, r Result) {
	if r.HandlerMs > 0 {
		pr.Fprintf(w, "%s: simulated handler slept %.2f ms on average (timer granularity adds to the asked latency)\n", who, r.HandlerMs)
	}
	if !r.Mode.ordered() && r.OrderViolations > 0 {
		pr.Fprintf(w, "%s: %d outputs out of session order (this mode promises no order: not judged)\n", who, r.OrderViolations)
	}
	if r.Capped {
		pr.Fprintf(w, "%s: run on the first %d inputs only (-baseline-messages)\n", who, r.Messages)
	}
	if r.StreamThreads > 0 {
		pr.Fprintf(w, "%s: Kafka Streams exactly_once_v2, num.stream.threads %d per instance, commit.interval.ms %d, other settings its defaults\n", who, r.StreamThreads, r.commitIntervalMs)
	}
	if r.FirstOutputMs > 0 {
		pr.Fprintf(w, "%s: first output %.0f ms after the start", who, r.FirstOutputMs)
		if r.Primer > 0 {
			pr.Fprintf(w, "; the %d primer inputs were output before the timed feed began (fair start: not timed, not in rec/s)", r.Primer)
		}
		fmt.Fprintln(w)
	}
	if r.Stateful {
		pr.Fprintf(w, "%s: stateful: per-session counters in the state store, %d of %d sessions wrong in the changelog (state_violations)\n", who, r.StateViolations, r.Sessions)
	}
	if r.DupsInjected > 0 {
		switch {
		case !r.Mode.dedupes():
			pr.Fprintf(w, "%s: %d duplicate inputs (-dup-rate %.2f), no deduplication: %d duplicate outputs\n", who, r.DupsInjected, r.DupRate, r.Duplicates)
		case r.DupsSkipped != nil:
			pr.Fprintf(w, "%s: %d duplicate inputs (-dup-rate %.2f), %d skipped by WithDedupe, %d duplicate outputs\n", who, r.DupsInjected, r.DupRate, *r.DupsSkipped, r.Duplicates)
		default:
			pr.Fprintf(w, "%s: %d duplicate inputs (-dup-rate %.2f), %d duplicate outputs (skip count unknown: workers were killed)\n", who, r.DupsInjected, r.DupRate, r.Duplicates)
		}
	}
	if r.statefulIgnored {
		pr.Fprintf(w, "%s: -stateful ignored: this mode has no state store\n", who)
	}
	if r.Workers > 0 {
		pr.Fprintf(w, "%s: %d workers, %d killed with SIGKILL and restarted, %d unexpected exits\n", who, r.Workers, r.Kills, r.Crashes)
	}
	if r.Mode == ModeALO && r.Duplicates > 0 {
		pr.Fprintf(w, "%s: %d duplicate outputs (at-least-once: expected after crashes)\n", who, r.Duplicates)
	}
	if c := r.Counters; c.Commits > 0 {
		// The median is the figure to set beside the records' p50.
		what := "flush, offsets, EndTxn"
		if r.Mode == ModeALO {
			what = "flush, offsets"
		}
		if r.Workers > 1 || r.Crashes > 0 { // several workers' reports (Counters.add)
			what += "; median and p99: the highest of the workers'"
		}
		if r.Mode.jvm() {
			// The JVM frameworks time their commits in their own
			// metrics, which keep a mean and a max, no quantiles.
			pr.Fprintf(w, "%s: %d commits, commit round trip mean %.1f ms, max %.1f ms (%s)\n",
				who, c.Commits, c.commitMs(), nsToMs(c.CommitMax), jvmCommitSource(r.Mode))
		} else {
			pr.Fprintf(w, "%s: %d commits, commit round trip median %.1f ms, p99 %.1f ms, max %.1f ms, mean %.1f ms (%s)\n",
				who, c.Commits, nsToMs(c.CommitP50), nsToMs(c.CommitP99), nsToMs(c.CommitMax), c.commitMs(), what)
		}
	}
	if len(r.Counters.Requests) > 0 {
		pr.Fprintf(w, "%s: requests, end to end: %s\n", who, requestsLine(r.Counters.Requests))
	}
	if r.Mode.jvm() && r.Counters.Rebuilds > 0 {
		pr.Fprintf(w, "%s: %d stream threads died (their errors are on stderr) and were replaced\n", who, r.Counters.Rebuilds)
	}
	if c := r.Counters; c.Commits == 0 && c.CommitNanos > 0 {
		// Parallel Consumer's producer keeps its commits' total time, not
		// their count.
		pr.Fprintf(w, "%s: %.1f ms committing in all (%s)\n", who, nsToMs(c.CommitNanos), jvmCommitSource(r.Mode))
	}
	if r.Peaks != nil && r.Workers > 0 {
		pr.Fprintf(w, "%s: peak goroutines %d, peak RSS %.0f MiB (per worker process, VmHWM)\n", who, r.Goroutines, float64(r.RSSBytes)/(1<<20))
	}
	if r.Failure != "" {
		fmt.Fprintf(w, "%s: FAIL: %s\n", who, r.Failure)
	}
	if r.Evidence != nil {
		writeEvidence(w, who, r.Evidence)
	}
}

// WriteHistograms writes each result's latency distribution in
// HdrHistogram's percentile text format (values in milliseconds), which
// HdrHistogram's plotters read.
func WriteHistograms(w io.Writer, rs []Result) error {
	for _, r := range rs {
		if r.hist == nil {
			continue
		}
		if _, err := fmt.Fprintf(w, "# scenario=%s mode=%s inputs=%d latency_ms\n", r.Scenario, r.Mode, r.Messages); err != nil {
			return err
		}
		if _, err := r.hist.PercentilesPrint(w, 5, 1000); err != nil {
			return err
		}
		if _, err := fmt.Fprintln(w); err != nil {
			return err
		}
	}
	return nil
}
