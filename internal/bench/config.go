package bench

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/onceflow/onceflow/internal/verify"
	"github.com/onceflow/onceflow/processor"
)

// Config is one phase of a scenario: an input and the modes run over it.
type Config struct {
	Scenario string // label of the results, e.g. "pc/keys=100"

	Messages   int // input records, IDs 0..Messages-1
	Size       int // value bytes (at least verify.PayloadLen)
	Sessions   int // record i belongs to session i%Sessions
	Partitions int // input and output partitions

	Modes []Mode
	// Count repeats the modes, interleaved (A B A B for modes A,B and
	// Count 2): one run of a fraction of a second is at the mercy of the
	// machine and of where commit intervals fall, so comparisons quote the
	// median of a mode's runs (see Summarize).
	Count int
	// GroupProtocol is every mode's consumer group protocol: "" or
	// "classic", or "consumer" (KIP-848; franz-go's ServerSideBalancer for
	// the baselines).
	GroupProtocol  string
	Order          processor.Ordering // for ModeOnceflow
	CommitInterval time.Duration
	HandlerLatency Latency
	HandlerCPU     time.Duration // CPU work per record: SHA-256 rounds calibrated to it (cpu.go)
	FaultRate      float64       // fraction of records failing their first attempt
	RetryInitial   time.Duration // first retry backoff
	IdleSession    time.Duration // onceflow session eviction; 0: processor default
	// MinCommitInterval is onceflow's processor.WithMinCommitInterval (0:
	// its default); equal to CommitInterval, onceflow commits on a fixed
	// interval as the baselines do.
	MinCommitInterval time.Duration
	// Pipeline is onceflow's processor.WithTransactionPipeline (0: its
	// default).
	Pipeline int
	// MetadataBytes is onceflow's WithMaxCommitMetadataBytes: the
	// broker's offset.metadata.max.bytes (0: the processor's default,
	// 4096, the broker default). kfake enforces no limit.
	MetadataBytes int
	// Stateful gives onceflow modes a state store (processor.WithStateStore)
	// and a handler that keeps a per-session counter in it, checked
	// against each record's position in its session; after the run the
	// changelog is read back and every session's final count verified.
	// The franz-go baselines have no state: they ignore it.
	Stateful bool
	// DupRate is the fraction of events sent twice (same key, payload and
	// event ID header; see dups.go). onceflow modes then run with
	// processor.WithDedupe and must skip every duplicate; franz-gts must
	// pass each through once.
	DupRate float64

	// Rate, when positive, paces the producer at Rate records/s during
	// each mode's run (each mode gets the same records in a fresh input
	// topic, so latency is end to end). Zero produces the input once,
	// before the runs, into one topic that every mode reads.
	Rate float64
	// BaselineMessages, when positive and below Messages, runs the
	// franz-go baselines (whose handlers run serially) on the first
	// BaselineMessages inputs only.
	BaselineMessages int
	Timeout          time.Duration // per mode; reaching it fails the run
	// Stall, when positive, fails a run early once no further input has
	// been accounted for this long: a stuck pipeline need not wait for
	// the timeout.
	Stall time.Duration

	// Workers, when positive, runs each pipeline as that many subprocess
	// instances (the binary re-executed in worker mode).
	Workers int
	// KillEvery, when positive, SIGKILLs one worker this often while input
	// is being produced, and restarts it under the same instance ID.
	KillEvery time.Duration

	// DropTopics deletes each run's topics once it is verified, and the
	// phase's backlog once the phase is done, on real brokers too (which
	// otherwise keep them until the invocation ends): the scale sweep
	// would otherwise hold every point's partitions at once.
	DropTopics bool
	// Bounded makes a run that does not finish within -timeout or -stall
	// (or does not start within its start-up bound) a DNF, reported with
	// how far it got, rather than a FAIL, when what it did output
	// verified (no duplicates, no order violations): the scale sweep
	// reports a peer that cannot keep up instead of failing.
	Bounded bool

	// Anchors are published figures shown beside a mode's result.
	Anchors map[Mode]Anchor
}

// Anchor is a published figure to compare a result with.
type Anchor struct {
	Source      string  `json:"source"`
	Throughput  float64 `json:"throughput,omitempty"`
	LatencyP50  float64 `json:"latency_p50_ms,omitempty"`
	Seconds     float64 `json:"seconds,omitempty"`
	Description string  `json:"description,omitempty"`
}

// Validate reports the first inconsistent setting.
func (c *Config) Validate() error {
	switch {
	case c.Messages <= 0 || c.Sessions <= 0 || c.Partitions <= 0:
		return errors.New("-messages, -sessions and -partitions must be positive")
	case c.Size < verify.PayloadLen:
		return fmt.Errorf("-size must be at least %d bytes (the verification payload)", verify.PayloadLen)
	case len(c.Modes) == 0:
		return errors.New("-modes: at least one mode is required")
	case c.Count <= 0:
		return errors.New("-count must be positive")
	case c.CommitInterval <= 0 || c.CommitInterval >= 10*time.Second:
		return errors.New("-commit-interval must be positive and under the 10s transaction timeout")
	case c.FaultRate < 0 || c.FaultRate >= 1:
		return errors.New("-fault-rate must be in [0, 1)")
	case c.DupRate < 0 || c.DupRate > 1:
		return errors.New("-dup-rate must be in [0, 1]")
	case c.RetryInitial <= 0:
		return errors.New("-retry-initial must be positive")
	case c.Timeout <= 0:
		return errors.New("-timeout must be positive")
	case c.Rate < 0 || c.Stall < 0 || c.BaselineMessages < 0 || c.Workers < 0 || c.KillEvery < 0 || c.IdleSession < 0 || c.MinCommitInterval < 0 || c.MinCommitInterval > c.CommitInterval || c.Pipeline < 0 || c.MetadataBytes < 0 || c.HandlerCPU < 0:
		return errors.New("-rate, -stall, -baseline-messages, -workers, -kill-every, -idle-session, -commit-metadata-bytes and -handler-cpu must not be negative")
	case c.GroupProtocol != "" && c.GroupProtocol != "classic" && c.GroupProtocol != "consumer":
		return errors.New("-group-protocol must be classic or consumer")
	case c.KillEvery > 0 && c.Workers == 0:
		return errors.New("-kill-every needs -workers")
	case c.Workers > c.Partitions:
		return fmt.Errorf("-workers %d is more instances than -partitions %d: the extra instances would own nothing", c.Workers, c.Partitions)
	}
	return nil
}

// baselineCap is the baselines' input count when capped, else 0.
func (c *Config) baselineCap() int {
	if c.BaselineMessages > 0 && c.BaselineMessages < c.Messages {
		return c.BaselineMessages
	}
	return 0
}

// Latency is the simulated handler time: Min, or uniformly random in
// [Min, Max) when Max > Min. It implements flag.Value ("1ms", "0-5ms").
type Latency struct {
	Min time.Duration `json:"min"`
	Max time.Duration `json:"max,omitempty"`
}

// String implements flag.Value.
func (l *Latency) String() string {
	if l.Max > l.Min {
		return l.Min.String() + "-" + l.Max.String()
	}
	return l.Min.String()
}

// Set implements flag.Value.
func (l *Latency) Set(s string) error {
	lo, hi, isRange := strings.Cut(s, "-")
	if !isRange {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return fmt.Errorf("want a duration such as 1ms, or a range such as 0-5ms")
		}
		*l = Latency{Min: d}
		return nil
	}
	// "0-5ms": a bare lower bound takes the upper bound's unit.
	if strings.TrimLeft(lo, "0123456789.") == "" {
		lo += strings.TrimLeft(hi, "0123456789.")
	}
	dlo, err1 := time.ParseDuration(lo)
	dhi, err2 := time.ParseDuration(hi)
	if err1 != nil || err2 != nil || dlo < 0 || dhi < dlo {
		return fmt.Errorf("want a range such as 0-5ms (low <= high)")
	}
	*l = Latency{Min: dlo, Max: dhi}
	return nil
}

// draw returns one handler's sleep.
func (l Latency) draw() time.Duration {
	if l.Max > l.Min {
		return l.Min + rand.N(l.Max-l.Min)
	}
	return l.Min
}
