package processor

import (
	"context"
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
	run *restoreRun
	st  changelog.Stats
	err error
}

// restoreRun is one restore of a partition's store. A partition revoked
// while restoring cancels its run; if it comes back, the new run waits
// for the old one to stop, so that two restores never write one keyspace.
type restoreRun struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// restore brings a newly assigned partition's store up to its changelog's
// committed end in the background; its records wait until then.
func (l *lifetime) restore(p *partition) {
	k := tp{p.topic, p.id}
	prev := l.runs[k]
	ctx, cancel := context.WithCancel(l.restoreCtx)
	run := &restoreRun{cancel: cancel, done: make(chan struct{})}
	l.runs[k] = run
	p.state.restoring, p.state.run = true, run
	topic := changelogTopic(l.cfg.group, p.topic)
	l.restoreWG.Add(1)
	go func() {
		defer l.restoreWG.Done()
		var st changelog.Stats
		err := ctx.Err()
		if prev != nil {
			prev.cancel()
			<-prev.done
		}
		if err == nil {
			var t changelog.Target = restoreTarget{p.state.store, p.state.p}
			if h := l.cfg.hooks.restoreApply; h != nil {
				t = hookedTarget{t, func(n int) error { return h(p.id, n) }}
			}
			st, err = changelog.Restore(ctx, l.cfg.brokers, l.cfg.kgoOpts, topic, p.id, t, l.cfg.logger)
		}
		cancel()
		close(run.done)
		select {
		case l.restored <- restoreResult{p, run, st, err}:
		case <-l.restoreCtx.Done():
		}
	}()
}

// cancelRestore cancels the restore of a revoked partition.
func (l *lifetime) cancelRestore(k tp) {
	if run := l.runs[k]; run != nil {
		run.cancel()
	}
}

// takeRestored dispatches the records of partitions whose restore finished.
// A result is matched to the partition by its run: a rewind replaces the
// partition but keeps waiting for the same run; a revoke drops it.
func (l *lifetime) takeRestored() error {
	for {
		select {
		case r := <-l.restored:
			k := tp{r.p.topic, r.p.id}
			if l.runs[k] == r.run {
				delete(l.runs, k)
			}
			if r.err == nil {
				l.p.stats.restored.Add(int64(r.st.Records))
				l.cfg.logger.Info("state restored", "topic", r.p.topic, "partition", r.p.id, "records", r.st.Records,
					"rebuilt", r.st.Rebuilt, "took", r.st.Took, "per_second", int(float64(r.st.Records)/max(r.st.Took.Seconds(), 1e-9)))
			}
			cur := l.parts[k]
			if cur == nil || cur.state.run != r.run {
				continue // revoked meanwhile: its canceled restore's error does not matter
			}
			if r.err != nil {
				return fmt.Errorf("processor: restoring state of %s/%d: %w", r.p.topic, r.p.id, r.err)
			}
			cur.state.restoring = false
			l.dispatchWindow(cur)
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
