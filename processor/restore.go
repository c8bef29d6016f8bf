package processor

import (
	"context"
	"sync"

	"github.com/onceflow/onceflow/internal/changelog"
)

// restoreGate holds a partition's records back while any of its
// keyspaces is restoring. Rewinds carry it over to the partition's new
// state, so a rewind during a restore does not let records through early.
type restoreGate struct{ pending int }

func (g *restoreGate) open() bool { return g == nil || g.pending == 0 }

// restoreRun is one restore of one changelog partition into its store. A
// partition revoked while restoring cancels its runs; if it comes back, a
// new run waits for the old one to stop, so that two restores never write
// one keyspace.
type restoreRun struct {
	input  tp // the input partition
	cancel context.CancelFunc
	done   chan struct{}
}

type restoreResult struct {
	p    *partition
	gate *restoreGate
	run  *restoreRun
	key  tp // the changelog partition
	spec restoreSpec
	st   changelog.Stats
	err  error
}

// restores runs a lifetime's restores, one goroutine each, and reports
// them on results.
type restores struct {
	cfg     *config
	ctx     context.Context // canceled when the lifetime ends
	stop    context.CancelFunc
	wg      sync.WaitGroup
	results chan restoreResult
	runs    map[tp]*restoreRun // the latest restore of each changelog partition
}

func newRestores(ctx context.Context, cfg *config) *restores {
	rs := &restores{cfg: cfg, results: make(chan restoreResult, 64), runs: make(map[tp]*restoreRun)}
	rs.ctx, rs.stop = context.WithCancel(ctx)
	return rs
}

// close cancels the restores and waits for them.
func (rs *restores) close() {
	rs.stop()
	rs.wg.Wait()
}

// start brings one keyspace of a newly assigned partition up to its
// changelog's committed end in the background; the partition's records
// wait until all its restores are done.
func (rs *restores) start(p *partition, spec restoreSpec) {
	if p.restore == nil {
		p.restore = &restoreGate{}
	}
	gate := p.restore
	gate.pending++
	k := tp{spec.topic, p.id}
	prev := rs.runs[k]
	ctx, cancel := context.WithCancel(rs.ctx)
	run := &restoreRun{input: tp{p.topic, p.id}, cancel: cancel, done: make(chan struct{})}
	rs.runs[k] = run
	rs.wg.Add(1)
	go func() {
		defer rs.wg.Done()
		var st changelog.Stats
		err := ctx.Err()
		if prev != nil {
			prev.cancel()
			<-prev.done
		}
		if err == nil {
			st, err = changelog.Restore(ctx, rs.cfg.brokers, rs.cfg.clientOpts(), spec.topic, p.id, spec.target, rs.cfg.logger)
		}
		cancel()
		close(run.done)
		select {
		case rs.results <- restoreResult{p, gate, run, k, spec, st, err}:
		case <-rs.ctx.Done():
		}
	}()
}

// cancel cancels the restores of a revoked input partition.
func (rs *restores) cancel(k tp) {
	for _, run := range rs.runs {
		if run.input == k {
			run.cancel()
		}
	}
}

// finished forgets a reported run, unless a newer one replaced it.
func (rs *restores) finished(r restoreResult) {
	if rs.runs[r.key] == r.run {
		delete(rs.runs, r.key)
	}
}
