package bench

import (
	"fmt"
	"strings"

	"github.com/onceflow/onceflow/processor"
)

// Mode names a pipeline implementation.
type Mode string

const (
	// ModeALO is a plain franz-go consumer-group pipe: outputs are flushed,
	// then offsets committed, every commit interval. At-least-once: a crash
	// between the two duplicates outputs. It is the throughput ceiling.
	ModeALO Mode = "alo-raw"
	// ModeGTS is franz-go's kgo.GroupTransactSession loop: records of each
	// poll handled one after another, End(TryCommit) every commit interval.
	ModeGTS Mode = "franz-gts"
	// ModeOnceflow is onceflow's processor with the ordering of
	// Config.Order; results name the resolved mode.
	ModeOnceflow Mode = "onceflow"
	// ModeSession is onceflow with processor.OrderBySession.
	ModeSession Mode = "onceflow-session"
	// ModePartition is onceflow with processor.OrderByPartition.
	ModePartition Mode = "onceflow-partition"
	// ModeUnordered is onceflow with processor.Unordered.
	ModeUnordered Mode = "onceflow-unordered"
	// ModeKafkaStreams is a Kafka Streams application (exactly_once_v2)
	// running the same handler, as subprocess JVMs (jvm.go): the system a
	// team would otherwise pick for exactly-once consume-transform-produce.
	ModeKafkaStreams Mode = "kafka-streams"
	// ModeParallelConsumer is Confluent's Parallel Consumer in its
	// transactional mode with KEY ordering, as subprocess JVMs (jvm.go).
	ModeParallelConsumer Mode = "parallel-consumer"
)

// Suffixes that turn an onceflow mode into a twin, the same pipeline with
// one feature on: ObserveSuffix ("onceflow-session+obs") for Prometheus
// metrics and OpenTelemetry tracing (every record sampled), MetricsSuffix
// or TracingSuffix for one of them, GuardSuffix for
// processor.WithPositionGuard, FixedSuffix for commits on the fixed
// -commit-interval (processor.WithMinCommitInterval equal to it) instead
// of scheduled by load. Listing a mode and its twins in -modes
// measures the cost of the feature side by side in one run.
const (
	ObserveSuffix = "+obs"
	MetricsSuffix = "+metrics"
	TracingSuffix = "+tracing"
	GuardSuffix   = "+guard"
	FixedSuffix   = "+fixed"
	// CoresSuffix is kafka-streams's only twin: as many stream threads
	// per instance as the machine has cores (runtime.NumCPU), instead of
	// one per input partition the instance owns.
	CoresSuffix = "+cores"
)

// suffix is the mode's twin suffix, or "".
func (m Mode) suffix() string {
	for _, s := range []string{ObserveSuffix, MetricsSuffix, TracingSuffix, GuardSuffix, FixedSuffix, CoresSuffix} {
		if strings.HasSuffix(string(m), s) {
			return s
		}
	}
	return ""
}

// base is the mode without its twin suffix.
func (m Mode) base() Mode { return Mode(strings.TrimSuffix(string(m), m.suffix())) }

// observed reports whether the mode is a twin (carries a suffix).
func (m Mode) observed() bool { return m.suffix() != "" }

// metricsOn, tracingOn and guardOn say what a twin turns on.
func (m Mode) metricsOn() bool { s := m.suffix(); return s == ObserveSuffix || s == MetricsSuffix }
func (m Mode) tracingOn() bool { s := m.suffix(); return s == ObserveSuffix || s == TracingSuffix }
func (m Mode) guardOn() bool   { return m.suffix() == GuardSuffix }
func (m Mode) fixedOn() bool   { return m.suffix() == FixedSuffix }

// instruments names what a twin turns on.
func (m Mode) instruments() string {
	switch m.suffix() {
	case MetricsSuffix:
		return "metrics"
	case TracingSuffix:
		return "tracing"
	case GuardSuffix:
		return "the position guard"
	case FixedSuffix:
		return "a fixed commit interval"
	case CoresSuffix:
		return "a stream thread per core"
	}
	return "metrics and tracing"
}

// AllModes lists every mode.
func AllModes() []Mode {
	return []Mode{ModeALO, ModeGTS, ModeOnceflow, ModeSession, ModePartition, ModeUnordered, ModeKafkaStreams, ModeParallelConsumer}
}

// ParseModes parses a comma-separated list of modes.
func ParseModes(s string) ([]Mode, error) {
	var out []Mode
	for _, f := range strings.Split(s, ",") {
		m := Mode(strings.TrimSpace(f))
		if m == "" {
			continue
		}
		known := false
		for _, k := range AllModes() {
			known = known || k == m.base()
		}
		if !known {
			return nil, fmt.Errorf("unknown mode %q (want one of %s)", m, joinModes(AllModes()))
		}
		if m.suffix() == CoresSuffix {
			if m.base() != ModeKafkaStreams {
				return nil, fmt.Errorf("mode %q: only kafka-streams has the twin %s", m, CoresSuffix)
			}
		} else if m.observed() && !m.base().onceflow() {
			return nil, fmt.Errorf("mode %q: only onceflow modes have twins (%s, %s, %s, %s, %s)", m, ObserveSuffix, MetricsSuffix, TracingSuffix, GuardSuffix, FixedSuffix)
		}
		out = append(out, m)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no modes given")
	}
	return out, nil
}

func joinModes(ms []Mode) string {
	ss := make([]string, len(ms))
	for i, m := range ms {
		ss[i] = string(m)
	}
	return strings.Join(ss, ",")
}

// resolve turns ModeOnceflow into the mode of the given ordering, so that
// results always say which ordering ran.
func (m Mode) resolve(o processor.Ordering) Mode {
	if m.base() != ModeOnceflow {
		return m
	}
	r := ModeSession
	switch o {
	case processor.OrderByPartition:
		r = ModePartition
	case processor.Unordered:
		r = ModeUnordered
	}
	return r + Mode(m.suffix())
}

// ExactlyOnce reports whether the mode promises exactly-once output, so
// that a failed verification of it fails the run.
func (m Mode) ExactlyOnce() bool { return m.base() != ModeALO }

// ordered reports whether the mode keeps each session's order, which
// verification then checks.
func (m Mode) ordered() bool { return m.base() != ModeUnordered }

// baseline reports whether the mode is one of franz-go's, which handle
// records serially and which Config.BaselineMessages caps.
func (m Mode) baseline() bool { return m.base() == ModeALO || m.base() == ModeGTS }

// onceflow reports whether the mode runs onceflow's processor, which alone
// has twins, state stores and deduplication.
func (m Mode) onceflow() bool {
	switch m.base() {
	case ModeOnceflow, ModeSession, ModePartition, ModeUnordered:
		return true
	}
	return false
}

// jvm reports whether the mode runs as Java subprocesses (jvm.go).
func (m Mode) jvm() bool { _, ok := m.jvmApp(); return ok }

func (m Mode) ordering() processor.Ordering {
	switch m.base() {
	case ModePartition:
		return processor.OrderByPartition
	case ModeUnordered:
		return processor.Unordered
	}
	return processor.OrderBySession
}

// ParseOrder parses the -order flag: session, partition or none.
func ParseOrder(s string) (processor.Ordering, error) {
	switch s {
	case "session":
		return processor.OrderBySession, nil
	case "partition":
		return processor.OrderByPartition, nil
	case "none", "unordered":
		return processor.Unordered, nil
	}
	return 0, fmt.Errorf("unknown order %q (want session, partition or none)", s)
}

// OrderName is the inverse of ParseOrder.
func OrderName(o processor.Ordering) string {
	switch o {
	case processor.OrderByPartition:
		return "partition"
	case processor.Unordered:
		return "none"
	}
	return "session"
}
