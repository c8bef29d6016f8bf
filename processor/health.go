package processor

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// Health is a snapshot of a Processor's health, for an orchestrator's
// readiness and liveness probes (HealthHandler). Taking it never waits
// for the loop.
type Health struct {
	// Ready: Run's start checks passed, the instance ID's transactional
	// ID is this process's (claimed, or proven by a commit), the member
	// is in the group, and every assigned partition it has records of is
	// restored (WithStateStore, WithDedupe): the instance does its share.
	Ready bool `json:"ready"`
	// Live: Run makes progress. It is false once Run has returned; while
	// the loop runs, when the loop has not turned within LoopBound, or a
	// record has been its partition's lowest unfinished one for longer
	// than RecordBound (a handler that hangs holds its partition's commit
	// point). A restart helps when it is false; waiting for brokers,
	// claims and rebuilds are bounded by their own timeouts and keep it
	// true.
	Live bool `json:"live"`
	// Reasons say why Ready or Live is false, or what Run is doing.
	Reasons []string `json:"reasons,omitempty"`

	Phase              string            `json:"phase"` // not started, starting, joining, running, rebuilding, stopping, stopped, failed
	AssignedPartitions int               `json:"assigned_partitions"`
	Restoring          int               `json:"restoring_partitions"`
	LastTurn           time.Time         `json:"last_turn,omitzero"`   // the loop's last turn
	LastCommit         time.Time         `json:"last_commit,omitzero"` // the last committed transaction
	Oldest             *UnfinishedRecord `json:"oldest_unfinished,omitempty"`
	LoopBound          time.Duration     `json:"loop_bound"`
	RecordBound        time.Duration     `json:"record_bound"`
}

// UnfinishedRecord is the oldest record whose handler has not finished,
// and how long it has held its partition's commit point.
type UnfinishedRecord struct {
	Topic     string        `json:"topic"`
	Partition int32         `json:"partition"`
	Offset    int64         `json:"offset"`
	Age       time.Duration `json:"age"`
}

// defaultRecordBound is Health.RecordBound without WithStuckTimeout: a
// handler that blocks for longer than this counts as hung.
const defaultRecordBound = 10 * time.Minute

// Health returns the processor's health now.
func (p *Processor) Health() Health {
	h, cfg := p.health, &p.cfg
	now := cfg.clock.Now()
	out := Health{
		Phase:              phaseNames[h.phase.Load()],
		AssignedPartitions: int(h.assigned.Load()),
		Restoring:          int(h.restoring.Load()),
		LastTurn:           unixTime(h.turned.Load()),
		LastCommit:         unixTime(h.committed.Load()),
		// A turn waits at most for a poll (a commit interval), or for an
		// end's flush and commit (a transaction timeout each), or at a
		// rebalance for the drain.
		LoopBound:   2*cfg.txnTimeout + cfg.drainTimeout + 2*cfg.commitInterval,
		RecordBound: defaultRecordBound,
	}
	if cfg.stuckTimeout > 0 {
		out.RecordBound = 2 * cfg.stuckTimeout // the loop dead-letters it at stuckTimeout
	}
	if b := p.hooks.recordBound; b > 0 {
		out.RecordBound = b
	}
	if o := h.oldest.Load(); o != nil {
		out.Oldest = &UnfinishedRecord{Topic: o.topic, Partition: o.partition, Offset: o.offset, Age: now.Sub(o.since)}
	}
	phase := healthPhase(h.phase.Load())
	if r := h.reason.Load(); r != nil && *r != "" {
		out.Reasons = append(out.Reasons, out.Phase+": "+*r)
	}
	out.Live = true
	switch phase {
	case phaseStopped, phaseFailed:
		out.Live = false
		if len(out.Reasons) == 0 {
			out.Reasons = append(out.Reasons, "Run returned")
		}
	case phaseRunning:
		if turned := out.LastTurn; !turned.IsZero() && now.Sub(turned) > out.LoopBound {
			out.Live = false
			out.Reasons = append(out.Reasons, fmt.Sprintf("the loop has not turned for %v (bound %v)", now.Sub(turned).Round(time.Millisecond), out.LoopBound))
		}
		if o := out.Oldest; o != nil && o.Age > out.RecordBound {
			out.Live = false
			out.Reasons = append(out.Reasons, fmt.Sprintf("record %s/%d@%d unfinished for %v (bound %v): its handler hangs", o.Topic, o.Partition, o.Offset, o.Age.Round(time.Millisecond), out.RecordBound))
		}
	}
	out.Ready = phase == phaseRunning && h.joined.Load() && h.claimed.Load() && out.Restoring == 0
	if !out.Ready {
		switch {
		case phase != phaseRunning:
			if len(out.Reasons) == 0 {
				out.Reasons = append(out.Reasons, out.Phase)
			}
		case !h.joined.Load():
			out.Reasons = append(out.Reasons, "not in the group: joining, or rejoining after its partitions were lost (expelled or fenced)")
		case !h.claimed.Load():
			out.Reasons = append(out.Reasons, "the instance ID's transactional ID is not claimed yet")
		default:
			out.Reasons = append(out.Reasons, fmt.Sprintf("%d partitions restoring", out.Restoring))
		}
	}
	return out
}

func unixTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// Probe is what a HealthHandler answers for.
type Probe int

const (
	// ProbeReady passes while Health.Ready: a readiness probe.
	ProbeReady Probe = iota
	// ProbeLive passes while Health.Live: a liveness probe.
	ProbeLive
)

// HealthHandler serves Health as JSON, with status 200 while probe passes
// and 503 while it does not. It never waits for the loop. Mount one per
// probe, for example:
//
//	mux.Handle("/readyz", p.HealthHandler(processor.ProbeReady))
//	mux.Handle("/livez", p.HealthHandler(processor.ProbeLive))
func (p *Processor) HealthHandler(probe Probe) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		h := p.Health()
		pass := h.Ready
		if probe == ProbeLive {
			pass = h.Live
		}
		w.Header().Set("Content-Type", "application/json")
		if !pass {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(h)
	})
}
