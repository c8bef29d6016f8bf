package processor

import (
	"fmt"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/changelog"
)

// A keyspace is local data that a changelog topic mirrors, one changelog
// partition per input partition: session state (WithStateStore, state.go
// and statesync.go), dedupe marks (WithDedupe, dedupesync.go) and the
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

// newKeyspaces lists a lifetime's keyspaces, in the order their writes go
// into a transaction.
func newKeyspaces(r *run, group *groupEvents) []keyspace {
	p, cfg := r.p, r.cfg
	var out []keyspace
	if r.store != nil {
		out = append(out, &stateKeyspace{store: r.store, group: cfg.group, ids: r.changelogIDs,
			restored: &p.stats.restored, restoreHook: p.hooks.restoreApply})
	}
	if r.marks != nil {
		out = append(out, &dedupeKeyspace{store: r.marks, cfg: cfg, opts: &p.dedupeOpts, ids: r.changelogIDs,
			restored: &p.stats.marksRestored})
	}
	if cfg.positionGuard {
		out = append(out, &positionLog{cfg: cfg, group: group, regressions: &p.stats.positionRegressions})
	}
	return out
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
