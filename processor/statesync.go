package processor

import (
	"fmt"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/changelog"
	"github.com/onceflow/onceflow/statestore"
)

// stateKeyspace is session state as a keyspace (see keyspace): the state
// store, mirrored to one changelog per input topic. Its parts are
// partStates (state.go).
type stateKeyspace struct {
	store       *statestore.Store
	group       string
	ids         map[string][16]byte // changelog topic IDs, for checkpoints
	restored    *atomic.Int64       // Stats.StateRestored
	restoreHook func(partition int32, records int) error
}

func (k *stateKeyspace) part(p *partition) keyspacePart { return k.newPart(p.topic, p.id) }

func (k *stateKeyspace) newPart(topic string, id int32) *partState {
	return &partState{ks: k, store: k.store, p: statestore.Partition{Topic: topic, Partition: id},
		changelog: changelogTopic(k.group, topic), over: make(map[string]stateWrite)}
}

func (k *stateKeyspace) clientOpts() []kgo.Opt { return nil }

func (k *stateKeyspace) planned(*transaction, map[tp]*partition, map[tp]commitPlan) {}

// apply applies a committed transaction's writes to the store in one
// batch, with each partition's changelog checkpoint (applyCommitted).
func (k *stateKeyspace) apply(t *transaction, parts map[tp]*partition) error {
	return applyCommitted[*partState](t, k.ids, parts, k.store.NewBatch(), func(b *statestore.Batch) error {
		if err := b.Commit(); err != nil {
			return fmt.Errorf("processor: applying committed state: %w", err)
		}
		return nil
	})
}

// pendingStateWrites counts the writes the state keyspace is about to
// apply (for the afterEndTxn test hook).
func pendingStateWrites(parts map[tp]*partition) int {
	n := 0
	for _, p := range parts {
		if ps := partOf[*partState](p); ps != nil {
			n += len(ps.txn)
		}
	}
	return n
}

// restoreTarget is one partition of the store as a changelog target.
type restoreTarget struct {
	s *statestore.Store
	p statestore.Partition
}

func (t restoreTarget) Checkpoint() ([16]byte, int64, bool, error) {
	c, ok, err := t.s.Checkpoint(t.p)
	return c.TopicID, c.Next, ok, err
}

func (t restoreTarget) Reset() error {
	b := t.s.NewBatch()
	b.Reset(t.p)
	return b.Commit()
}

func (t restoreTarget) Apply(recs []*kgo.Record, topicID [16]byte, next int64) error {
	b := t.s.NewBatch()
	for _, r := range recs {
		b.Write(t.p, statestore.Write{Key: r.Key, Value: r.Value, Delete: r.Value == nil})
	}
	b.SetCheckpoint(t.p, statestore.Checkpoint{TopicID: topicID, Next: next})
	return b.Commit()
}

// hookedTarget calls a test hook after each applied batch.
type hookedTarget struct {
	changelog.Target
	after func(records int) error
}

func (t hookedTarget) Apply(recs []*kgo.Record, topicID [16]byte, next int64) error {
	if err := t.Target.Apply(recs, topicID, next); err != nil {
		return err
	}
	return t.after(len(recs))
}
