package processor

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"

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
	// lost is the grace a lost member's yield began, for the rebuild
	// that may follow it (yield.go).
	lost lostGrace
	// waitedFor is the member holding the instance ID that this Run, never
	// a holder, waits for (the loop's; see txn.Session.CheckReplaced).
	waitedFor txn.HolderWait

	// counted is, per input partition, the offset after the last record
	// counted in Stats.Consumed: the loop's, across its lifetimes.
	counted map[tp]int64

	store        *statestore.Store   // nil without WithStateStore
	marks        *dedupe.Store       // nil without WithDedupe
	changelogIDs map[string][16]byte // changelog topic IDs, for checkpoints
}

func newRun(p *Processor) *run {
	r := &run{p: p, cfg: &p.cfg, comps: newCompletionQueue(), counted: make(map[tp]int64)}
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
