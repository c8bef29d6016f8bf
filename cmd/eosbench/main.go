package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/onceflow/onceflow/internal/bench"
	"github.com/onceflow/onceflow/internal/version"
)

func main() {
	// SIGINT/SIGTERM stop the runs (or a worker) cleanly: pipelines
	// commit, topics are deleted.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	status := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(status)
}

// run is the whole program, minus the process: tests call it directly.
// It returns the exit status: 0 when every run passed, 1 when one failed
// (an exactly-once mode failed verification, the at-least-once mode lost
// records, a run timed out or could not be carried out), 2 for bad usage.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var o options
	cfg := bench.Default()
	fs := newFlagSet(&cfg, &o)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "eosbench: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if o.version {
		fmt.Fprintln(stdout, version.Current("eosbench"))
		return 0
	}
	log, err := newLogger(stderr, o.logLevel)
	if err != nil {
		fmt.Fprintln(stderr, "eosbench:", err)
		return 2
	}
	if o.worker != "" {
		return runWorker(ctx, o.worker, stdin, stdout, log)
	}
	phs, notes, err := phases(args, o.scenario)
	if err != nil {
		fmt.Fprintln(stderr, "eosbench:", err)
		return 2
	}
	for _, n := range notes {
		fmt.Fprintln(stderr, "eosbench:", n)
	}
	// Before any topic is made: a phase the machine cannot hold (memory,
	// open files, the brokers' files and maps when they run here).
	brokers := brokerList(o.brokers)
	if err := bench.CheckFit(phs, bench.ThisMachine(), len(brokers) == 0, bench.LocalBrokers(brokers)); err != nil {
		fmt.Fprintln(stderr, "eosbench:", err)
		return 2
	}
	if o.cpuprofile != "" {
		stopProfile, err := startCPUProfile(o.cpuprofile)
		if err != nil {
			fmt.Fprintln(stderr, "eosbench:", err)
			return 1
		}
		defer stopProfile()
	}
	var reg *prometheus.Registry
	if o.metricsAddr != "" {
		var stopMetrics func()
		if reg, stopMetrics, err = serveMetrics(o.metricsAddr, stderr, log); err != nil {
			fmt.Fprintln(stderr, "eosbench:", err)
			return 1
		}
		defer stopMetrics()
		defer linger(ctx, o.metricsLinger) // runs before stopMetrics
	}
	results, err := runPhases(ctx, phs, o, reg, stderr, log)
	status := 0
	if err != nil {
		log.Error("run failed", "err", err)
		status = 1
	}
	for _, r := range results {
		if r.Failed() {
			status = 1
		}
	}
	if err := report(results, o, stdout); err != nil {
		fmt.Fprintln(stderr, "eosbench:", err)
		status = 1
	}
	if o.memprofile != "" {
		if err := writeHeapProfile(o.memprofile); err != nil {
			fmt.Fprintln(stderr, "eosbench:", err)
			status = 1
		}
	}
	return status
}

func runPhases(ctx context.Context, phs []bench.Config, o options, reg *prometheus.Registry, stderr io.Writer, log *slog.Logger) ([]bench.Result, error) {
	env, err := bench.NewSecuredEnv(brokerList(o.brokers), o.sec.WithPasswordFromEnv(), o.keep, log)
	if err != nil {
		return nil, err
	}
	defer env.Close()
	// Workers log at info at least, into their log files (kept when a
	// run fails); stderr gets their lines at -log-level and above.
	var level slog.Level
	_ = level.UnmarshalText([]byte(o.logLevel)) // checked by newLogger
	workerLevel := min(level, slog.LevelInfo)
	r := &bench.Runner{Env: env, Log: log, Stderr: stderr, WorkerStderr: stderr, WorkerStderrLevel: level,
		WorkerArgs: []string{"-log-level", workerLevel.String()}, ClientLogLevel: o.clientLog}
	if reg != nil {
		r.Metrics = reg
	}
	if f, ok := stderr.(*os.File); ok {
		r.Progress = bench.NewProgress(f)
	}
	for _, ph := range phs {
		if ph.Workers > 0 && reg != nil {
			log.Warn("-metrics-addr: pipelines of -workers runs are in worker processes: their metrics are not served", "scenario", ph.Scenario)
		}
		if ph.Workers > 0 && r.WorkerExe == "" {
			if r.WorkerExe, err = os.Executable(); err != nil {
				return nil, fmt.Errorf("finding this binary to run workers: %w", err)
			}
		}
	}
	var results []bench.Result
	for _, ph := range phs {
		rs, err := r.Run(ctx, ph)
		results = append(results, rs...)
		if err != nil {
			return results, fmt.Errorf("%s: %w", ph.Scenario, err)
		}
	}
	return results, nil
}

func report(results []bench.Result, o options, stdout io.Writer) error {
	if o.hist != "" {
		f, err := os.Create(o.hist)
		if err != nil {
			return err
		}
		err = bench.WriteHistograms(f, results)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("writing histograms: %w", err)
		}
	}
	if o.plot != "" {
		plot := bench.WritePlot
		if bench.HasScale(results) {
			plot = bench.WriteScalePlot // a curve per point would be unreadable
		}
		if err := writeFile(o.plot, func(w io.Writer) error { return plot(w, results) }); err != nil {
			return fmt.Errorf("writing the plot: %w", err)
		}
	}
	if o.json {
		// Empty arrays, not null, when nothing ran.
		summary := bench.Summarize(results)
		if results == nil {
			results, summary = []bench.Result{}, []bench.Summary{}
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Results []bench.Result  `json:"results"`
			Summary []bench.Summary `json:"summary"`
		}{results, summary})
	}
	return bench.WriteTable(stdout, results)
}

// writeFile creates path and writes it with write, reporting the first
// error of either or of closing it.
func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// runWorker runs one job until stdin closes (the benchmark asking it to
// stop, or dying) or a signal arrives.
func runWorker(ctx context.Context, arg string, stdin io.Reader, stdout io.Writer, log *slog.Logger) int {
	var job bench.Job
	if err := json.Unmarshal([]byte(arg), &job); err != nil {
		log.Error("worker: bad job", "err", err)
		return 2
	}
	job.Security = job.Security.WithPasswordFromEnv() // see bench's workers.go
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		cancel()
	}()
	log = log.With("instance", job.InstanceID, "pid", os.Getpid())
	if err := bench.RunWorker(ctx, job, stdout, log); err != nil {
		log.Error("worker failed", "err", err)
		return 1
	}
	return 0
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("-log-level: %w", err)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	runtime.GC() // up-to-date statistics
	err = pprof.WriteHeapProfile(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
