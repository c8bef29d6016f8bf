package processor

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/dedupe"
)

// HeaderEventID is the record header that holds a record's event ID by
// default (see WithDedupe and WithEventID).
const HeaderEventID = "event-id"

// MaxEffectNameLen bounds the effect names of OnceNamed.
const MaxEffectNameLen = 255

// dedupeKeyOverhead is what the processor adds to an event ID in the
// store's keys (see markKey and effectKey): a tag, the input topic (at most
// 249 bytes) and partition, an epoch or an effect name.
const dedupeKeyOverhead = 1 + 2 + 249 + 4 + 4 + 2 + MaxEffectNameLen

// headerEventID is the default event ID: the first HeaderEventID header.
func headerEventID(r *kgo.Record) []byte {
	for _, h := range r.Headers {
		if h.Key == HeaderEventID {
			return h.Value
		}
	}
	return nil
}

// EventID returns the event ID of the record whose handler got ctx, or nil
// if it has none or the processor has no WithDedupe. Pass it to external
// systems as an idempotency key.
func EventID(ctx context.Context) []byte {
	if it := itemFrom(ctx); it != nil {
		return it.eventID
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
// A record without an event ID has nothing to deduplicate on: fn just runs.
// Once returns ErrNoDedupe if ctx is not a handler's context of a processor
// with WithDedupe.
func OnceNamed(ctx context.Context, effect string, fn func(ctx context.Context) error) (ran bool, err error) {
	it := itemFrom(ctx)
	if it == nil || it.part.dedupe == nil {
		return false, ErrNoDedupe
	}
	if len(effect) > MaxEffectNameLen {
		return false, fmt.Errorf("processor: effect name of %d bytes, longer than %d", len(effect), MaxEffectNameLen)
	}
	if it.eventID == nil {
		return true, fn(ctx)
	}
	return it.part.dedupe.tgt.store.Once(ctx, it.part.dedupe.tgt.effectKey(effect, it.eventID), fn)
}

// dedupeOptions returns the options the store is opened with: the
// user's, with the processor's clock and, unless set, logger.
func (c *config) dedupeOptions() dedupe.Options {
	var o dedupe.Options
	if c.dedupeOpts != nil {
		o = *c.dedupeOpts
	}
	if o.Logger == nil {
		o.Logger = c.logger
	}
	o.Clock = c.clock
	o.EnsureDefaults()
	return o
}

// storeOptions are the dedupe store's options: the user's, with Once's
// marks synced and room for the processor's key prefixes.
func storeOptions(o dedupe.Options) *dedupe.Options {
	o.SyncOnce = true
	o.MaxIDLen += dedupeKeyOverhead
	return &o
}

func dedupeTopicConfigs(o dedupe.Options) map[string]*string {
	policy := "compact,delete"
	retention := strconv.FormatInt((o.TTL + o.BucketWidth).Milliseconds(), 10)
	return map[string]*string{"cleanup.policy": &policy, "retention.ms": &retention}
}

func dedupeTopic(group, input string) string { return changelogName(group, input, dedupeSuffix) }

func (c *config) validateDedupe() error {
	if !c.dedupeSet {
		if c.eventID != nil {
			return invalid("WithEventID needs WithDedupe")
		}
		return nil
	}
	if c.eventID == nil { // the default, set here: WithEventID alone is invalid
		c.eventID = headerEventID
	}
	switch {
	case c.dedupeDir == "":
		return invalid("WithDedupe: a directory is required")
	case c.stateDir != "" && c.stateDir == c.dedupeDir:
		return invalid("WithDedupe and WithStateStore need different directories, both are %q", c.dedupeDir)
	case c.dedupeOpts != nil && c.dedupeOpts.Clock != nil:
		return invalid("WithDedupe: opts.Clock must be nil: mark times follow the processor's clock (WithClock)")
	}
	o := c.dedupeOptions()
	if err := o.Validate(); err != nil {
		return fmt.Errorf("%w: WithDedupe: %w", ErrInvalidOption, err)
	}
	if err := storeOptions(o).Validate(); err != nil {
		return fmt.Errorf("%w: WithDedupe: MaxIDLen %d leaves no room for the processor's %d bytes of key prefix: %w",
			ErrInvalidOption, o.MaxIDLen, dedupeKeyOverhead, err)
	}
	return nil
}

// partDedupe is a partition's marks that are not yet in the store.
type partDedupe struct {
	tgt       *dedupeTarget // shared by the partition's states across rewinds
	changelog string        // the partition's dedupe changelog topic

	// Loop-owned.
	pending map[string]struct{} // event IDs claimed by records not yet applied
	txn     []markWrite         // marks in the open transaction
}

type markWrite struct {
	id []byte
	at time.Time
}

// screen decides, in offset order, what becomes of records about to be
// dispatched: a record whose event ID is pending in the partition or marked
// in the store is a duplicate, one whose ID is too long a dead letter;
// both are done without their handler. The rest claim their ID.
func (l *lifetime) screen(p *partition, its []*item) error {
	d := p.dedupe
	maxLen := l.p.dedupeOpts.MaxIDLen
	var keys [][]byte
	var ask []*item
	for _, it := range its {
		id := l.cfg.eventID(it.rec)
		switch {
		case len(id) == 0:
			continue
		case len(id) > maxLen:
			err := fmt.Errorf("event ID is %d bytes, longer than the dedupe store's MaxIDLen %d", len(id), maxLen)
			it.dlq = deadLetter(l.cfg.dlq, it, reasonEventIDTooLong, err, 0, time.Time{})
			continue
		}
		it.eventID = id
		if _, ok := d.pending[string(id)]; ok {
			it.dup = true
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
		return fmt.Errorf("processor: looking up event IDs of %s/%d: %w", p.topic, p.id, err)
	}
	for i, it := range ask {
		_, pending := d.pending[string(it.eventID)] // claimed earlier in this batch
		if seen[i] || pending {
			it.dup = true
			continue
		}
		d.pending[string(it.eventID)] = struct{}{}
		it.claimed = true
	}
	return nil
}

// produceMark sends a record's mark to its partition's dedupe changelog
// in the open transaction: key the event ID, value the mark time.
func (l *lifetime) produceMark(p *partition, id []byte) {
	at := l.p.dedupeOpts.Clock.Now()
	l.txn.produceChangelog(p.dedupe.changelog, p.id, id, binary.BigEndian.AppendUint64(nil, uint64(at.UnixNano())))
	p.dedupe.txn = append(p.dedupe.txn, markWrite{id, at})
}

// applyMarks applies a committed transaction's marks to the store in one
// batch, with each partition's changelog checkpoint, and releases their
// IDs from the pending sets.
func (l *lifetime) applyMarks() error {
	if l.r.marks == nil {
		return nil
	}
	var b dedupe.Batch
	touched, err := l.committedParts(dedupeSuffix, func(p *partition) bool { return len(p.dedupe.txn) > 0 },
		func(p *partition, topicID [16]byte, next int64) {
			d := p.dedupe
			for _, m := range d.txn {
				b.Mark(d.tgt.markKey(m.id), m.at)
			}
			b.SetMeta(d.tgt.cpKey(), encodeCheckpoint(topicID, next, d.tgt.epoch, true))
		})
	if err != nil || len(touched) == 0 {
		return err
	}
	if err := l.r.marks.Apply(&b); err != nil {
		return fmt.Errorf("processor: applying committed event IDs: %w", err)
	}
	for _, p := range touched {
		d := p.dedupe
		for _, m := range d.txn {
			delete(d.pending, string(m.id))
		}
		clear(d.txn)
		d.txn = d.txn[:0]
	}
	return nil
}

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
		return id, 0, false, err
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
	return t.store.Apply(&b)
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
	return t.store.Apply(&b)
}
