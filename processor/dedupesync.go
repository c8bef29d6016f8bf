package processor

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/dedupe"
)

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
			return fmt.Errorf("processor: applying committed event IDs: %w", err)
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
		return fmt.Errorf("processor: looking up event IDs of %s/%d: %w", d.tgt.topic, d.tgt.partition, err)
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

// rewound forgets the claims and marks of the aborted transaction; the
// target, whose epoch a restore may have set, is kept.
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

func (d *partDedupe) rewound() keyspacePart { return d.ks.newPart(d.tgt) }
