package dedupe

import (
	"bytes"
	"errors"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Batch collects marks, each at its own time, and metadata values, for
// Store.Apply to write atomically. It is the hook for mirroring a store to
// a log: a consumer of the log applies each chunk of it together with the
// log position it reached (its checkpoint), so the store and the checkpoint
// never disagree after a crash. The zero value is an empty batch.
type Batch struct {
	ids  [][]byte
	ats  []time.Time
	meta [][2][]byte
}

// Mark adds id, marked at time at. id must not be modified until Apply
// returns.
func (b *Batch) Mark(id []byte, at time.Time) {
	b.ids = append(b.ids, id)
	b.ats = append(b.ats, at)
}

// SetMeta sets the metadata value of key (see Store.Meta). The last value
// set for a key wins.
func (b *Batch) SetMeta(key, value []byte) {
	b.meta = append(b.meta, [2][]byte{metaKey(key), bytes.Clone(value)})
}

// Len returns the number of marks in the batch.
func (b *Batch) Len() int { return len(b.ids) }

// Reset empties the batch for reuse.
func (b *Batch) Reset() {
	clear(b.ids)
	b.ids, b.ats, b.meta = b.ids[:0], b.ats[:0], b.meta[:0]
}

// metaKey is the store key of a caller's metadata key: a metadata key
// ('m') that the store's own ("mformat", "mrun") cannot collide with.
func metaKey(key []byte) []byte {
	return append([]byte{tagMeta, 0}, key...)
}

// Apply writes the batch's marks, each at its own time as ApplyMarks does,
// and its metadata values in one atomic write: after a crash either all of
// it is in the store or none of it. Marks whose time is already outside the
// retention window are skipped (their metadata is still written). With
// Options.Sync it costs one fsync.
func (s *Store) Apply(b *Batch) error {
	if err := s.checkIDs(b.ids); err != nil {
		return err
	}
	if len(b.ids) == 0 && len(b.meta) == 0 {
		return nil
	}
	if err := s.enter(); err != nil {
		return err
	}
	defer s.closeMu.RUnlock()
	now := s.opts.Clock.Now()
	minLive := s.win.minLive(now)
	// Group the live marks by bucket: one expiry-log entry per bucket.
	byBucket := make(map[uint64][][]byte)
	for i, id := range b.ids {
		if bk := s.win.bucket(b.ats[i]); bk >= minLive {
			byBucket[bk] = append(byBucket[bk], id)
		}
	}
	buckets := make([]uint64, 0, len(byBucket))
	for bk := range byBucket {
		buckets = append(buckets, bk)
	}
	slices.Sort(buckets)
	groups := make([]markGroup, 0, len(buckets))
	for _, bk := range buckets {
		q := s.newIDBatch(byBucket[bk])
		groups = append(groups, markGroup{q: q, list: q.uniq, b: bk})
	}
	wo := s.wo
	if !wo.Sync {
		wo = syncSoon // a processor's per-transaction write: see syncSoon
	}
	return s.writeGroups(groups, b.meta, now, wo)
}

// Meta returns a copy of the metadata value last written for key by Apply.
func (s *Store) Meta(key []byte) (value []byte, ok bool, err error) {
	if err := s.enter(); err != nil {
		return nil, false, err
	}
	defer s.closeMu.RUnlock()
	v, closer, err := s.db.Get(metaKey(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, readErr(s.dir, err)
	}
	defer closer.Close()
	return bytes.Clone(v), true, nil
}
