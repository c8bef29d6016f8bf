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

// newKeyspaces lists the lifetime's keyspaces, in the order their writes
// go into a transaction.
func newKeyspaces(l *lifetime) []keyspace {
	var out []keyspace
	if l.r.store != nil {
		out = append(out, &stateKeyspace{store: l.r.store, group: l.cfg.group, ids: l.r.changelogIDs,
			restored: &l.p.stats.restored, restoreHook: l.p.hooks.restoreApply})
	}
	if l.r.marks != nil {
		out = append(out, &dedupeKeyspace{store: l.r.marks, cfg: l.cfg, opts: &l.p.dedupeOpts, ids: l.r.changelogIDs,
			restored: &l.p.stats.marksRestored})
	}
	if l.cfg.positionGuard {
		out = append(out, &positionLog{cfg: l.cfg, group: l.group, regressions: &l.p.stats.positionRegressions})
	}
	return out
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
