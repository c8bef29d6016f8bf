package integration

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/verify"
)

// headerStateCount is the worker's HeaderStateCount (package main cannot be
// imported): in stateful mode, the session's record count in the state
// store before this record.
const headerStateCount = "onceflow-test-state-count"

// checkState judges stateful runs: each session's outputs, in their
// committed order, must carry the counts 0, 1, 2, ...: the state a record
// saw is exactly what the committed outputs before it wrote, whatever
// crashed, was fenced or moved in between (state lost, replayed twice or
// ahead of the outputs all break the sequence). Dead letters do not count.
func (e *env) checkState(outs []*kgo.Record) []string {
	if !e.cfg.worker.stateful {
		return nil
	}
	var bad []string
	next := make(map[string]uint64)
	for _, r := range outs {
		p, err := verify.Decode(r.Value)
		if err != nil {
			continue // counted as malformed
		}
		s := string(r.Key)
		got := header(r, headerStateCount)
		if want := strconv.FormatUint(next[s], 10); got != want {
			bad = append(bad, fmt.Sprintf("%s state count %q, want %s", e.describe(r, p), got, want))
		}
		next[s]++
	}
	return bad
}

// TestStatefulFaults: the stateful worker (a per-session count in the state
// store, restored from its changelog; every process starts with an empty
// directory) under SIGKILLs with restarts and zombies, every 7th input
// poison. Besides exactly-once and order, each output's count must equal
// the number of its session's committed outputs before it.
func TestStatefulFaults(t *testing.T) {
	cfg := defaultConfig()
	cfg.worker.stateful = true
	cfg.worker.poisonEvery = 7
	e := newEnv(t, cfg)
	e.sleep(warmUp)
	stopFor := cfg.worker.sessionTimeout + 1500*time.Millisecond
	i := 0
	e.faults(faultTime, time.Second, 2500*time.Millisecond, func() {
		i++
		if i%3 != 0 || !e.zombieStep(stopFor, i%2 == 0) {
			e.killStep(0.7)
		}
	})
	e.waitFaults()
	o := e.finish()
	if o.counts.Kills == 0 || o.counts.Stops == 0 {
		t.Errorf("faults not injected: %d kills, %d stops", o.counts.Kills, o.counts.Stops)
	}
}
