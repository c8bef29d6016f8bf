package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/onceflow/onceflow/internal/bench"
	"github.com/onceflow/onceflow/internal/clientsec"
	"github.com/onceflow/onceflow/processor"
)

// options are the flags that are not part of a phase's configuration.
type options struct {
	scenario   string
	brokers    string
	keep       bool
	json       bool
	hist       string
	plot       string
	cpuprofile string
	memprofile string
	logLevel   string
	clientLog  slog.Level
	worker     string // hidden: run one job as a subprocess worker
	version    bool

	metricsAddr   string
	metricsLinger time.Duration

	// sec is how every client reaches -brokers (TLS, SASL).
	sec clientsec.Config

	// The scale scenario's grid (-scenario scale).
	scalePartitions, scaleInstances intList
	scaleFull                       bool
	scaleRate                       float64
}

// newFlagSet binds the flags to cfg and o, with cfg's current values as
// defaults: parsing then changes only the flags given, which is how
// explicit flags override a scenario's presets.
func newFlagSet(cfg *bench.Config, o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("eosbench", flag.ContinueOnError)
	fs.StringVar(&o.scenario, "scenario", "default", "preset `name`: "+strings.Join(bench.ScenarioNames(), ", ")+" (explicit flags override its settings)")
	fs.StringVar(&o.brokers, "brokers", "", "run against these brokers (comma-separated `host:port` list) instead of an embedded kfake cluster")
	fs.BoolVar(&o.keep, "keep", false, "keep the run's topics and groups")
	fs.BoolVar(&o.json, "json", false, "print one JSON object instead of the tables: the runs (results) and, per mode, the median, min and max of their throughput with ratios of medians (summary)")
	fs.StringVar(&o.hist, "hist", "", "write the latency histograms (HdrHistogram percentile text) to `file`")
	fs.StringVar(&o.plot, "plot", "", "draw each mode's latency percentile curve (runs merged) and its throughput over its median run, side by side, as SVG to `file`")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the whole run to `file`")
	fs.StringVar(&o.memprofile, "memprofile", "", "write a heap profile at the end to `file`")
	fs.StringVar(&o.logLevel, "log-level", "warn", "log `level`: debug, info, warn or error")
	o.clientLog = slog.LevelWarn
	fs.TextVar(&o.clientLog, "client-log-level", &o.clientLog, "how much of franz-go's own log onceflow modes write (processor.WithClientLogLevel; -log-level still applies): debug, info, warn or error")
	fs.StringVar(&o.metricsAddr, "metrics-addr", "", "serve Prometheus metrics of the in-process onceflow runs on http://`host:port`/metrics (port 0: any free port, printed on stderr)")
	fs.DurationVar(&o.metricsLinger, "metrics-linger", 0, "keep serving -metrics-addr this long after the runs (an interrupt ends it), so a scraper sees the final values")
	fs.BoolVar(&o.version, "version", false, "print eosbench's version (the module version go install built, or (devel), and the VCS revision if stamped) and exit")
	fs.StringVar(&o.worker, bench.WorkerFlag, "", "internal: run one pipeline `job` (JSON) as a worker")
	o.sec.RegisterFlags(fs) // -tls*, -sasl-*: for -brokers
	fs.Var(&o.scalePartitions, "scale-partitions", "-scenario scale: comma-separated partition `counts` (input and output) to sweep (default 6,60,300; -scale-full: 6,60,300,1000)")
	fs.Var(&o.scaleInstances, "scale-instances", "-scenario scale: comma-separated instance `counts` (subprocess workers) to sweep (default 1,3; -scale-full: 1,3,6,12); points with more instances than partitions are skipped")
	fs.BoolVar(&o.scaleFull, "scale-full", false, "-scenario scale: the full sweep, partitions 6,60,300,1000 × instances 1,3,6,12, with kafka-streams among the modes (hours on a small machine)")
	fs.Float64Var(&o.scaleRate, "scale-rate", 5000, "-scenario scale: offered load of the paced phases in `records/s` (each offers it for 10 s)")

	fs.IntVar(&cfg.Messages, "messages", cfg.Messages, "input records")
	fs.IntVar(&cfg.Size, "size", cfg.Size, "record value `bytes`")
	fs.IntVar(&cfg.Sessions, "sessions", cfg.Sessions, "sessions (keys); record i belongs to session i%sessions")
	fs.IntVar(&cfg.Partitions, "partitions", cfg.Partitions, "input and output partitions")
	fs.Var(&modesValue{&cfg.Modes}, "modes", "comma-separated `modes`: alo-raw, franz-gts, onceflow (ordered by -order), onceflow-session, onceflow-partition, onceflow-unordered, kafka-streams (kafka-streams+cores: a stream thread per core instead of one per partition), parallel-consumer (JVM subprocesses, built with Maven on first use); an onceflow mode suffixed +metrics, +tracing or +obs (both) runs instrumented, +guard with processor.WithPositionGuard, to measure the cost beside the plain mode")
	fs.StringVar(&cfg.GroupProtocol, "group-protocol", cfg.GroupProtocol, "consumer group protocol of every mode: classic, or consumer (KIP-848, Kafka 4.0+; franz-go's ServerSideBalancer for the baselines)")
	fs.IntVar(&cfg.Count, "count", cfg.Count, "run the modes `n` times over, interleaved (A B A B for -modes A,B and -count 2), each run verified; modes are compared by the medians of their runs (the presets other than default: 1)")
	fs.Var(&orderValue{&cfg.Order}, "order", "ordering of mode onceflow: `session|partition|none`")
	fs.DurationVar(&cfg.CommitInterval, "commit-interval", cfg.CommitInterval, "commit interval of every mode")
	fs.Var(&cfg.HandlerLatency, "handler-latency", "simulated handler time per record: a `duration` (1ms) or a uniform range (0-5ms)")
	fs.DurationVar(&cfg.HandlerCPU, "handler-cpu", cfg.HandlerCPU, "CPU work per record in every mode's handler, about this `duration` (e.g. 20us): SHA-256 rounds over the value, calibrated once per phase (unlike -handler-latency it occupies a core)")
	fs.Float64Var(&cfg.FaultRate, "fault-rate", cfg.FaultRate, "`fraction` of records whose first attempt fails transiently")
	fs.DurationVar(&cfg.RetryInitial, "retry-initial", cfg.RetryInitial, "first retry backoff (doubling)")
	fs.DurationVar(&cfg.MinCommitInterval, "min-commit-interval", cfg.MinCommitInterval, "onceflow's shortest time between commits (processor.WithMinCommitInterval; 0: its default, commits scheduled by load); equal to -commit-interval: a fixed interval")
	fs.IntVar(&cfg.Pipeline, "pipeline", cfg.Pipeline, "onceflow's transactional producers per instance, `n` (processor.WithTransactionPipeline; 0: its default): while one transaction ends the next fills")
	fs.DurationVar(&cfg.IdleSession, "idle-session", cfg.IdleSession, "onceflow idle session eviction (0: the processor's default)")
	fs.IntVar(&cfg.MetadataBytes, "commit-metadata-bytes", cfg.MetadataBytes, "onceflow's bound on commit metadata, the broker's offset.metadata.max.bytes (0: the processor's default, 4096)")
	fs.BoolVar(&cfg.Stateful, "stateful", cfg.Stateful, "onceflow modes keep a per-session counter in a state store (checked per record, and in the changelog after the run); alo-raw and franz-gts ignore it")
	fs.Float64Var(&cfg.DupRate, "dup-rate", cfg.DupRate, "`fraction` of events sent twice with the same event-id header; onceflow modes deduplicate them (processor.WithDedupe) and must skip every one, franz-gts must pass each through once")
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "per mode: a run not done by then fails")
	fs.DurationVar(&cfg.Stall, "stall", cfg.Stall, "per mode: a run that accounts for no further input this long fails (0: wait for -timeout)")
	fs.Float64Var(&cfg.Rate, "rate", cfg.Rate, "offered load in `records/s`: produce during each mode's run (0: produce all input before the runs)")
	fs.IntVar(&cfg.BaselineMessages, "baseline-messages", cfg.BaselineMessages, "judge alo-raw and franz-gts on the first `n` inputs only (0: all)")
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "run each pipeline as `n` subprocess workers (0: in-process)")
	fs.DurationVar(&cfg.KillEvery, "kill-every", cfg.KillEvery, "SIGKILL and restart one worker this often while input is produced (0: never)")
	fs.Usage = func() { usage(fs) }
	return fs
}

func usage(fs *flag.FlagSet) {
	w := fs.Output()
	fmt.Fprint(w, "Usage: eosbench [flags]\n\nBenchmarks and verifies exactly-once consume-transform-produce pipelines.\nFlags (defaults of the default scenario):\n")
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name == bench.WorkerFlag {
			return
		}
		name, help := flag.UnquoteUsage(f)
		line := "  -" + f.Name
		if name != "" {
			line += " " + name
		}
		fmt.Fprintf(w, "%s\n    \t%s", line, help)
		if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "0s" && f.DefValue != "false" {
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		fmt.Fprintln(w)
	})
}

// phases returns the scenario's phases with the explicit flags applied to
// each; phases the flags made identical run once. notes say what a sweep
// left out.
func phases(args []string, scenario string) (out []bench.Config, notes []string, err error) {
	presets, notes, err := presetsFor(args, scenario)
	if err != nil {
		return nil, nil, err
	}
	for _, ph := range presets {
		var ignored options
		fs := newFlagSet(&ph, &ignored)
		fs.SetOutput(io.Discard)
		if err := fs.Parse(args); err != nil {
			return nil, nil, err
		}
		if err := ph.Validate(); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", ph.Scenario, err)
		}
		if !duplicate(out, ph) {
			out = append(out, ph)
		}
	}
	return out, notes, nil
}

// presetsFor returns a scenario's presets; the scale scenario's grid comes
// from the -scale-* flags in args.
func presetsFor(args []string, scenario string) ([]bench.Config, []string, error) {
	if scenario != "scale" {
		ps, err := bench.Scenario(scenario)
		return ps, nil, err
	}
	var o options
	cfg := bench.Default()
	fs := newFlagSet(&cfg, &o)
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		return nil, nil, err
	}
	sw := bench.DefaultScaleSweep(o.scaleFull)
	if o.scalePartitions != nil {
		sw.Partitions = o.scalePartitions
	}
	if o.scaleInstances != nil {
		sw.Instances = o.scaleInstances
	}
	sw.Rate = o.scaleRate
	ps, skipped, err := bench.ScalePhases(bench.ScaleBase(o.scaleFull), sw)
	var notes []string
	for _, s := range skipped {
		notes = append(notes, fmt.Sprintf("scale: %d partitions × %d instances skipped: %s", s.Partitions, s.Instances, s.Why))
	}
	return ps, notes, err
}

// intList is a comma-separated list of integers (a flag.Value); nil until
// set.
type intList []int

func (l *intList) String() string {
	if l == nil {
		return ""
	}
	ss := make([]string, len(*l))
	for i, n := range *l {
		ss[i] = strconv.Itoa(n)
	}
	return strings.Join(ss, ",")
}

func (l *intList) Set(s string) error {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil {
			return fmt.Errorf("%q is not a whole number", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return fmt.Errorf("want a comma-separated list of counts, such as 6,60,300")
	}
	*l = out
	return nil
}

func duplicate(have []bench.Config, c bench.Config) bool {
	c.Scenario, c.Anchors = "", nil
	for _, h := range have {
		h.Scenario, h.Anchors = "", nil
		if reflect.DeepEqual(h, c) {
			return true
		}
	}
	return false
}

type modesValue struct{ m *[]bench.Mode }

func (v *modesValue) String() string {
	if v.m == nil {
		return ""
	}
	ss := make([]string, len(*v.m))
	for i, m := range *v.m {
		ss[i] = string(m)
	}
	return strings.Join(ss, ",")
}

func (v *modesValue) Set(s string) error {
	ms, err := bench.ParseModes(s)
	if err == nil {
		*v.m = ms
	}
	return err
}

type orderValue struct{ o *processor.Ordering }

func (v *orderValue) String() string {
	if v.o == nil {
		return ""
	}
	return bench.OrderName(*v.o)
}

func (v *orderValue) Set(s string) error {
	o, err := bench.ParseOrder(s)
	if err == nil {
		*v.o = o
	}
	return err
}

// brokerList splits -brokers.
func brokerList(s string) []string {
	var out []string
	for _, b := range strings.Split(s, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}
