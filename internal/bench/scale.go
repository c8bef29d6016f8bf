package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/text/language"
	"golang.org/x/text/message"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// The scale scenario (-scenario scale) sweeps partitions (input and
// output alike) and instances (subprocess workers): at each point of the
// grid, one phase from a backlog (throughput) and one paced at a fixed
// offered rate (latency, after the fair start's primer). Its results are
// also printed as one table, a row per point and mode (WriteScaleTable).

// ScaleSweep is the grid of the scale scenario.
type ScaleSweep struct {
	Partitions []int
	Instances  []int
	// Rate is the paced phases' offered load (records/s), PacedFor how
	// long each paced run offers it.
	Rate     float64
	PacedFor time.Duration
}

// The default grid is what a run on a 2-core machine gets through in
// minutes; the full one (-scale-full) is issue 44's.
var (
	ScaleDefaultPartitions = []int{6, 60, 300}
	ScaleDefaultInstances  = []int{1, 3}
	ScaleFullPartitions    = []int{6, 60, 300, 1000}
	ScaleFullInstances     = []int{1, 3, 6, 12}
)

// DefaultScaleSweep is the grid without -scale-full (full: with it).
func DefaultScaleSweep(full bool) ScaleSweep {
	s := ScaleSweep{Partitions: ScaleDefaultPartitions, Instances: ScaleDefaultInstances, Rate: 5000, PacedFor: 10 * time.Second}
	if full {
		s.Partitions, s.Instances = ScaleFullPartitions, ScaleFullInstances
	}
	return s
}

// scaleMessages is each backlog phase's input: enough for several
// commits at the highest throughputs seen here (500,000 rec/s at 6
// partitions), few enough that the slowest exactly-once peer at 1,000
// partitions gets through it within the default timeout, or is reported
// with how far it got.
const scaleMessages = 200_000

// ScaleModes are the modes the sweep compares.
var ScaleModes = []Mode{ModeSession, ModePartition, ModeGTS, ModeALO}

// ScaleFullModes adds Kafka Streams to the full sweep.
var ScaleFullModes = append(slices.Clone(ScaleModes), ModeKafkaStreams)

// Skipped is a grid point left out, with why.
type Skipped struct {
	Partitions, Instances int
	Why                   string
}

// ScalePhases returns the sweep's phases, a backlog phase and a paced one
// per point, built on base (Default with the scale presets); points with
// more instances than partitions are skipped (they would idle), and
// returned so that the caller can say so. Bad lists are an error.
func ScalePhases(base Config, s ScaleSweep) ([]Config, []Skipped, error) {
	if len(s.Partitions) == 0 || len(s.Instances) == 0 {
		return nil, nil, errors.New("-scale-partitions and -scale-instances must list at least one count each")
	}
	for _, p := range s.Partitions {
		if p <= 0 {
			return nil, nil, fmt.Errorf("-scale-partitions: %d is not a partition count (want positive)", p)
		}
	}
	for _, n := range s.Instances {
		if n <= 0 {
			return nil, nil, fmt.Errorf("-scale-instances: %d is not an instance count (want positive)", n)
		}
	}
	if s.Rate <= 0 || s.PacedFor <= 0 {
		return nil, nil, errors.New("-scale-rate and its paced duration must be positive")
	}
	var out []Config
	var skipped []Skipped
	for _, p := range s.Partitions {
		for _, n := range s.Instances {
			if n > p {
				skipped = append(skipped, Skipped{p, n, fmt.Sprintf("%d instances for %d partitions: the extra instances would own nothing", n, p)})
				continue
			}
			c := base
			c.Partitions, c.Workers = p, n
			// Enough sessions that every partition has several: the
			// primer then reaches them all.
			c.Sessions = max(base.Sessions, 4*p)
			c.Scenario = fmt.Sprintf("scale/p%d/i%d", p, n)
			c.DropTopics = true
			paced := c
			paced.Scenario += fmt.Sprintf("/rate%.0f", s.Rate)
			paced.Rate = s.Rate
			paced.Messages = int(s.Rate * s.PacedFor.Seconds())
			out = append(out, c, paced)
		}
	}
	if len(out) == 0 {
		return nil, skipped, fmt.Errorf("no point of the sweep has at least as many partitions (%v) as instances (%v)", s.Partitions, s.Instances)
	}
	return out, skipped, nil
}

// scaleBase is the scale scenario's preset: every phase from it.
func scaleBase(c Config, full bool) Config {
	c.Scenario, c.Messages, c.Count = "scale", scaleMessages, 1
	c.Modes = ScaleModes
	if full {
		c.Modes = ScaleFullModes
	}
	c.Bounded = true
	return c
}

// ScaleBase is the preset every scale phase is built on (Default, one run
// of each mode, the sweep's input size and modes; full: with Kafka
// Streams).
func ScaleBase(full bool) Config { return scaleBase(Default(), full) }

// Machine is what CheckFit knows of the machine eosbench runs on.
type Machine struct {
	MemAvailable int64 // bytes (/proc/meminfo MemAvailable); 0: unknown
	OpenFiles    int64 // soft RLIMIT_NOFILE; 0: unknown
	MaxMapCount  int64 // vm.max_map_count; 0: unknown
}

// ThisMachine reads the machine's limits (zero where unknown).
func ThisMachine() Machine {
	var m Machine
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "MemAvailable:" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				m.MemAvailable = kb << 10
			}
		}
	}
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil {
		m.OpenFiles = int64(rl.Cur)
	}
	if b, err := os.ReadFile("/proc/sys/vm/max_map_count"); err == nil {
		m.MaxMapCount, _ = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	}
	return m
}

// Per-instance resident memory assumed by CheckFit: a JVM instance's heap
// is capped at 1 GiB (jvmCommand's -Xmx1g) and its runtime takes about a
// quarter more; a Go worker peaked at 60-120 MiB in the scenarios here.
const (
	jvmInstanceBytes = 1280 << 20
	goInstanceBytes  = 160 << 20
	// fdsPerInstance: a worker's stdin, stdout and stderr pipes and its log
	// file in this process, with room to spare.
	fdsPerInstance = 6
	// fdsBase is this process's own files and sockets (its clients to the
	// brokers, the observer's, the read-back's), generously.
	fdsBase = 256
	// brokerFdsBase is what an idle broker has open (about 370 here).
	brokerFdsBase = 1000
)

// CheckFit reports, before any topic is made, a phase that cannot fit
// the machine: its instances' memory beyond what is available, this
// process's files beyond its limit, or — for brokers on this machine
// (local) — more partition replicas at once than a broker can keep open
// (a broker keeps one file per partition's log segment and maps two
// indexes; with every topic replicated to every broker, each broker
// holds every partition, as on the 3-node cluster here). Phases run one
// after another, and a phase creates every run's topics before its
// first run, so each phase is judged on its own.
func CheckFit(phases []Config, m Machine, fake, local bool) error {
	pr := message.NewPrinter(language.English)
	for _, c := range phases {
		n := max(1, c.Workers)
		var per int64 = goInstanceBytes
		for _, mode := range c.Modes {
			if mode.jvm() {
				per = jvmInstanceBytes
			}
		}
		if mem := int64(n) * per; m.MemAvailable > 0 && mem > m.MemAvailable*9/10 {
			return errors.New(pr.Sprintf("%s: %d instances need about %d MiB (%d MiB each) and the machine has %d MiB available: run fewer instances (-scale-instances) or leave out the JVM modes",
				c.Scenario, n, mem>>20, per>>20, m.MemAvailable>>20))
		}
		runs := c.Count * len(c.Modes)
		if fds := int64(fdsBase + n*fdsPerInstance); m.OpenFiles > 0 && fds > m.OpenFiles {
			return errors.New(pr.Sprintf("%s: %d instances need about %d open files in this process and its limit is %d (ulimit -n)", c.Scenario, n, fds, m.OpenFiles))
		}
		if fake || !local {
			continue
		}
		parts := int64(runs) * int64(c.Partitions+1) // output and dead letters
		if c.Rate > 0 {
			parts += int64(runs) * int64(c.Partitions) // each run's own input
		} else {
			parts += int64(c.Partitions) // the shared backlog
		}
		if fds := brokerFdsBase + parts; m.OpenFiles > 0 && fds > m.OpenFiles {
			return errors.New(pr.Sprintf("%s: %d partitions at once (%d runs) need about %d open files per broker on this machine, and the limit here is %d (ulimit -n, which brokers started here inherit): lower -count or run fewer modes",
				c.Scenario, parts, runs, fds, m.OpenFiles))
		}
		if maps := 2 * parts; m.MaxMapCount > 0 && maps > m.MaxMapCount*9/10 {
			return errors.New(pr.Sprintf("%s: %d partitions at once (%d runs) need about %d memory maps per broker on this machine (two indexes each), and vm.max_map_count is %d: lower -count or run fewer modes",
				c.Scenario, parts, runs, maps, m.MaxMapCount))
		}
	}
	return nil
}

// LocalBrokers reports whether every broker address is on this machine
// (a loopback address or localhost).
func LocalBrokers(brokers []string) bool {
	if len(brokers) == 0 {
		return false
	}
	for _, b := range brokers {
		host, _, err := net.SplitHostPort(b)
		if err != nil {
			host = b
		}
		if host == "localhost" {
			continue
		}
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			return false
		}
	}
	return true
}

// scalePoint groups a point's results of one mode.
type scalePoint struct {
	partitions, instances int
	mode                  Mode
	backlog, paced        []Result
}

// WriteScaleTable prints the scale phases' results as one table: per
// point and mode, the backlog phase's throughput, commits, requests,
// memory and CPU, and the paced phase's latency and time to first output
// (medians when a mode ran more than once). It prints nothing when no
// scale phase ran.
func WriteScaleTable(w io.Writer, rs []Result) error {
	pts := scalePoints(rs)
	if len(pts) == 0 {
		return nil
	}
	pr := message.NewPrinter(language.English)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "scale: throughput and per-commit figures from the backlog phase, latency and first output from the paced phase (medians of runs)")
	tw := newTabWriter(w)
	fmt.Fprintln(tw, "partitions\tinstances\tmode\trec/s\tp50 ms\tp99 ms\tcommit p50 ms\trec/txn\treq/commit\tKiB/commit\tRSS MiB/inst\tCPU s/M rec/inst\tfirst out ms\tverdicts\t")
	for _, p := range pts {
		var thr, commitP50, perTxn, reqs, kib, rss, cpu, p50, p99, first []float64
		var verdicts []string
		for _, r := range p.backlog {
			verdicts = append(verdicts, r.Verdict)
			thr = append(thr, r.Throughput)
			c := r.Counters
			if c.Commits > 0 {
				if r.Mode.jvm() {
					commitP50 = append(commitP50, c.commitMs()) // a mean: Kafka Streams keeps no median
				} else {
					commitP50 = append(commitP50, nsToMs(c.CommitP50))
				}
				perTxn = append(perTxn, float64(r.Messages)/float64(c.Commits))
				if c.RequestCount > 0 {
					reqs = append(reqs, float64(c.RequestCount)/float64(c.Commits))
					kib = append(kib, float64(c.RequestBytes)/float64(c.Commits)/1024)
				}
			}
			if r.Peaks != nil && r.RSSBytes > 0 {
				rss = append(rss, float64(r.RSSBytes)/(1<<20))
			}
			if r.CPUSeconds > 0 && r.Messages > 0 {
				cpu = append(cpu, r.CPUSeconds/(float64(r.Messages)/1e6)/float64(p.instances))
			}
		}
		for _, r := range p.paced {
			verdicts = append(verdicts, r.Verdict)
			if r.LatencyP50 > 0 {
				p50, p99 = append(p50, r.LatencyP50), append(p99, r.LatencyP99)
			}
			if r.FirstOutputMs > 0 {
				first = append(first, r.FirstOutputMs)
			}
		}
		cell := func(v []float64, format string) string {
			if len(v) == 0 {
				return "-"
			}
			return pr.Sprintf(format, median(v))
		}
		pr.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
			p.partitions, p.instances, p.mode, cell(thr, "%.0f"), cell(p50, "%.0f"), cell(p99, "%.0f"),
			cell(commitP50, "%.0f"), cell(perTxn, "%.0f"), cell(reqs, "%.1f"), cell(kib, "%.0f"),
			cell(rss, "%.0f"), cell(cpu, "%.1f"), cell(first, "%.0f"), strings.Join(verdicts, ","))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, p := range pts {
		for _, r := range append(append([]Result(nil), p.backlog...), p.paced...) {
			if r.Verdict == VerdictDNF {
				pr.Fprintf(w, "%s %s: did not finish: %s\n", r.Scenario, r.Mode, r.Failure)
			}
		}
	}
	return nil
}

// HasScale reports whether any result is of a scale phase.
func HasScale(rs []Result) bool {
	return slices.ContainsFunc(rs, func(r Result) bool { return strings.HasPrefix(r.Scenario, "scale/") })
}

// WriteScalePlot draws the sweep as SVG: throughput (backlog phases) and
// p50 latency at the offered rate (paced phases) against partitions, on
// log scales, a line per mode and instance count.
func WriteScalePlot(w io.Writer, rs []Result) error {
	type key struct {
		mode      Mode
		instances int
	}
	var keys []key
	thr, p50 := map[key]plotter.XYs{}, map[key]plotter.XYs{}
	for _, p := range scalePoints(rs) {
		k := key{p.mode, p.instances}
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
		var t, l []float64
		for _, r := range p.backlog {
			if r.Throughput > 0 {
				t = append(t, r.Throughput)
			}
		}
		for _, r := range p.paced {
			if r.LatencyP50 > 0 {
				l = append(l, r.LatencyP50)
			}
		}
		if len(t) > 0 {
			thr[k] = append(thr[k], plotter.XY{X: float64(p.partitions), Y: median(t)})
		}
		if len(l) > 0 {
			p50[k] = append(p50[k], plotter.XY{X: float64(p.partitions), Y: median(l)})
		}
	}
	panel := func(title, ylabel string, pts map[key]plotter.XYs) (*plot.Plot, error) {
		p := plot.New()
		p.Title.Text = title
		p.X.Label.Text = "partitions (input and output)"
		p.Y.Label.Text = ylabel
		p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
		p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
		p.Legend.Top = true
		for i, k := range keys {
			xy := pts[k]
			if len(xy) == 0 {
				continue
			}
			slices.SortFunc(xy, func(a, b plotter.XY) int { return int(a.X - b.X) })
			if err := addLine(p, i, fmt.Sprintf("%s × %d", k.mode, k.instances), xy, plotter.NoStep); err != nil {
				return nil, err
			}
		}
		p.Add(plotter.NewGrid())
		return p, nil
	}
	tp, err := panel("throughput from a backlog", "inputs per second", thr)
	if err != nil {
		return err
	}
	lp, err := panel("p50 latency at the offered rate", "ms", p50)
	if err != nil {
		return err
	}
	c := vgsvg.New(30*vg.Centimeter, plotHeight)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Centimeter, PadTop: vg.Millimeter * 5, PadBottom: vg.Millimeter * 5,
		PadLeft: vg.Millimeter * 5, PadRight: vg.Millimeter * 5}
	canvases := plot.Align([][]*plot.Plot{{tp, lp}}, tiles, draw.New(c))
	tp.Draw(canvases[0][0])
	lp.Draw(canvases[0][1])
	if _, err := c.WriteTo(w); err != nil {
		return fmt.Errorf("bench: writing the SVG: %w", err)
	}
	return nil
}

// scalePoints groups the scale phases' results by point and mode, in
// order of first run.
func scalePoints(rs []Result) []*scalePoint {
	var pts []*scalePoint
	index := map[string]*scalePoint{}
	for _, r := range rs {
		if !strings.HasPrefix(r.Scenario, "scale/") {
			continue
		}
		key := fmt.Sprintf("%d/%d/%s", r.Partitions, r.Workers, r.Mode)
		p, ok := index[key]
		if !ok {
			p = &scalePoint{partitions: r.Partitions, instances: max(1, r.Workers), mode: r.Mode}
			index[key] = p
			pts = append(pts, p)
		}
		if r.Rate > 0 {
			p.paced = append(p.paced, r)
		} else {
			p.backlog = append(p.backlog, r)
		}
	}
	return pts
}
