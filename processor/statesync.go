package processor

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/changelog"
	"github.com/onceflow/onceflow/statestore"
)

// produceWrites sends a record's state writes to its partition's changelog
// in the open transaction and queues them for the store.
func (l *lifetime) produceWrites(p *partition, ws []stateWrite) {
	for _, w := range ws {
		var v []byte // nil: a tombstone, compaction drops the key
		if !w.Delete {
			v = w.Value
		}
		l.txn.produceChangelog(p.state.changelog, p.id, w.Key, v)
	}
	p.state.txn = append(p.state.txn, ws...)
}

// applyState applies a committed transaction's writes to the store in one
// batch, with each partition's changelog checkpoint. A crash before this
// leaves the store behind, never ahead; restore catches it up.
func (l *lifetime) applyState() error {
	if l.r.store == nil {
		return nil
	}
	b := l.r.store.NewBatch()
	touched, err := l.committedParts(stateSuffix, func(p *partition) bool { return len(p.state.txn) > 0 },
		func(p *partition, topicID [16]byte, next int64) {
			for _, w := range p.state.txn {
				b.Write(p.state.p, w.Write)
			}
			b.SetCheckpoint(p.state.p, statestore.Checkpoint{TopicID: topicID, Next: next})
		})
	if err != nil || len(touched) == 0 {
		return err
	}
	if err := b.Commit(); err != nil {
		return fmt.Errorf("processor: applying committed state: %w", err)
	}
	for _, p := range touched {
		p.state.applied(p.state.txn)
		p.state.txn = p.state.txn[:0]
	}
	return nil
}

// pendingStateWrites counts the writes applyState is about to apply.
func (l *lifetime) pendingStateWrites() int {
	n := 0
	for _, p := range l.parts {
		if p.state != nil {
			n += len(p.state.txn)
		}
	}
	return n
}

// markStuck flags a stuck record so that its late writes, if its handler
// ever returns, are never published.
func markStuck(it *item) {
	if ps := it.part.state; ps != nil {
		ps.mu.Lock()
		defer ps.mu.Unlock()
	}
	it.stuck.Store(true)
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
