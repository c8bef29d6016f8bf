package processor

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/txncore"
)

// yieldToSuccessor runs before a rebuild: under the consumer protocol a
// process whose member expired waits for a newer process to take the
// instance ID (see txncore.YieldToSuccessor); an error matching ErrFenced if
// one does. When the lifetime ended while its lost member's yield was
// still waiting, the rebuild gives only what is left of that grace.
func (r *run) yieldToSuccessor(ctx context.Context) error {
	grace := r.lost.left(r.cfg.clock.Now(), txncore.SuccessorGrace)
	if e := txncore.YieldToSuccessor(ctx, r.yieldOptions(), r.members.list(), grace, r.cfg.clock.After); e != nil {
		return e
	}
	return nil
}

// yieldOnLost is yieldToSuccessor on a running client whose member was
// expelled, before franz-go rejoins (see groupEvents.onLost). It ends
// with the lifetime (lifeCtx: the loop's polls wait for it, and the
// client's Close for the callback) or the client (cbCtx), whichever ends
// first.
func (r *run) yieldOnLost(lifeCtx, cbCtx context.Context, cl *kgo.Client) error {
	ctx, cancel := context.WithCancel(lifeCtx)
	defer cancel()
	defer context.AfterFunc(cbCtx, cancel)()
	// A member that joined (epoch > 0) since its last assignment, which
	// records member IDs, is this process's, not another's.
	if member, epoch := cl.GroupMetadata(); epoch > 0 {
		r.members.add(member)
	}
	r.lost.begin(r.cfg.clock.Now())
	e := txncore.YieldOnLost(ctx, cl, r.yieldOptions(), r.members.list(), txncore.SuccessorGrace, r.cfg.clock.After)
	if ctx.Err() == nil {
		// Over by itself: franz-go rejoins now, and the member that
		// joins holds the ID, so a later rebuild owes a whole grace.
		r.lost.end()
	}
	if e != nil {
		return e
	}
	return nil
}

func (r *run) yieldOptions() txncore.Options {
	return txncore.Options{
		Brokers: r.cfg.brokers, Group: r.cfg.group, InstanceID: r.cfg.instanceID,
		GroupProtocol: r.cfg.groupProtocol, ClientOpts: r.cfg.clientOpts(),
	}
}

// lostGrace is the grace that a lost member's yield (yieldOnLost) began
// and its lifetime cut short. The instance ID has been free, or a newer
// process's, all along: the rebuild that follows owes a newer process
// only the rest of that grace, and a second whole one would keep a woken
// process that nobody replaced out of its group for two.
type lostGrace struct {
	mu    sync.Mutex
	began time.Time // zero: no yield cut short
}

func (g *lostGrace) begin(now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.began = now
}

// begun reports whether a yield's grace is under way or was cut short.
func (g *lostGrace) begun() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return !g.began.IsZero()
}

func (g *lostGrace) end() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.began = time.Time{}
}

// left is the grace a rebuild at now gives: all of grace, or the rest of
// the one a lost member's yield began. It ends that one.
func (g *lostGrace) left(now time.Time, grace time.Duration) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.began.IsZero() {
		return grace
	}
	rest := grace - now.Sub(g.began)
	g.began = time.Time{}
	return max(rest, 0)
}

// memberIDs is a set of group member IDs, safe for the client's callbacks.
type memberIDs struct {
	mu  sync.Mutex
	ids []string
}

func (m *memberIDs) add(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if id != "" && !slices.Contains(m.ids, id) {
		m.ids = append(m.ids, id)
	}
}

func (m *memberIDs) list() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.ids)
}
