package processor

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/changelog"
)

// A keyspace is local data that a changelog topic mirrors, one changelog
// partition per input partition: session state (WithStateStore, state.go),
// dedupe marks (WithDedupe, dedupe.go) and the
// position log (WithPositionGuard, positions.go). All take the same path,
// which is why the loop treats them alike:
//
//   - assignment: a newly assigned partition's records wait until each
//     keyspace of it is restored from its changelog (keyspacePart.restore;
//     the position log restores through the client, clientOpts);
//   - a record finishes: what it contributes goes to its partition's
//     changelog inside the open transaction (keyspacePart.produce), as do
//     the positions a commit plans (planned);
//   - commit: only once the transaction committed is it applied locally,
//     with the changelog offset it reached as a checkpoint (apply), so a
//     crash leaves the local store behind the changelog, never ahead;
//   - abort: the rewind replaces each part by one without the
//     transaction's writes (keyspacePart.rewound);
//   - revoke: the partition and its parts are dropped, and restores of it
//     canceled.
//
// The lifetime holds its keyspaces as a list and each partition its parts
// of them: a job without keyspaces iterates empty lists, so its
// per-record path costs what it did before keyspaces existed.
type keyspace interface {
	// part is the keyspace's part of a newly assigned partition, or nil
	// if the keyspace keeps nothing per partition.
	part(p *partition) keyspacePart
	// clientOpts are options the keyspace adds to the transactional
	// client.
	clientOpts() []kgo.Opt
	// planned produces what a commit of plans adds to the open
	// transaction; it runs before the flush that must cover it.
	planned(t *transaction, parts map[tp]*partition, plans map[tp]commitPlan)
	// apply applies a committed transaction's writes of every partition
	// to the local store, in one batch.
	apply(t *transaction, parts map[tp]*partition) error
}

// keyspacePart is a keyspace's part of one partition. The loop owns it,
// unless its type says otherwise.
type keyspacePart interface {
	// restore is the restore that brings a newly assigned partition's
	// part up to its changelog; false: none.
	restore() (restoreSpec, bool)
	// screen decides, in offset order, about records about to be
	// dispatched; it may finish some without their handler (it.dup, or
	// it.dlq set).
	screen(its []*item) error
	// produce adds what a finished record contributes to the open
	// transaction. stuck: the loop dead-lettered it while its handler may
	// still run, so only the loop-owned fields of it may be read.
	produce(t *transaction, it *item, stuck bool)
	// rewound is the part of the partition that replaces this one on a
	// rewind: the aborted transaction's writes are gone.
	rewound() keyspacePart
}

// restoreSpec is one restore of one partition's keyspace.
type restoreSpec struct {
	kind   string // "state" or "dedupe", for logs and errors
	topic  string // the changelog topic
	target changelog.Target
	stat   *atomic.Int64 // counts the records restored
}

// keyspaceOpts are the client options the keyspaces add.
func keyspaceOpts(kss []keyspace) []kgo.Opt {
	var opts []kgo.Opt
	for _, ks := range kss {
		opts = append(opts, ks.clientOpts()...)
	}
	return opts
}

// partOf returns p's part of the keyspace whose parts are of type T, or
// the zero T. A partition has a part or two: a walk is as quick as a map.
func partOf[T keyspacePart](p *partition) T {
	for _, k := range p.keyspaces {
		if t, ok := k.(T); ok {
			return t
		}
	}
	var zero T
	return zero
}

// committedCheckpoint is the checkpoint a committed transaction's writes
// to a changelog partition reach: the topic's ID and the offset after
// them.
func committedCheckpoint(t *transaction, ids map[string][16]byte, topic string, partition int32) ([16]byte, int64, error) {
	next, ok := t.changelogNext(tp{topic, partition})
	if !ok {
		return [16]byte{}, 0, fmt.Errorf("processor: committed writes to %s/%d have no changelog offsets", topic, partition)
	}
	return ids[topic], next, nil
}

// stagedPart is a keyspace part whose writes in a transaction go to its
// keyspace's local store once the transaction committed (applyCommitted).
type stagedPart[B any] interface {
	keyspacePart
	// stage adds the part's writes in the committed transaction t, with
	// its changelog checkpoint, to b; false if it has none.
	stage(b B, t *transaction, ids map[string][16]byte) (bool, error)
	// committed drops the staged writes, now in the store.
	committed()
}

// applyCommitted is a keyspace's apply: it stages every partition's part of
// type T into b, writes b once (write), and only then tells the parts. A
// crash before write leaves the store behind, never ahead; the keyspace's
// restore catches it up.
func applyCommitted[T interface {
	comparable
	stagedPart[B]
}, B any](t *transaction, ids map[string][16]byte, parts map[tp]*partition, b B, write func(B) error) error {
	var none T
	var touched []T
	for _, p := range parts {
		part := partOf[T](p)
		if part == none {
			continue
		}
		ok, err := part.stage(b, t, ids)
		if err != nil {
			return err
		}
		if ok {
			touched = append(touched, part)
		}
	}
	if len(touched) == 0 {
		return nil
	}
	if err := write(b); err != nil {
		return err
	}
	for _, part := range touched {
		part.committed()
	}
	return nil
}

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
