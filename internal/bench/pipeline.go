package bench

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/clientsec"
	"github.com/onceflow/onceflow/internal/durations"
)

// Job is what one pipeline instance runs. Subprocess workers receive it
// as JSON on their command line.
type Job struct {
	Mode    Mode     `json:"mode"` // resolved: never ModeOnceflow
	Brokers []string `json:"brokers"`
	// Security is how the pipeline's clients reach Brokers (Env.Security).
	Security   clientsec.Config `json:"security,omitempty"`
	Input      string           `json:"input"`
	Output     string           `json:"output"`
	DLQ        string           `json:"dlq"`
	Group      string           `json:"group"`
	InstanceID string           `json:"instance_id"`
	Messages   int              `json:"messages"` // sizes the fault bitset

	Latency           Latency       `json:"latency"`
	CPURounds         int           `json:"cpu_rounds,omitempty"` // SHA-256 rounds per record, calibrated to Config.HandlerCPU
	FaultRate         float64       `json:"fault_rate"`
	RetryInitial      time.Duration `json:"retry_initial"`
	CommitInterval    time.Duration `json:"commit_interval"`
	IdleSession       time.Duration `json:"idle_session,omitempty"`
	MinCommitInterval time.Duration `json:"min_commit_interval,omitempty"`
	Pipeline          int           `json:"pipeline,omitempty"`
	MetadataBytes     int           `json:"metadata_bytes,omitempty"`
	// Stateful gives onceflow modes a state store in StateDir and a
	// handler that keeps a per-session counter in it (see stateHandler).
	Stateful bool   `json:"stateful,omitempty"`
	StateDir string `json:"state_dir,omitempty"`
	// DedupeDir, when set, gives onceflow modes processor.WithDedupe with
	// a store there (-dup-rate).
	DedupeDir string `json:"dedupe_dir,omitempty"`
	// SessionTimeout is the group session timeout: short for workers that
	// get killed, so a lost member is noticed soon even if it is not
	// restarted.
	SessionTimeout time.Duration `json:"session_timeout"`
	// GroupProtocol is Config.GroupProtocol.
	GroupProtocol string `json:"group_protocol,omitempty"`
	// ClientLogLevel is processor.WithClientLogLevel of onceflow modes.
	ClientLogLevel slog.Level `json:"client_log_level"`
	// Metrics, when set, is where onceflow modes register their metrics
	// (Runner.Metrics). Workers get none: their metrics stay in their
	// processes.
	Metrics prometheus.Registerer `json:"-"`
}

// clientOpts are Security's client options (NewSecuredEnv checked that
// it makes them).
func (j Job) clientOpts() []kgo.Opt {
	opts, _ := j.Security.Opts()
	return opts
}

// groupOpts are the baselines' client options for j.GroupProtocol.
func (j Job) groupOpts() []kgo.Opt {
	if j.GroupProtocol == "consumer" {
		return []kgo.Opt{kgo.ServerSideBalancer()}
	}
	return nil
}

// Counters are a pipeline's own counts, reported beside the verdict.
type Counters struct {
	Commits int64 `json:"commits"`
	// CommitNanos is the time spent committing (flush, offsets and, but
	// for alo-raw, EndTxn).
	CommitNanos int64 `json:"commit_ns"`
	// CommitP50, CommitP99 and CommitMax are the median, 99th percentile
	// and longest commit round trip (the same spans, one by one): on the
	// chat scenario a record's p50 is to be set beside the median.
	CommitP50 int64 `json:"commit_p50_ns,omitempty"`
	CommitP99 int64 `json:"commit_p99_ns,omitempty"`
	CommitMax int64 `json:"commit_max_ns,omitempty"`
	Aborts    int64 `json:"aborts"`
	Retries   int64 `json:"retries"`
	Rebuilds  int64 `json:"rebuilds,omitempty"`
	// DupsSkipped is onceflow's Stats.DuplicatesSkipped (-dup-rate).
	DupsSkipped int64 `json:"duplicates_skipped,omitempty"`
	// Requests times onceflow's requests to the brokers by kind (end to
	// end as the client sees them): what its commits are made of.
	Requests map[string]RequestTime `json:"requests,omitempty"`
	// RequestCount and RequestBytes total the pipeline's requests but
	// fetches, and their bytes written and read (Go modes only).
	RequestCount int64 `json:"request_count,omitempty"`
	RequestBytes int64 `json:"request_bytes,omitempty"`

	Sleeps     int64 `json:"handler_sleeps,omitempty"`   // simulated handler calls that slept
	SleptNanos int64 `json:"handler_slept_ns,omitempty"` // their total sleep, as measured
	Spans      int64 `json:"spans_exported,omitempty"`   // observed modes: spans that reached the exporter
}

// add sums o into c. The median and p99 of a union cannot be had from
// the parts': c keeps the highest of each, a bound rather than the figure
// (the max is exact). Only runs of several workers add, crash tests that
// measure no latency.
func (c *Counters) add(o Counters) {
	c.Commits += o.Commits
	c.CommitNanos += o.CommitNanos
	c.CommitP50 = max(c.CommitP50, o.CommitP50)
	c.CommitP99 = max(c.CommitP99, o.CommitP99)
	c.CommitMax = max(c.CommitMax, o.CommitMax)
	c.Aborts += o.Aborts
	c.Retries += o.Retries
	c.Rebuilds += o.Rebuilds
	for name, t := range o.Requests {
		if c.Requests == nil {
			c.Requests = make(map[string]RequestTime)
		}
		s := c.Requests[name]
		s.Count += t.Count
		s.Errors += t.Errors
		s.P50, s.P99 = max(s.P50, t.P50), max(s.P99, t.P99)
		c.Requests[name] = s
	}
	c.RequestCount += o.RequestCount
	c.RequestBytes += o.RequestBytes
	c.DupsSkipped += o.DupsSkipped
	c.Sleeps += o.Sleeps
	c.SleptNanos += o.SleptNanos
	c.Spans += o.Spans
}

// commitMs is the mean commit round trip in milliseconds.
func (c Counters) commitMs() float64 {
	if c.Commits == 0 {
		return 0
	}
	return nsToMs(c.CommitNanos) / float64(c.Commits)
}

func nsToMs(ns int64) float64 { return float64(ns) / 1e6 }

// setCommits sets c's commit count, time and quantiles from r.
func (c *Counters) setCommits(r *durations.Recorder) {
	s := r.Summary()
	c.Commits, c.CommitNanos = s.Count, int64(s.Total)
	c.CommitP50, c.CommitP99, c.CommitMax = int64(s.P50), int64(s.P99), int64(s.Max)
}

// sleepMs is the mean measured handler sleep in milliseconds.
func (c Counters) sleepMs() float64 {
	if c.Sleeps == 0 {
		return 0
	}
	return float64(c.SleptNanos) / float64(c.Sleeps) / 1e6
}

// pipeline is one running consume-transform-produce instance.
type pipeline interface {
	// run processes until ctx is done, then commits what it finished.
	run(ctx context.Context) error
	counters() Counters
}

// maxPoll bounds the records a baseline takes per poll, as the Java
// client's max.poll.records (500) does: with slow handlers an unbounded
// poll would hold one transaction for many seconds.
const maxPoll = 1000

func newPipeline(job Job, log *slog.Logger) (pipeline, error) {
	w := newWork(job.Latency, job.CPURounds, job.FaultRate, job.Messages)
	switch job.Mode.base() {
	case ModeALO:
		return &aloPipeline{job: job, w: w, log: log, rt: newRequestTimes()}, nil
	case ModeGTS:
		return &gtsPipeline{job: job, w: w, log: log, rt: newRequestTimes()}, nil
	case ModeSession, ModePartition, ModeUnordered:
		return newOnceflow(job, w, log)
	}
	return nil, fmt.Errorf("bench: mode %q cannot run a job", job.Mode)
}

// transform is every mode's output for an input: the same key and value,
// so that verification can read the payload back.
func transform(r *kgo.Record) *kgo.Record {
	return &kgo.Record{Key: r.Key, Value: r.Value}
}
