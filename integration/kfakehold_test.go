package integration

import (
	"context"
	"time"
)

// rebalanceHold works around kfake's classic group coordinator in the soak
// (finding 5, docs/reliability.md; groupcoord_test.go pins it): kfake
// restarts a rebalance's deadline on every join and never expires a new
// member that died before its first JoinGroup answer, so under the soak's
// churn (a join every few seconds) a rebalance that waits for a dead member
// never ends. Apache Kafka ends it at the rebalance timeout. On kfake the
// soak therefore pauses injecting faults once the group has been
// rebalancing for longer than the rebalance timeout, until it is stable
// again: the pause gives kfake the quiet rebalance timeout it needs. The
// fault families, their mix and their pace outside pauses are unchanged,
// and the real-broker soak never pauses.
type rebalanceHold struct {
	since time.Time // first seen rebalancing, zero while stable
	holds int
	held  time.Duration
}

// groupPhase is the group's state as DescribeGroups reports it ("" on error).
func (e *env) groupPhase() string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	gs, err := e.c.Admin.DescribeGroups(ctx, e.group)
	if err != nil {
		return ""
	}
	return gs[e.group].State
}

func settled(state string) bool { return state == "Stable" || state == "Empty" || state == "" }

// check is called before each soak fault step. It returns at once unless
// the group has been rebalancing for over the rebalance timeout; then it
// waits (up to bound) until the group is stable.
func (h *rebalanceHold) check(e *env, bound time.Duration) {
	state := e.groupPhase()
	if settled(state) {
		h.since = time.Time{}
		return
	}
	if h.since.IsZero() {
		h.since = time.Now()
		return
	}
	if time.Since(h.since) < e.cfg.worker.rebalanceTimeout {
		return
	}
	start := time.Now()
	h.holds++
	e.fleet.eventf("kfake hold: group %s for %v, faults paused until stable", state, time.Since(h.since).Round(time.Second))
	for time.Since(start) < bound && !settled(state) {
		if !e.sleep(250 * time.Millisecond) {
			break
		}
		state = e.groupPhase()
	}
	d := time.Since(start)
	h.held += d
	h.since = time.Time{}
	e.fleet.eventf("kfake hold over after %v: group %s", d.Round(100*time.Millisecond), state)
}
