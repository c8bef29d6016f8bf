package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// trial is one mode's run in progress.
type trial struct {
	r     *Runner
	cfg   Config
	res   *Result
	input string // backlog topic; "" means produce live
	// ownInput: setup created the input, written during the run.
	ownInput bool
	job      Job

	// stateDir holds the run's state stores (stateful onceflow modes
	// only): one directory per instance ID under it, removed by cleanup.
	stateDir string
	// dedupeDir likewise holds the dedupe stores (-dup-rate).
	dedupeDir string
	// logDir holds each worker's log (subprocess and JVM modes): kept
	// when the run fails, removed by cleanup otherwise.
	logDir string

	cpuRounds int // the phase's calibration of Config.HandlerCPU

	failure string    // why the run failed before verification, if it did
	dnf     bool      // failure is a bound passed (timeout, stall, start-up): Config.Bounded makes it a DNF
	started time.Time // the run's clock start (the pipeline's release)
	pr      *message.Printer
}

// inProcessSessionTimeout is the group session timeout of in-process
// pipelines, which are never killed.
const (
	inProcessSessionTimeout = 10 * time.Second
	// workerSessionTimeout is Kafka's default group.min.session.timeout.ms:
	// as short as a real broker allows, so a worker that stays dead is
	// noticed soon.
	workerSessionTimeout = 6 * time.Second
)

// newTrial prepares run number run of mode over the shared backlog topic
// ("" for input produced during the run), its handlers hashing cpuRounds
// per record.
func newTrial(r *Runner, cfg Config, mode Mode, run int, shared string, cpuRounds int) *trial {
	res := Result{
		Scenario: cfg.Scenario, Mode: mode, Messages: cfg.Messages, Sessions: cfg.Sessions,
		Partitions: cfg.Partitions, Rate: cfg.Rate, Workers: cfg.Workers, MachineCores: runtime.NumCPU(),
	}
	if a, ok := cfg.Anchors[mode]; ok {
		res.Anchor = &a
	}
	if n := cfg.baselineCap(); n > 0 && mode.baseline() {
		res.Messages, res.Capped = n, true
	}
	res.Stateful = cfg.Stateful && mode.onceflow()
	res.statefulIgnored = cfg.Stateful && !mode.onceflow()
	if cfg.DupRate > 0 {
		res.DupRate, res.DupsInjected = cfg.DupRate, newDupSchedule(cfg.DupRate, res.Messages).injected()
	}
	res.Run = run
	res.commitIntervalMs = cfg.CommitInterval.Milliseconds()
	if cfg.Rate > 0 {
		res.Primer = primerSize(res.Messages, cfg.Sessions, cfg.Partitions)
	}
	if cpuRounds > 0 {
		res.HandlerCPUMicros, res.HandlerCPURounds = float64(cfg.HandlerCPU)/float64(time.Microsecond), cpuRounds
	}
	return &trial{r: r, cfg: cfg, res: &res, input: shared, cpuRounds: cpuRounds}
}

// trialTopics lists the topics the trials created or read, each once.
func trialTopics(ts []*trial) []string {
	var out []string
	for _, t := range ts {
		for _, topic := range []string{t.input, t.job.Output, t.job.DLQ} {
			if !slices.Contains(out, topic) {
				out = append(out, topic)
			}
		}
	}
	return out
}

// setup creates the run's topics (the input too, when produced during
// the run) and state directories, and writes its job.
func (t *trial) setup(ctx context.Context, base string) error {
	env, cfg := t.r.Env, t.cfg
	var err error
	if t.input == "" {
		if t.input, err = env.Topic(ctx, base+"-in", cfg.Partitions); err != nil {
			return err
		}
		t.ownInput = true
	}
	out, err := env.Topic(ctx, base+"-out", cfg.Partitions)
	if err != nil {
		return err
	}
	dlq, err := env.Topic(ctx, base+"-dlq", 1)
	if err != nil {
		return err
	}
	t.job = Job{
		Mode: t.res.Mode, Brokers: env.Brokers, Security: env.Security, Input: t.input, Output: out, DLQ: dlq,
		Group: env.Group(base), InstanceID: "i0", Messages: t.res.Messages,
		Latency: cfg.HandlerLatency, CPURounds: t.cpuRounds, FaultRate: cfg.FaultRate, RetryInitial: cfg.RetryInitial,
		CommitInterval: cfg.CommitInterval, IdleSession: cfg.IdleSession, MinCommitInterval: cfg.MinCommitInterval, Pipeline: cfg.Pipeline, MetadataBytes: cfg.MetadataBytes,
		SessionTimeout: inProcessSessionTimeout, GroupProtocol: cfg.GroupProtocol, Metrics: t.r.Metrics, ClientLogLevel: t.r.ClientLogLevel,
	}
	if cfg.Workers > 0 {
		t.job.SessionTimeout = workerSessionTimeout
	}
	if cfg.Workers > 0 || t.res.Mode.jvm() {
		t.logDir = filepath.Join(os.TempDir(), env.Name(base+"-logs"))
		if err := os.MkdirAll(t.logDir, 0o755); err != nil {
			return fmt.Errorf("creating the worker log directory: %w", err)
		}
	}
	if cfg.Stateful && t.res.Mode.onceflow() {
		if t.stateDir, err = os.MkdirTemp("", "eosbench-state-"); err != nil {
			return err
		}
		// Workers get a subdirectory per instance ID (see workerSet.start),
		// kept across restarts of that instance.
		t.job.Stateful, t.job.StateDir = true, filepath.Join(t.stateDir, t.job.InstanceID)
		env.track(changelogTopic(t.job.Group, t.job.Input))
	}
	if cfg.DupRate > 0 && t.res.Mode.dedupes() {
		if t.dedupeDir, err = os.MkdirTemp("", "eosbench-dedupe-"); err != nil {
			return err
		}
		t.job.DedupeDir = filepath.Join(t.dedupeDir, t.job.InstanceID)
		env.track(t.job.Group + "-" + t.job.Input + "-dedupe")
	}
	return nil
}

// ownTopics are the topics only this run wrote: its output and dead
// letters, and its input unless that is the phase's backlog. (A stateful
// or dedupe run's changelog stays until Close: Env.track holds it.)
func (t *trial) ownTopics() []string {
	out := []string{t.job.Output, t.job.DLQ}
	if t.ownInput {
		out = append(out, t.input)
	}
	return out
}

// workerLogs is where the run's workers write their logs.
func (t *trial) workerLogs() workerLogs {
	return workerLogs{stderr: t.r.WorkerStderr, level: t.r.WorkerStderrLevel, dir: t.logDir}
}

// cleanup removes the run's state directories, and its worker logs unless
// it failed (they are its evidence).
func (t *trial) cleanup() {
	dirs := []string{t.stateDir, t.dedupeDir}
	if !t.res.Failed() {
		dirs = append(dirs, t.logDir)
	}
	for _, dir := range dirs {
		if dir == "" {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			t.r.Log.Warn("removing the store directory", "dir", dir, "err", err)
		}
	}
}

// run runs the pipeline until every awaited input is accounted for, the
// timeout passes or the pipeline fails, then stops everything.
func (t *trial) run(ctx context.Context) error {
	cfg, res, log := t.cfg, t.res, t.r.Log
	t.pr = message.NewPrinter(language.English)
	released := false // the prepared pipeline, once released, is stopped by stopPipeline
	runCtx, cancelRun := context.WithTimeout(ctx, cfg.Timeout)
	defer cancelRun()
	live := cfg.Rate > 0

	// A JVM mode's processes start before the clock does (prepareJVM).
	prepared, err := t.prepareJVM(runCtx)
	if err != nil {
		return err
	}
	if prepared != nil {
		defer func() {
			if !released {
				prepared.stop(10 * time.Second)
			}
		}()
	}

	start := time.Now()
	t.started = start
	cpu0 := sampleCPU()
	floor := start // backlog: latency counts from when the run could start
	if live {
		floor = time.Time{}
	}
	obs, err := startObserver(runCtx, t.r.Env.Brokers, t.r.Env.opts, t.job.Output, t.job.DLQ, res.Messages, res.Primer, start, floor, log)
	if err != nil {
		return err
	}
	defer obs.stop()

	var prod *producer
	var prodDone chan error // nil for a backlog: nothing to wait for
	prodCtx, cancelProd := context.WithCancel(runCtx)
	defer func() {
		cancelProd()
		if prod != nil {
			prod.close()
		}
	}()
	if live {
		if prod, err = newProducer(t.r.Env.Brokers, t.r.Env.opts, t.input, cfg.Sessions, cfg.Size, log); err != nil {
			return err
		}
		prod.dups = newDupSchedule(cfg.DupRate, res.Messages)
	}

	pl, err := t.startPipeline(runCtx, prepared)
	if err != nil {
		return err
	}
	released = true
	stopProgress := t.r.Progress.Start(func() string { return t.status(obs, pl, start) })
	// The fair start (docs/benchmarks.md, "Fair start"): a paced run's
	// feeder writes its primer and starts the clock only once the
	// pipeline has output every primer record, so that no mode's
	// start-up (group join, task creation, each producer's
	// initTransactions) counts as its records' latency.
	var interrupted error
	if live {
		interrupted = t.prime(ctx, runCtx, obs, pl, prod)
	}
	if interrupted == nil && t.failure == "" {
		if live {
			prodDone = make(chan error, 1)
			go func() { prodDone <- prod.run(prodCtx, res.Primer, res.Messages, cfg.Rate) }()
		}
		// While input is being produced, kill workers if asked to.
		killCtx, stopKills := context.WithCancel(runCtx)
		defer stopKills()
		if ws, ok := pl.(*workerSet); ok && cfg.KillEvery > 0 {
			go ws.killLoop(killCtx, cfg.KillEvery)
		}
		interrupted = t.wait(ctx, runCtx, obs, pl, prodDone, stopKills)
		stopKills()
	}
	res.CoresSelf, res.CoresMachine = cpu0.cores(sampleCPU())
	if cfg.Workers > 0 || res.Mode.jvm() {
		res.CoresSelf = 0 // the pipelines ran in other processes
	}
	if interrupted == nil && t.failure == "" && res.DupsInjected > 0 {
		if err := waitConsumed(runCtx, log, t.r.Env.adm, t.job, int64(res.Messages+res.DupsInjected), cfg.Stall); err != nil {
			if interrupted = ctx.Err(); interrupted == nil {
				t.failure = err.Error()
			}
		}
	}
	cancelProd()
	t.stopPipeline(pl) // also when interrupted: no pipeline outlives its run
	stopProgress()
	obs.stop()
	if interrupted != nil {
		return interrupted
	}

	windowStart := start
	if live {
		if first, _ := prod.status(); !first.IsZero() {
			windowStart = first
		}
	}
	if ns := obs.firstOutput.Load(); ns != 0 {
		res.FirstOutputMs = float64(time.Unix(0, ns).Sub(start)) / float64(time.Millisecond)
	}
	if !obs.last.IsZero() && obs.last.After(windowStart) {
		res.Seconds = obs.last.Sub(windowStart).Seconds()
		// The primer's inputs were accounted for before the window.
		res.Throughput = float64(obs.accounted.Load()-int64(res.Primer)) / res.Seconds
	}
	res.hist, res.timeline = obs.hist, &obs.tl
	res.setLatency()
	return nil
}

// prime writes a paced run's primer and waits until every primer input
// is accounted for (its output visible), the pipeline stops, or the
// start-up bound passes (t.failure then says how far it got); the error
// is ctx's when it was canceled.
func (t *trial) prime(ctx, runCtx context.Context, obs *observer, pl running, prod *producer) error {
	k := t.res.Primer
	if k == 0 {
		return nil
	}
	if err := prod.prime(runCtx, k); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		t.failure = fmt.Sprintf("producing the primer: %v", err)
		return nil
	}
	bound := startupBound(t.cfg)
	deadline := time.NewTimer(bound)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for obs.accounted.Load() < int64(k) {
		select {
		case <-tick.C:
		case <-obs.done:
		case <-deadline.C:
			t.dnf = true
			t.failure = fmt.Sprintf("not started: %d of the %d primer inputs accounted for within %v (first output %s)", obs.accounted.Load(), k, bound, t.firstOutputText(obs))
			return nil
		case <-runCtx.Done():
			if err := ctx.Err(); err != nil {
				return err
			}
			t.dnf = true
			t.failure = fmt.Sprintf("timed out after %v before its start: %d of the %d primer inputs accounted for", t.cfg.Timeout, obs.accounted.Load(), k)
			return nil
		case <-pl.stopped():
			t.failure = fmt.Sprintf("pipeline stopped by itself: %v", pl.runErr())
			return nil
		}
	}
	return nil
}

// startupBound is how long a paced run's pipeline may take to output its
// primer: -stall, but at least two minutes (Kafka Streams' start over
// hundreds of partitions on a loaded 2-core machine), and not beyond
// -timeout.
func startupBound(cfg Config) time.Duration {
	return min(max(cfg.Stall, 2*time.Minute), cfg.Timeout)
}

func (t *trial) firstOutputText(obs *observer) string {
	ns := obs.firstOutput.Load()
	if ns == 0 {
		return "none"
	}
	return "after " + time.Unix(0, ns).Sub(t.started).Round(time.Millisecond).String()
}

// wait returns once every awaited input is accounted for or the run
// fails (t.failure says why); the error is ctx's when it was canceled.
func (t *trial) wait(ctx, runCtx context.Context, obs *observer, pl running, prodDone chan error, stopKills func()) error {
	cfg := t.cfg
	var stallTick <-chan time.Time
	if cfg.Stall > 0 {
		tk := time.NewTicker(time.Second)
		defer tk.Stop()
		stallTick = tk.C
	}
	lastCount, lastChange := int64(0), time.Now()
	for {
		select {
		case <-obs.done:
			return nil
		case now := <-stallTick:
			if n := obs.accounted.Load(); n != lastCount {
				lastCount, lastChange = n, now
			} else if now.Sub(lastChange) >= cfg.Stall {
				t.dnf = true
				t.failure = fmt.Sprintf("stalled: no input accounted for in %v, %d of %d so far", cfg.Stall, n, t.res.Messages)
				return nil
			}
		case <-runCtx.Done():
			if err := ctx.Err(); err != nil {
				return err
			}
			t.dnf = true
			t.failure = fmt.Sprintf("timed out after %v with %d of %d inputs accounted for", cfg.Timeout, obs.accounted.Load(), t.res.Messages)
			return nil
		case <-pl.stopped():
			t.failure = fmt.Sprintf("pipeline stopped by itself: %v", pl.runErr())
			return nil
		case err := <-prodDone:
			prodDone = nil
			stopKills() // production over: let the pipeline finish undisturbed
			if err != nil {
				t.failure = fmt.Sprintf("producing the input: %v", err)
				return nil
			}
		}
	}
}

func (t *trial) status(obs *observer, pl running, start time.Time) string {
	el := time.Since(start)
	acc := obs.accounted.Load()
	s := t.pr.Sprintf("%s %s: %d/%d accounted  %.0f rec/s  outputs %d  dlq %d  %.1fs",
		t.cfg.Scenario, t.res.Mode, acc, t.res.Messages, float64(acc)/el.Seconds(),
		obs.outputs.Load(), obs.deadLetters.Load(), el.Seconds())
	if ws, ok := pl.(*workerSet); ok {
		k, u := ws.restarts()
		s += t.pr.Sprintf("  kills %d", k)
		if u > 0 {
			s += fmt.Sprintf("  unexpected exits %d", u)
		}
	}
	return s
}
