package integration

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/onceflow/onceflow/internal/kafkatest"
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
	state, _, err := e.c.DescribeGroup(ctx, e.group)
	if err != nil {
		return ""
	}
	return state
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

// reapDead works around the other half of finding 5 on kfake only: a
// worker that died before its first JoinGroup answer reached it (SIGKILLed
// moments after starting) never expires there, and once the group is
// stable it keeps its partitions forever (TestKillRestart hung so: input 5
// assigned to a retired instance, SIGKILLed 1.3 s after it started). Kafka
// expires such a member after the session timeout
// (TestCoordinatorExpiresUnreachableJoiner). The harness does the same on
// kfake: a static member whose instance has had no running process for
// twice the session timeout is removed with LeaveGroup, as Kafka's session
// expiry would have. The count goes to the timeline.
func (e *env) reapDead() {
	if kafkatest.Real() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	gs, err := e.c.Admin.DescribeGroups(ctx, e.group)
	if err != nil {
		return
	}
	var dead []string
	for _, m := range gs[e.group].Members {
		if m.InstanceID == nil {
			continue
		}
		if d, ok := e.fleet.deadFor(*m.InstanceID); ok && d > 2*e.cfg.worker.sessionTimeout {
			dead = append(dead, *m.InstanceID)
		}
	}
	if len(dead) == 0 {
		return
	}
	_, err = e.c.Admin.LeaveGroup(ctx, kadm.LeaveGroup(e.group).InstanceIDs(dead...).Reason("kfake: dead member never expired (finding 5)"))
	e.fleet.eventf("kfake: removed members of dead instances %v, which kfake never expired (err %v)", dead, err)
}

// kgoRequestOverhead is franz-go's default RequestTimeoutOverhead, which the
// workers keep: a JoinGroup is given up after the rebalance timeout plus this.
const kgoRequestOverhead = 10 * time.Second

// membershipGrace is how long after every input was accounted for a running
// worker may still be out of the group. On Kafka: a session timeout to
// notice an expulsion, then a join, plus margin. On kfake also one unanswered
// JoinGroup: kfake drops a member that waits in JoinGroup past its session
// timeout without answering it (finding 5, TestCoordinatorKeepsWaitingJoiner),
// so the worker learns only when franz-go gives the request up, and its
// Close (a rebuild after an expulsion closes the client) waits for that too.
// CI saw it once in TestStatefulFaults on kfake: a worker was out of the
// group (members [w2 w6]) 10 s after every input was accounted for, its
// goroutine dump showing Close waiting for a JoinGroup with a 20 s deadline.
func (e *env) membershipGrace() time.Duration {
	grace := e.cfg.worker.sessionTimeout + 7*time.Second
	if !kafkatest.Real() {
		grace += e.cfg.worker.rebalanceTimeout + kgoRequestOverhead
	}
	return grace
}
