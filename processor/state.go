package processor

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/changelog"
	"github.com/onceflow/onceflow/statestore"
)

// State is the session state a handler reads and writes, scoped to the
// input partition of the record being handled.
//
// Reads see, in order: the record's own writes, then the writes of every
// record of the partition that finished before this one was read but is not
// yet applied to the local store (in the open transaction, waiting for the
// next one, or committed moments ago), then the store. So a record always
// sees the writes of the records before it in its session. Writes become
// durable only if the record's transaction commits; after an abort the
// record runs again and sees the state as it was.
//
// A read that fails (the store's disk) returns its error, and the
// record's attempt then counts for nothing whatever the handler returns:
// the record is neither committed (a value taken for absent would be
// wrong) nor dead-lettered (the disk is at fault, not the record), and
// Run stops with an error wrapping ErrStore.
type State interface {
	Get(key []byte) (value []byte, ok bool, err error)
	Set(key, value []byte)
	Delete(key []byte)
	// Scan calls fn for each key with the prefix, in key order, until fn
	// returns false. It merges the store with pending writes in memory:
	// keep prefixes narrow.
	Scan(prefix []byte, fn func(key, value []byte) bool) error
}

// StateFrom returns the state of the record whose handler got ctx, or nil
// if the processor has no state store.
func StateFrom(ctx context.Context) State {
	it := itemFrom(ctx)
	if it == nil || partOf[*partState](it.part) == nil {
		return nil
	}
	return (*recordState)(it)
}

// partState is a partition's part of the state keyspace (stateKeyspace):
// its state that is not yet in the store. Handlers read it (under mu),
// through the records they run for.
type partState struct {
	ks        *stateKeyspace
	store     *statestore.Store
	p         statestore.Partition
	changelog string // the partition's changelog topic

	mu   sync.Mutex
	over map[string]stateWrite // latest unapplied write per key
	seq  uint64

	// Loop-owned.
	txn []stateWrite // writes in the open transaction
}

// recordState is an item as its handler's State: the record's own
// writes over its partition's unapplied ones over the store.
type recordState item

func (s *recordState) Get(key []byte) ([]byte, bool, error) {
	it := (*item)(s)
	ws := it.writes()
	for i := len(ws) - 1; i >= 0; i-- {
		if w := &ws[i]; bytes.Equal(w.Key, key) {
			return w.Value, !w.Delete, nil
		}
	}
	ps := partOf[*partState](it.part)
	ps.mu.Lock()
	w, ok := ps.over[string(key)]
	ps.mu.Unlock()
	if ok {
		return w.Value, !w.Delete, nil
	}
	v, ok, err := ps.store.Get(ps.p, key)
	if err != nil {
		return nil, false, it.storeFailed(storeError("reading session state", err))
	}
	return v, ok, nil
}

func (s *recordState) Set(key, value []byte) {
	x := (*item)(s).extra()
	x.writes = append(x.writes, stateWrite{Write: statestore.Write{Key: bytes.Clone(key), Value: bytes.Clone(value)}})
}

func (s *recordState) Delete(key []byte) {
	x := (*item)(s).extra()
	x.writes = append(x.writes, stateWrite{Write: statestore.Write{Key: bytes.Clone(key), Delete: true}})
}

func (s *recordState) Scan(prefix []byte, fn func(key, value []byte) bool) error {
	it := (*item)(s)
	ps := partOf[*partState](it.part)
	merged := make(map[string]stateWrite)
	if err := ps.store.Scan(ps.p, prefix, func(k, v []byte) bool {
		merged[string(k)] = stateWrite{Write: statestore.Write{Key: bytes.Clone(k), Value: bytes.Clone(v)}}
		return true
	}); err != nil {
		return it.storeFailed(storeError("scanning session state", err))
	}
	ps.mu.Lock()
	for k, w := range ps.over {
		if bytes.HasPrefix(w.Key, prefix) {
			merged[k] = w
		}
	}
	ps.mu.Unlock()
	for _, w := range it.writes() {
		if bytes.HasPrefix(w.Key, prefix) {
			merged[string(w.Key)] = w
		}
	}
	keys := make([]string, 0, len(merged))
	for k, w := range merged {
		if !w.Delete {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !fn([]byte(k), merged[k].Value) {
			break
		}
	}
	return nil
}

// publishWrites makes a finished record's writes visible to the records
// after it, before the loop learns it finished.
func publishWrites(it *item) {
	ws := it.writes()
	if len(ws) == 0 {
		return
	}
	ps := partOf[*partState](it.part)
	if ps == nil {
		return
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if it.gen != it.part.gen.Load() || it.stuck.Load() {
		return // rewound, revoked or dead-lettered: these writes never count
	}
	for i := range ws {
		ps.seq++
		ws[i].seq = ps.seq
		ps.over[string(ws[i].Key)] = ws[i]
	}
}

// applied drops overlay entries the store now holds, unless a later write
// replaced them.
func (ps *partState) applied(ws []stateWrite) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, w := range ws {
		if cur, ok := ps.over[string(w.Key)]; ok && cur.seq == w.seq {
			delete(ps.over, string(w.Key))
		}
	}
}

// stage adds the writes of the committed transaction t, with the
// changelog checkpoint they reach, to b (stagedPart).
func (ps *partState) stage(b *statestore.Batch, t *transaction, ids map[string][16]byte) (bool, error) {
	if len(ps.txn) == 0 {
		return false, nil
	}
	topicID, next, err := committedCheckpoint(t, ids, ps.changelog, ps.p.Partition)
	if err != nil {
		return false, err
	}
	for _, w := range ps.txn {
		b.Write(ps.p, w.Write)
	}
	b.SetCheckpoint(ps.p, statestore.Checkpoint{TopicID: topicID, Next: next})
	return true, nil
}

// committed drops the staged writes from the overlay (stagedPart).
func (ps *partState) committed() {
	ps.applied(ps.txn)
	ps.txn = ps.txn[:0]
}

// markStuck flags a stuck record so that its late writes, if its handler
// ever returns, are never published.
func markStuck(it *item) {
	if ps := partOf[*partState](it.part); ps != nil {
		ps.mu.Lock()
		defer ps.mu.Unlock()
	}
	it.stuck.Store(true)
}

func (ps *partState) restore() (restoreSpec, bool) {
	var t changelog.Target = restoreTarget{ps.store, ps.p}
	if h := ps.ks.restoreHook; h != nil {
		id := ps.p.Partition
		t = hookedTarget{t, func(n int) error { return h(id, n) }}
	}
	return restoreSpec{kind: "state", topic: ps.changelog, target: t, stat: ps.ks.restored}, true
}

func (ps *partState) screen([]*item) error { return nil }

// produce sends a record's state writes to its partition's changelog in
// the open transaction and queues them for the store. A stuck record's
// writes never count (markStuck).
func (ps *partState) produce(t *transaction, it *item, stuck bool) {
	ws := it.writes()
	if stuck || len(ws) == 0 {
		return
	}
	for _, w := range it.writes() {
		var v []byte // nil: a tombstone, compaction drops the key
		if !w.Delete {
			v = w.Value
		}
		t.produceChangelog(ps.changelog, ps.p.Partition, w.Key, v)
	}
	ps.txn = append(ps.txn, ws...)
}

// rewound starts over from the store: the overlay and the transaction's
// writes are dropped with this part, whose stale records may still read
// it.
func (ps *partState) rewound() keyspacePart {
	return ps.ks.newPart(ps.p.Topic, ps.p.Partition)
}

// stateKeyspace is session state as a keyspace (see keyspace): the state
// store, mirrored to one changelog per input topic. Its parts are
// partStates.
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
			// The transaction stays committed and the store behind it,
			// its checkpoint unmoved: Run stops, and the restart's
			// restore replays the transaction from the changelog.
			return storeError("applying committed state", err)
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
	return c.TopicID, c.Next, ok, storeError("reading the state checkpoint", err)
}

func (t restoreTarget) Reset() error {
	b := t.s.NewBatch()
	b.Reset(t.p)
	return storeError("resetting state", b.Commit())
}

func (t restoreTarget) Apply(recs []*kgo.Record, topicID [16]byte, next int64) error {
	b := t.s.NewBatch()
	for _, r := range recs {
		b.Write(t.p, statestore.Write{Key: r.Key, Value: r.Value, Delete: r.Value == nil})
	}
	b.SetCheckpoint(t.p, statestore.Checkpoint{TopicID: topicID, Next: next})
	return storeError("restoring state", b.Commit())
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
