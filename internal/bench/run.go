package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"runtime"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/readback"
	"github.com/onceflow/onceflow/internal/verify"
)

// Runner runs phases in an Env.
type Runner struct {
	Env      *Env
	Log      *slog.Logger
	Progress *Progress // nil: no live line
	// WorkerExe is the binary that Config.Workers re-executes with the
	// worker flag (normally this program's own).
	WorkerExe string
	// WorkerArgs are passed to every worker before the job (e.g. the log
	// level).
	WorkerArgs   []string
	WorkerStderr io.Writer
	// WorkerStderrLevel: worker log lines below it go to the worker's
	// log file only (see Evidence), not to WorkerStderr.
	WorkerStderrLevel slog.Level
	// Stderr, when set, gets one line per phase saying what its warm-up
	// took.
	Stderr io.Writer
	// Metrics, when set, is where in-process onceflow pipelines register
	// their metrics (eosbench -metrics-addr serves it). Each run's group
	// names its series apart.
	Metrics prometheus.Registerer
	// ClientLogLevel is how much of franz-go's own log onceflow modes
	// pass to Log (processor.WithClientLogLevel).
	ClientLogLevel slog.Level
	// BeforeVerify, when set, runs after each run's pipeline stopped and
	// before its output is read back: a test plants a fault there.
	BeforeVerify func(ctx context.Context, job Job) error

	jvm jvmBuilds // the JVM modes' programs, built on first use

	// startDelay holds in-process pipelines back this long after their
	// start: a test's stand-in for a slow framework start (Kafka Streams'
	// group join and initTransactions per stream thread).
	startDelay time.Duration
}

// buildOutput is where the JVM modes' builds report progress.
func (r *Runner) buildOutput() io.Writer {
	if r.Stderr != nil {
		return r.Stderr
	}
	return io.Discard
}

// Run runs every mode of cfg and returns their results, each with its
// verdict. The error is for runs that could not be carried out at all.
func (r *Runner) Run(ctx context.Context, cfg Config) ([]Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if r.Env.Fake && slices.Contains(cfg.Modes, ModeParallelConsumer) {
		// Its kafka-clients 3.7.0 producer rejects an API version range
		// kfake advertises ("Expected minValue >= 1 ... received
		// minValue: 0") and its I/O thread dies. (kafka-streams, on
		// kafka-clients 4.4.0, runs on kfake.)
		return nil, errors.New("mode parallel-consumer needs real brokers (-brokers): its kafka-clients 3.7.0 producer fails against the embedded cluster's API versions")
	}
	if cfg.Workers > 0 && r.WorkerExe == "" {
		return nil, errors.New("bench: workers need the binary to re-execute")
	}
	// A backlog is produced once, before the runs, so every mode reads
	// the very same records. Capped baselines read a topic holding only
	// the first BaselineMessages of them: a serial consumer drains
	// partitions unevenly, so on the full input it would handle most of
	// it before the last capped ID.
	var full, prefix string
	if cfg.Rate == 0 {
		var err error
		if full, err = r.backlog(ctx, cfg, "in", cfg.Messages); err != nil {
			return nil, err
		}
		if n := cfg.baselineCap(); n > 0 && hasBaseline(cfg.Modes) {
			if prefix, err = r.backlog(ctx, cfg, fmt.Sprintf("in-first%d", n), n); err != nil {
				return nil, err
			}
		}
	}
	// Calibrated once for the phase, before any pipeline loads the
	// machine, and the same rounds handed to every run: the modes then do
	// the same work per record.
	var cal CPUCalibration
	if cfg.HandlerCPU > 0 {
		cal = calibrateCPU(cfg.HandlerCPU, cfg.Size)
		r.Log.Info("handler CPU calibrated", "scenario", cfg.Scenario, "target", cal.Target, "rounds", cal.Rounds, "per_round", cal.PerRound)
		if r.Stderr != nil {
			fmt.Fprintf(r.Stderr, "eosbench: %s: %s\n", cfg.Scenario, cal)
		}
	}
	// Every run's topics are created before the first timed run, so that
	// the warm-up can ready them all: no run pays for another's setup.
	var trials []*trial
	defer func() {
		for _, t := range trials {
			t.cleanup()
		}
	}()
	runs := map[Mode]int{} // runs of each mode so far
	for i, m := range schedule(cfg) {
		input := full
		if m.baseline() && prefix != "" {
			input = prefix
		}
		runs[m]++
		t := newTrial(r, cfg, m, runs[m], input, cal.Rounds)
		trials = append(trials, t)
		if err := t.setup(ctx, fmt.Sprintf("%s-%d-%s", slug(cfg.Scenario), i, slug(string(m)))); err != nil {
			return nil, err
		}
	}
	if err := r.warmUp(ctx, cfg.Scenario, trialTopics(trials)); err != nil {
		return nil, err
	}
	var results []Result
	for _, t := range trials {
		// Each run starts from a collected heap: in-process pipelines
		// and the embedded cluster share this process, and garbage left
		// by the previous run (its read-back, its dropped topics) would
		// be collected on the next run's time.
		runtime.GC()
		res, err := r.runTrial(ctx, t)
		if err != nil {
			return results, err
		}
		results = append(results, res)
		if cfg.DropTopics {
			r.Env.DropNow(ctx, t.ownTopics()...)
		} else {
			r.Env.Drop(ctx, t.ownTopics()...)
		}
	}
	if cfg.DropTopics {
		var backlogs []string
		for _, topic := range []string{full, prefix} {
			if topic != "" {
				backlogs = append(backlogs, topic)
			}
		}
		r.Env.DropNow(ctx, backlogs...)
	}
	setRatios(results)
	return results, nil
}

// schedule is the order of a phase's runs: the modes, resolved, Count
// times over, interleaved (A B A B), so that drift of the machine during
// the phase falls on every mode alike.
func schedule(cfg Config) []Mode {
	var out []Mode
	for range cfg.Count {
		for _, m := range cfg.Modes {
			out = append(out, m.resolve(cfg.Order))
		}
	}
	return out
}

// backlog creates a topic and writes input IDs [0, n) to it.
func (r *Runner) backlog(ctx context.Context, cfg Config, suffix string, n int) (string, error) {
	topic, err := r.Env.Topic(ctx, slug(cfg.Scenario)+"-"+suffix, cfg.Partitions)
	if err != nil {
		return "", err
	}
	// A topic just created reaches the brokers one by one: producing at
	// once met UNKNOWN_TOPIC_OR_PARTITION, beyond franz-go's retries, while
	// a 3-node cluster was still deleting an earlier run's 900 partitions.
	wctx, cancel := context.WithTimeout(ctx, warmUpTimeout)
	_, err = r.Env.awaitTopics(wctx, []string{topic})
	cancel()
	if err != nil {
		return "", fmt.Errorf("waiting for the input topic %s: %w", topic, err)
	}
	p, err := newProducer(r.Env.Brokers, r.Env.opts, topic, cfg.Sessions, cfg.Size, r.Log)
	if err != nil {
		return "", err
	}
	p.dups = newDupSchedule(cfg.DupRate, n)
	defer p.close()
	start := time.Now()
	stop := r.Progress.Start(func() string {
		_, done := p.status()
		return fmt.Sprintf("%s: producing input %d/%d", cfg.Scenario, done, n)
	})
	// The production rides out hiccups until -timeout, not forever.
	pctx, cancelProd := context.WithTimeout(ctx, cfg.Timeout)
	err = p.run(pctx, 0, n, 0)
	cancelProd()
	stop()
	if err != nil {
		return "", fmt.Errorf("producing the input: %w", err)
	}
	r.Log.Info("input produced", "topic", topic, "records", n, "took", time.Since(start).Round(time.Millisecond))
	return topic, nil
}

func hasBaseline(ms []Mode) bool {
	for _, m := range ms {
		if m.baseline() {
			return true
		}
	}
	return false
}

var unsafeName = regexp.MustCompile(`[^a-zA-Z0-9._-]+`)

func slug(s string) string { return unsafeName.ReplaceAllString(s, "-") }

// runTrial runs a trial set up before: observer, pipeline(s), wait, stop,
// read back and verify.
func (r *Runner) runTrial(ctx context.Context, t *trial) (Result, error) {
	cfg, res, mode := t.cfg, t.res, t.res.Mode
	if err := t.run(ctx); err != nil {
		return *res, err
	}
	if r.BeforeVerify != nil {
		if err := r.BeforeVerify(ctx, t.job); err != nil {
			return *res, err
		}
	}
	rctx, cancel := context.WithTimeout(ctx, readBackTimeout(cfg))
	defer cancel()
	ch, stateDLQ, err := verifyOutput(rctx, r.Log, r.Env.Brokers, r.Env.opts, t.job.Output, t.job.DLQ, res.Messages, -1)
	if err != nil {
		return *res, err
	}
	rep := ch.Report()
	if res.Stateful {
		res.stateDLQ = stateDLQ
		if res.StateViolations, err = verifyState(rctx, r.Log, r.Env.Brokers, r.Env.opts, changelogTopic(t.job.Group, t.job.Input), res.Messages, cfg.Sessions); err != nil {
			return *res, err
		}
	}
	if res.DupsInjected > 0 && mode.dedupes() && res.Kills+res.Crashes == 0 {
		// Killed workers take their counts with them: judged only without.
		n := res.Counters.DupsSkipped
		res.DupsSkipped = &n
	}
	if cfg.Bounded && t.dnf {
		res.judgeDNF(rep, t.failure)
	} else {
		res.judge(rep, t.failure)
	}
	if res.Failed() && t.failure == "" {
		// A FAIL names its records, not only their counts. Duplicates
		// are judged in exactly-once modes unless each duplicate input
		// is to be passed through; order in ordered ones.
		dups := mode.ExactlyOnce() && (res.DupsInjected == 0 || mode.dedupes())
		if which := ch.Which(dups, mode.ExactlyOnce() && mode.ordered()); which != "" {
			res.Failure += " (" + which + ")"
		}
	}
	if res.Failed() {
		res.Evidence = t.gatherEvidence(rctx, ch)
	}
	r.Log.Info("run finished", "scenario", cfg.Scenario, "mode", mode, "run", res.Run, "verdict", res.Verdict, "report", rep.String())
	return *res, nil
}

// readBackTimeout bounds a run's read-back and verification: -timeout, in
// which they ride out the brokers' hiccups, and never less than the 5
// minutes a read-back always had.
func readBackTimeout(cfg Config) time.Duration { return max(cfg.Timeout, 5*time.Minute) }

// verifyOutput reads the committed output back and checks it against
// inputs 0..n-1, keeping where the copies of input watch are (-1: none).
// It also counts the dead letters of records that found their session's
// state out of step. The brokers' hiccups are retried until ctx ends, and
// logged to log.
func verifyOutput(ctx context.Context, log *slog.Logger, brokers []string, opts []kgo.Opt, output, dlq string, n int, watch int64) (*verify.Checker, int, error) {
	recs, err := readback.ReadCommittedLog(ctx, log, brokers, opts, output, dlq)
	if err != nil {
		return nil, 0, fmt.Errorf("reading the output back: %w", err)
	}
	stateDLQ := 0
	ch := verify.NewChecker(n)
	if watch >= 0 {
		ch.Watch(uint64(watch))
	}
	for _, rec := range recs {
		p, err := verify.Decode(rec.Value)
		if err != nil {
			ch.Malformed()
			continue
		}
		o := verify.Observed{Session: string(rec.Key), Payload: p, Where: verify.Copy{
			Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset, ProducerID: rec.ProducerID, ProducerEpoch: rec.ProducerEpoch,
		}}
		if rec.Topic == dlq {
			if stateDeadLetter(rec) {
				stateDLQ++
			}
			ch.DeadLetter(o)
		} else {
			ch.Output(o)
		}
	}
	return ch, stateDLQ, nil
}
