package scalesim

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// column is one measured quantity of a Result, for the tables and fits.
type column struct {
	name string
	get  func(Result) float64
	f    string // format of a cell
}

func perCommit(phase func(Result) Phase, key kmsg.Key, what int) func(Result) float64 {
	return func(r Result) float64 {
		req, w, rd, p := phase(r).PerCommit(int16(key))
		return [...]float64{req, w, rd, p}[what]
	}
}

const (
	reqs = iota
	written
	read
	named
)

func touched(r Result) Phase { return r.Touched }
func all(r Result) Phase     { return r.All }

// marginal is get's growth per added partition from the previous result
// with as many instances (NaN for the first): what one more partition
// costs once the instances' fixed cost is paid.
func marginal(results []Result, get func(Result) float64) func(Result) float64 {
	return func(r Result) float64 {
		var prev *Result
		for i := range results {
			q := &results[i]
			if q.Config.Instances == r.Config.Instances && q.Config.Partitions < r.Config.Partitions &&
				(prev == nil || q.Config.Partitions > prev.Config.Partitions) {
				prev = q
			}
		}
		if prev == nil {
			return math.NaN()
		}
		return (get(r) - get(*prev)) / float64(r.Config.Partitions-prev.Config.Partitions)
	}
}

// phaseTotal sums a phase's requests (what 0) or bytes both ways (1)
// over the commit path's kinds.
func phaseTotal(phase func(Result) Phase, what int) func(Result) float64 {
	return func(r Result) float64 {
		var n int64
		for _, k := range Keys {
			t := phase(r).Counts.ByKey[k]
			n += [...]int64{t.Requests, t.Written + t.Read}[what]
		}
		return float64(n)
	}
}

// idleRate is the idle requests (or response bytes) of one kind (-1: all)
// per instance per second.
func idleRate(key int16, bytes bool) func(Result) float64 {
	return func(r Result) float64 {
		var n int64
		for k, t := range r.Idle.ByKey {
			if key < 0 || k == key {
				n += map[bool]int64{false: t.Requests, true: t.Read}[bytes]
			}
		}
		return float64(n) / float64(r.Config.Instances) / r.Config.IdleFor.Seconds()
	}
}

// groupColumns: the group and memory table.
func groupColumns(results []Result) []column {
	return append(slices.Clip(groupFixed),
		column{"idle heap / added partition (KiB)", marginal(results, func(r Result) float64 { return float64(r.IdleHeap) / 1024 }), "%.1f"},
		column{"busy heap / added partition (KiB)", marginal(results, func(r Result) float64 { return float64(r.BusyHeap) / 1024 }), "%.1f"},
		column{"idle goroutines / added partition", marginal(results, func(r Result) float64 { return float64(r.IdleGoroutines) }), "%.2f"},
		column{"busy goroutines / added partition", marginal(results, func(r Result) float64 { return float64(r.BusyGoroutines) }), "%.2f"},
	)
}

var groupFixed = []column{
	{"rounds (generation)", func(r Result) float64 { return float64(r.Generation) }, "%.0f"},
	{"JoinGroup reqs", func(r Result) float64 { return float64(r.JoinGroups) }, "%.0f"},
	{"idle heap / partition (KiB)", func(r Result) float64 { return r.PerPartition(r.IdleHeap) / 1024 }, "%.1f"},
	{"busy heap / partition (KiB)", func(r Result) float64 { return r.PerPartition(r.BusyHeap) / 1024 }, "%.1f"},
	{"idle goroutines / partition", func(r Result) float64 { return r.PerPartition(int64(r.IdleGoroutines)) }, "%.2f"},
	{"busy goroutines / partition", func(r Result) float64 { return r.PerPartition(int64(r.BusyGoroutines)) }, "%.2f"},
	{"idle heap total (MiB)", func(r Result) float64 { return float64(r.IdleHeap) / (1 << 20) }, "%.1f"},
	{"idle goroutines / instance", func(r Result) float64 { return float64(r.IdleGoroutines) / float64(r.Config.Instances) }, "%.1f"},
	{"idle commits", func(r Result) float64 { return float64(r.Idle.Commits) }, "%.0f"},
	{"idle requests / instance / s", idleRate(-1, false), "%.1f"},
	{"idle bytes in / instance / s", idleRate(-1, true), "%.0f"},
	{"idle Metadata bytes in / instance / s", idleRate(int16(kmsg.Metadata), true), "%.0f"},
}

// commitColumns: a phase's per-commit table.
func commitColumns(phase func(Result) Phase) []column {
	return []column{
		{"commits", func(r Result) float64 { return float64(phase(r).Counts.Commits) }, "%.0f"},
		{"all commits: requests", phaseTotal(phase, 0), "%.0f"},
		{"all commits: bytes out and in", phaseTotal(phase, 1), "%.0f"},
		{"AddPartitionsToTxn reqs", perCommit(phase, kmsg.AddPartitionsToTxn, reqs), "%.2f"},
		{"AddPartitionsToTxn partitions", perCommit(phase, kmsg.AddPartitionsToTxn, named), "%.1f"},
		{"AddPartitionsToTxn B", perCommit(phase, kmsg.AddPartitionsToTxn, written), "%.0f"},
		{"AddOffsetsToTxn reqs", perCommit(phase, kmsg.AddOffsetsToTxn, reqs), "%.2f"},
		{"AddOffsetsToTxn B", perCommit(phase, kmsg.AddOffsetsToTxn, written), "%.0f"},
		{"EndTxn reqs", perCommit(phase, kmsg.EndTxn, reqs), "%.2f"},
		{"EndTxn B", perCommit(phase, kmsg.EndTxn, written), "%.0f"},
		{"TxnOffsetCommit reqs", perCommit(phase, kmsg.TxnOffsetCommit, reqs), "%.2f"},
		{"TxnOffsetCommit partitions", perCommit(phase, kmsg.TxnOffsetCommit, named), "%.1f"},
		{"TxnOffsetCommit max partitions", func(r Result) float64 {
			return float64(phase(r).Counts.ByKey[int16(kmsg.TxnOffsetCommit)].MaxNamed)
		}, "%.0f"},
		{"TxnOffsetCommit B", perCommit(phase, kmsg.TxnOffsetCommit, written), "%.0f"},
		{"Produce reqs", perCommit(phase, kmsg.Produce, reqs), "%.2f"},
		{"Produce partitions", perCommit(phase, kmsg.Produce, named), "%.1f"},
		{"Produce B", perCommit(phase, kmsg.Produce, written), "%.0f"},
	}
}

// Markdown returns the results as three tables (group and memory; per
// commit with input to Config.Touched partitions; per commit with input
// to all), each row one result and each column one quantity, and under
// each table the exponent fitted over partitions for each instance count.
// Columns run down the page (a row per quantity) so that the tables stay
// readable at three sizes by two instance counts.
func Markdown(results []Result) string {
	var b strings.Builder
	table := func(title string, cols []column) {
		fmt.Fprintf(&b, "%s\n\n| |", title)
		for _, r := range results {
			fmt.Fprintf(&b, " %d × %d |", r.Config.Partitions, r.Config.Instances)
		}
		insts := instanceCounts(results)
		for _, n := range insts {
			fmt.Fprintf(&b, " exponent, %d inst. |", n)
		}
		b.WriteString("\n|---|")
		b.WriteString(strings.Repeat("---|", len(results)+len(insts)))
		b.WriteString("\n")
		for _, c := range cols {
			fmt.Fprintf(&b, "| %s |", c.name)
			for _, r := range results {
				if v := c.get(r); math.IsNaN(v) {
					b.WriteString(" |")
				} else {
					fmt.Fprintf(&b, " "+c.f+" |", v)
				}
			}
			for _, n := range insts {
				b.WriteString(" " + fmtExp(fit(results, n, c.get)) + " |")
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
	table("Group and memory (partitions × instances; heap and goroutines per assigned partition)", groupColumns(results))
	if len(results) > 0 {
		table(fmt.Sprintf("Per commit, input to %d partitions (%d records each)", results[0].Touched.Touched,
			results[0].Touched.Records/max(1, results[0].Touched.Touched)), commitColumns(touched))
		table("Per commit, input to every partition (the busy phase)", commitColumns(all))
	}
	return b.String()
}

func instanceCounts(results []Result) []int {
	var out []int
	for _, r := range results {
		if !slices.Contains(out, r.Config.Instances) {
			out = append(out, r.Config.Instances)
		}
	}
	slices.Sort(out)
	return out
}

// fit is the exponent of get against partitions over the results with n
// instances.
func fit(results []Result, n int, get func(Result) float64) float64 {
	var x, y []float64
	for _, r := range results {
		if r.Config.Instances == n {
			x, y = append(x, float64(r.Config.Partitions)), append(y, get(r))
		}
	}
	return Exponent(x, y)
}

func fmtExp(k float64) string {
	if math.IsNaN(k) {
		return "–"
	}
	return fmt.Sprintf("%.2f", k)
}
