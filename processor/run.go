package processor

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/dedupe"
	"github.com/onceflow/onceflow/statestore"
	"github.com/onceflow/onceflow/txn"
)

// run is the state of one Run call that outlives its transactional
// clients (lifetimes): the workers and their completion queue, the local
// stores and the changelogs' topic IDs.
type run struct {
	p     *Processor
	cfg   *config
	d     *dispatcher
	comps *completionQueue
	gen   atomic.Uint64 // source of partition generations
	// members are the group member IDs this Run's clients held the
	// instance ID under: recorded as partitions are assigned and when a
	// client that joined closes; see txn.Session.CheckReplaced.
	members memberIDs
	// waitedFor is the member holding the instance ID that this Run, never
	// a holder, waits for (the loop's; see txn.Session.CheckReplaced).
	waitedFor txn.HolderWait

	store        *statestore.Store   // nil without WithStateStore
	marks        *dedupe.Store       // nil without WithDedupe
	changelogIDs map[string][16]byte // changelog topic IDs, for checkpoints
}

func newRun(p *Processor) *run {
	r := &run{p: p, cfg: &p.cfg, comps: newCompletionQueue()}
	r.d = newDispatcher(&p.cfg, 4*runtime.GOMAXPROCS(0), r.comps.push, &p.stats.activeSessions, &p.stats.retries, p.tracer)
	return r
}

// open creates missing changelog topics and opens the local stores; close
// closes them and stops the workers.
func (r *run) open(ctx context.Context) error {
	ids, err := ensureChangelogs(ctx, r.cfg)
	if err != nil {
		return err
	}
	r.changelogIDs = ids
	if r.cfg.stateDir != "" {
		if r.store, err = statestore.Open(r.cfg.stateDir, r.cfg.stateOpts); err != nil {
			return err
		}
	}
	if r.cfg.dedupeSet {
		if r.marks, err = dedupe.Open(r.cfg.dedupeDir, storeOptions(r.p.dedupeOpts)); err != nil {
			return fmt.Errorf("processor: opening the dedupe store: %w", err)
		}
	}
	return nil
}

func (r *run) close() {
	r.d.stop()
	if r.store != nil {
		r.store.Close()
	}
	if r.marks != nil {
		r.marks.Close()
	}
}

// yieldToSuccessor runs before a rebuild: under the consumer protocol a
// process whose member expired waits for a newer process to take the
// instance ID (see txn.YieldToSuccessor); an error matching ErrFenced if
// one does.
func (r *run) yieldToSuccessor(ctx context.Context) error {
	if e := txn.YieldToSuccessor(ctx, r.yieldConfig(), r.members.list(), txn.SuccessorGrace, r.cfg.clock.After); e != nil {
		return e
	}
	return nil
}

// yieldOnLost is yieldToSuccessor on a running client whose member was
// expelled, before franz-go rejoins (see groupEvents.onLost). It ends
// with Run's ctx or the client (cbCtx), whichever ends first: the loop's
// polls wait for it.
func (r *run) yieldOnLost(ctx, cbCtx context.Context, cl *kgo.Client) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(cbCtx, cancel)()
	// A member that joined (epoch > 0) since its last assignment, which
	// records member IDs, is this process's, not another's.
	if member, epoch := cl.GroupMetadata(); epoch > 0 {
		r.members.add(member)
	}
	if e := txn.YieldOnLost(ctx, cl, r.yieldConfig(), r.members.list(), txn.SuccessorGrace, r.cfg.clock.After); e != nil {
		return e
	}
	return nil
}

func (r *run) yieldConfig() txn.Config {
	return txn.Config{
		Brokers: r.cfg.brokers, Group: r.cfg.group, InstanceID: r.cfg.instanceID,
		GroupProtocol: r.cfg.groupProtocol, ClientOpts: r.cfg.clientOpts(),
	}
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
