package processor

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/dedupe"
)

// EventID returns the event ID of the record whose handler got ctx, or nil
// if it has none or the processor has no WithDedupe. Pass it to external
// systems as an idempotency key.
func EventID(ctx context.Context) []byte {
	if it := itemFrom(ctx); it != nil {
		return it.eventID()
	}
	return nil
}

// Once runs fn, an external effect of the record whose handler got ctx,
// unless it already ran for the record's event ID; it reports whether fn
// ran. It is OnceNamed with the empty name; use OnceNamed for several
// effects per record.
func Once(ctx context.Context, fn func(ctx context.Context) error) (ran bool, err error) {
	return OnceNamed(ctx, "", fn)
}

// OnceNamed runs fn, the effect named effect of the record whose handler
// got ctx, unless it already ran for the record's event ID, and reports
// whether fn ran. The effect is marked as done, durably (fsynced), as soon
// as fn returns nil, without waiting for the record's transaction: if the
// transaction then aborts and the record is handled again, fn is skipped.
// If fn fails nothing is marked, and the handler's error decides as usual
// (retry, dead letter).
//
// What remains at-least-once: fn runs again if the process dies after fn
// succeeded but before its mark was written (a window of one fsync), and
// if the partition moves to another instance before the record's
// transaction commits (effect marks are local to the instance; marks of
// committed records travel with the partition, and such records are
// skipped as a whole). To close both windows, pass EventID(ctx) to the
// external system as an idempotency key.
//
// If the lookup of the effect's mark fails (the store's disk), fn does not
// run, OnceNamed returns the error, and the record's attempt counts for
// nothing whatever the handler returns: Run stops with an error wrapping
// ErrStore (see State).
//
// A record without an event ID has nothing to deduplicate on: fn just runs.
// Once returns ErrNoDedupe if ctx is not a handler's context of a processor
// with WithDedupe.
func OnceNamed(ctx context.Context, effect string, fn func(ctx context.Context) error) (ran bool, err error) {
	it := itemFrom(ctx)
	var d *partDedupe
	if it != nil {
		d = partOf[*partDedupe](it.part)
	}
	if d == nil {
		return false, ErrNoDedupe
	}
	if len(effect) > MaxEffectNameLen {
		return false, fmt.Errorf("processor: effect name of %d bytes, longer than %d", len(effect), MaxEffectNameLen)
	}
	id := it.eventID()
	if id == nil {
		return true, fn(ctx)
	}
	ran, err = d.tgt.store.Once(ctx, d.tgt.effectKey(effect, id), fn)
	if err != nil && !ran && ctx.Err() == nil && !errors.Is(err, dedupe.ErrIDTooLong) && !errors.Is(err, dedupe.ErrEmptyID) {
		// The lookup of the effect's mark failed: the record must not
		// commit as if its effect had run (or need not).
		return false, it.storeFailed(storeError("looking up an effect mark", err))
	}
	return ran, err
}

// dedupeKeyspace is the dedupe marks as a keyspace (see keyspace): the
// dedupe store, mirrored to one changelog per input topic. Its parts are
// partDedupes.
type dedupeKeyspace struct {
	store    *dedupe.Store
	cfg      *config
	opts     *dedupe.Options     // the processor's, with defaults
	ids      map[string][16]byte // changelog topic IDs, for checkpoints
	restored *atomic.Int64       // Stats.MarksRestored
}

func (k *dedupeKeyspace) part(p *partition) keyspacePart {
	return k.newPart(newDedupeTarget(k.store, p.topic, p.id, k.opts.MaxIDLen))
}

func (k *dedupeKeyspace) newPart(tgt *dedupeTarget) *partDedupe {
	return &partDedupe{ks: k, tgt: tgt, changelog: dedupeTopic(k.cfg.group, tgt.topic), pending: make(map[string]struct{})}
}

func (k *dedupeKeyspace) clientOpts() []kgo.Opt { return nil }

func (k *dedupeKeyspace) planned(*transaction, map[tp]*partition, map[tp]commitPlan) {}

// apply marks a committed transaction's event IDs in the store in one
// batch, with each partition's changelog checkpoint (applyCommitted).
func (k *dedupeKeyspace) apply(t *transaction, parts map[tp]*partition) error {
	return applyCommitted[*partDedupe](t, k.ids, parts, &dedupe.Batch{}, func(b *dedupe.Batch) error {
		if err := k.store.Apply(b); err != nil {
			return storeError("applying committed event IDs", err) // see stateKeyspace.apply
		}
		return nil
	})
}

// partDedupe is a partition's part of the dedupe keyspace: its marks that
// are not yet in the store. Handlers read tgt (OnceNamed).
type partDedupe struct {
	ks        *dedupeKeyspace
	tgt       *dedupeTarget // shared by the partition's parts across rewinds
	changelog string        // the partition's dedupe changelog topic

	// Loop-owned.
	pending map[string]struct{} // event IDs claimed by records not yet applied
	txn     []markWrite         // marks in the open transaction
}

type markWrite struct {
	id []byte
	at time.Time
}

func (d *partDedupe) restore() (restoreSpec, bool) {
	return restoreSpec{kind: "dedupe", topic: d.changelog, target: d.tgt, stat: d.ks.restored}, true
}

// screen decides, in offset order, what becomes of records about to be
// dispatched: a record whose event ID is pending in the partition or marked
// in the store is a duplicate, one whose ID is too long a dead letter;
// both are done without their handler. The rest claim their ID.
func (d *partDedupe) screen(its []*item) error {
	cfg := d.ks.cfg
	maxLen := d.ks.opts.MaxIDLen
	var keys [][]byte
	var ask []*item
	for _, it := range its {
		id, pe := callRecordFunc("WithEventID function", cfg.eventID, it.rec)
		switch {
		case pe != nil:
			it.dlq = deadLetter(cfg.dlq, it, reasonPanic, pe, 0, time.Time{})
			it.extra().failure = pe
			logPanic(cfg, it, pe)
			continue
		case len(id) == 0:
			continue
		case len(id) > maxLen:
			err := fmt.Errorf("event ID is %d bytes, longer than the dedupe store's MaxIDLen %d", len(id), maxLen)
			it.dlq = deadLetter(cfg.dlq, it, reasonEventIDTooLong, err, 0, time.Time{})
			continue
		}
		x := it.extra()
		x.eventID = id
		if _, ok := d.pending[string(id)]; ok {
			x.dup = true
			continue
		}
		keys = append(keys, d.tgt.markKey(id))
		ask = append(ask, it)
	}
	if len(ask) == 0 {
		return nil
	}
	seen, err := d.tgt.store.SeenBatch(keys)
	if err != nil {
		return storeError(fmt.Sprintf("looking up event IDs of %s/%d", d.tgt.topic, d.tgt.partition), err)
	}
	for i, it := range ask {
		x := it.x // set above
		// Claimed earlier in this batch?
		_, pending := d.pending[string(x.eventID)]
		if seen[i] || pending {
			x.dup = true
			continue
		}
		d.pending[string(x.eventID)] = struct{}{}
		x.claimed = true
	}
	return nil
}

// produce sends the mark of a record that claimed its event ID to the
// partition's dedupe changelog in the open transaction (key the event
// ID, value the mark time), and counts a duplicate. A stuck record,
// dead-lettered, is accounted for: it is marked too.
func (d *partDedupe) produce(t *transaction, it *item, stuck bool) {
	if x := it.x; x != nil && x.claimed {
		at := d.ks.opts.Clock.Now()
		t.produceChangelog(d.changelog, d.tgt.partition, x.eventID, binary.BigEndian.AppendUint64(nil, uint64(at.UnixNano())))
		d.txn = append(d.txn, markWrite{x.eventID, at})
	}
	if it.isDup() && !stuck {
		t.counts.dups++
	}
}

// stage adds the marks of the committed transaction t, with the changelog
// checkpoint they reach, to b (stagedPart).
func (d *partDedupe) stage(b *dedupe.Batch, t *transaction, ids map[string][16]byte) (bool, error) {
	if len(d.txn) == 0 {
		return false, nil
	}
	topicID, next, err := committedCheckpoint(t, ids, d.changelog, d.tgt.partition)
	if err != nil {
		return false, err
	}
	for _, m := range d.txn {
		b.Mark(d.tgt.markKey(m.id), m.at)
	}
	b.SetMeta(d.tgt.cpKey(), encodeCheckpoint(topicID, next, d.tgt.epoch, true))
	return true, nil
}

// committed drops the staged marks from the pending set (stagedPart).
func (d *partDedupe) committed() {
	for _, m := range d.txn {
		delete(d.pending, string(m.id))
	}
	clear(d.txn)
	d.txn = d.txn[:0]
}

// rewound forgets the claims and marks of the aborted transaction; the
// target, whose epoch a restore may have set, is kept.
func (d *partDedupe) rewound() keyspacePart { return d.ks.newPart(d.tgt) }

// dedupeTarget is one input partition's marks in the shared store, and
// its changelog target.
//
// Keys: processed marks are 'p' | ns | epoch | event ID, effect marks
// 'e' | ns | uvarint(len(name)) | name | event ID, with ns the input topic
// (length-prefixed) and partition. The partition's checkpoint, a metadata
// value, holds the changelog topic ID and offset and the epoch. A restore
// that must rebuild (no valid checkpoint) cannot delete the old marks one
// by one, so it bumps the epoch instead: older marks become invisible and
// expire with time. Effect marks have no epoch: they are local and survive
// a rebuild.
type dedupeTarget struct {
	store     *dedupe.Store
	topic     string
	partition int32
	maxID     int // the longest event ID accepted
	// epoch and markPre (the prefix of markKey) are written by the
	// restore (Checkpoint, Reset) and read by the loop only after the
	// restore has reported back.
	epoch   uint32
	markPre []byte
}

func newDedupeTarget(s *dedupe.Store, topic string, partition int32, maxID int) *dedupeTarget {
	t := &dedupeTarget{store: s, topic: topic, partition: partition, maxID: maxID}
	t.setEpoch(0)
	return t
}

func (t *dedupeTarget) setEpoch(e uint32) {
	t.epoch = e
	t.markPre = binary.BigEndian.AppendUint32(t.ns('p'), e)
}

func (t *dedupeTarget) ns(tag byte) []byte {
	k := append(make([]byte, 0, 64), tag)
	k = binary.AppendUvarint(k, uint64(len(t.topic)))
	k = append(k, t.topic...)
	return binary.BigEndian.AppendUint32(k, uint32(t.partition))
}

func (t *dedupeTarget) markKey(id []byte) []byte {
	return append(t.markPre[:len(t.markPre):len(t.markPre)], id...)
}

func (t *dedupeTarget) effectKey(name string, id []byte) []byte {
	k := binary.AppendUvarint(t.ns('e'), uint64(len(name)))
	return append(append(k, name...), id...)
}

func (t *dedupeTarget) cpKey() []byte { return t.ns('c') }

// encodeCheckpoint: topic ID (16 bytes), next offset (8), epoch (4),
// whether the offset is valid (1).
func encodeCheckpoint(topicID [16]byte, next int64, epoch uint32, ok bool) []byte {
	v := binary.BigEndian.AppendUint64(topicID[:], uint64(next))
	v = binary.BigEndian.AppendUint32(v, epoch)
	if ok {
		return append(v, 1)
	}
	return append(v, 0)
}

func (t *dedupeTarget) Checkpoint() ([16]byte, int64, bool, error) {
	var id [16]byte
	v, ok, err := t.store.Meta(t.cpKey())
	if err != nil || !ok {
		return id, 0, false, storeError("reading the dedupe checkpoint", err)
	}
	if len(v) != 29 {
		return id, 0, false, fmt.Errorf("processor: dedupe checkpoint of %s/%d has %d bytes", t.topic, t.partition, len(v))
	}
	copy(id[:], v)
	t.setEpoch(binary.BigEndian.Uint32(v[24:]))
	return id, int64(binary.BigEndian.Uint64(v[16:])), v[28] == 1, nil
}

func (t *dedupeTarget) Reset() error {
	t.setEpoch(t.epoch + 1)
	var b dedupe.Batch
	b.SetMeta(t.cpKey(), encodeCheckpoint([16]byte{}, 0, t.epoch, false))
	return storeError("resetting event IDs", t.store.Apply(&b))
}

// Apply replays changelog marks at their own times; records that are not
// marks (tombstones, foreign writes) are skipped.
func (t *dedupeTarget) Apply(recs []*kgo.Record, topicID [16]byte, next int64) error {
	var b dedupe.Batch
	for _, r := range recs {
		if len(r.Value) != 8 || len(r.Key) == 0 || len(r.Key) > t.maxID {
			continue
		}
		b.Mark(t.markKey(r.Key), time.Unix(0, int64(binary.BigEndian.Uint64(r.Value))))
	}
	b.SetMeta(t.cpKey(), encodeCheckpoint(topicID, next, t.epoch, true))
	return storeError("restoring event IDs", t.store.Apply(&b))
}
