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
	topic := changelogTopic(l.cfg.group, p.topic)
	for _, w := range ws {
		r := &kgo.Record{Topic: topic, Partition: p.id, Key: w.Key, Value: w.Value}
		if w.Delete {
			r.Value = nil // a tombstone: compaction drops the key
		}
		l.s.Produce(l.produceCtx, r, l.changelogPromise)
	}
	p.state.txn = append(p.state.txn, ws...)
}

func (l *lifetime) changelogPromise(r *kgo.Record, err error) {
	if err != nil {
		l.promise(r, err)
		return
	}
	l.mu.Lock()
	k := tp{r.Topic, r.Partition}
	l.clNext[k] = max(l.clNext[k], r.Offset+1)
	l.mu.Unlock()
}

// applyState applies a committed transaction's writes to the store in one
// batch, with each partition's changelog checkpoint. A crash before this
// leaves the store behind, never ahead; restore catches it up.
func (l *lifetime) applyState() error {
	if l.p.store == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.p.store.NewBatch()
	var touched []*partition
	for _, p := range l.parts {
		ps := p.state
		if len(ps.txn) == 0 {
			continue
		}
		topic := changelogTopic(l.cfg.group, p.topic)
		next, ok := l.clNext[tp{topic, p.id}]
		if !ok {
			return fmt.Errorf("processor: committed state writes of %s/%d have no changelog offsets", p.topic, p.id)
		}
		for _, w := range ps.txn {
			b.Write(ps.p, w.Write)
		}
		b.SetCheckpoint(ps.p, statestore.Checkpoint{TopicID: l.p.changelogIDs[topic], Next: next})
		touched = append(touched, p)
	}
	clear(l.clNext)
	if len(touched) == 0 {
		return nil
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

type restoreResult struct {
	p   *partition
	st  changelog.Stats
	err error
}

// restore brings a newly assigned partition's store up to its changelog's
// committed end in the background; its records wait until then.
func (l *lifetime) restore(p *partition) {
	p.state.restoring = true
	topic := changelogTopic(l.cfg.group, p.topic)
	l.restoreWG.Add(1)
	go func() {
		defer l.restoreWG.Done()
		var t changelog.Target = restoreTarget{p.state.store, p.state.p}
		if h := l.cfg.hooks.restoreApply; h != nil {
			t = hookedTarget{t, h}
		}
		st, err := changelog.Restore(l.restoreCtx, l.cfg.brokers, l.cfg.kgoOpts, topic, p.id, t, l.cfg.logger)
		select {
		case l.restored <- restoreResult{p, st, err}:
		case <-l.restoreCtx.Done():
		}
	}()
}

// takeRestored dispatches the records of partitions whose restore finished.
func (l *lifetime) takeRestored() error {
	for {
		select {
		case r := <-l.restored:
			if r.err != nil {
				return fmt.Errorf("processor: restoring state of %s/%d: %w", r.p.topic, r.p.id, r.err)
			}
			l.p.stats.restored.Add(int64(r.st.Records))
			l.cfg.logger.Info("state restored", "topic", r.p.topic, "partition", r.p.id, "records", r.st.Records,
				"rebuilt", r.st.Rebuilt, "took", r.st.Took, "per_second", int(float64(r.st.Records)/max(r.st.Took.Seconds(), 1e-9)))
			ps := r.p.state
			ps.restoring = false
			if r.p.gen.Load() == 0 {
				continue // revoked meanwhile
			}
			l.dispatchWindow(r.p)
		default:
			return nil
		}
	}
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
