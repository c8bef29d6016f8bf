package dedupe

import (
	"bytes"
	"context"
	"hash/maphash"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// numStripes is the number of Claim locks. Claims of different IDs rarely
// share a stripe; ClaimBatch takes the stripes it needs in ascending order.
const numStripes = 256

// lookupOpts makes lookups consult L6 bloom filters too: pebble skips them by
// default because its usual workload mostly hits, ours mostly misses.
var lookupOpts = pebble.IterOptions{UseL6Filters: true}

// Store is a durable set of event IDs with time-based retention. It is safe
// for concurrent use.
type Store struct {
	opts Options
	dir  string
	db   *pebble.DB
	wo   *pebble.WriteOptions
	log  *slog.Logger
	win  window

	// closeMu guards closed; every operation holds it shared so Close
	// waits for in-flight calls before closing pebble.
	closeMu sync.RWMutex
	closed  bool

	// gate is held shared by writers from choosing a bucket until their
	// batch commits, and exclusively (briefly) by expiry to raise floor, so
	// no write can land in a bucket expiry has already swept.
	gate  sync.RWMutex
	floor atomic.Uint64 // lowest bucket a write may use
	seq   atomic.Uint64 // last expiry-log sequence number

	seed    maphash.Seed
	stripes [numStripes]sync.Mutex
	once    keyedLocks

	expMu    sync.Mutex // serialises expiry runs
	expireCh chan struct{}
	bgCtx    context.Context
	bgCancel context.CancelFunc
	bgDone   chan struct{}
}

// enter starts an operation; the caller must call s.closeMu.RUnlock.
func (s *Store) enter() error {
	s.closeMu.RLock()
	if s.closed {
		s.closeMu.RUnlock()
		return ErrClosed
	}
	return nil
}

// Close stops background expiry, waits for in-flight calls and closes the
// database. Later calls return ErrClosed.
func (s *Store) Close() error {
	s.bgCancel()
	<-s.bgDone
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.closed = true
	if err := s.db.Close(); err != nil {
		return readErr(s.dir, err)
	}
	return nil
}

func (s *Store) checkID(id []byte) error {
	if len(id) == 0 {
		return ErrEmptyID
	}
	if len(id) > s.opts.MaxIDLen {
		return &IDTooLongError{Len: len(id), Max: s.opts.MaxIDLen}
	}
	return nil
}

func (s *Store) checkIDs(ids [][]byte) error {
	for _, id := range ids {
		if err := s.checkID(id); err != nil {
			return err
		}
	}
	return nil
}

// Seen reports whether id was marked within the retention window.
func (s *Store) Seen(id []byte) (bool, error) {
	if err := s.checkID(id); err != nil {
		return false, err
	}
	if err := s.enter(); err != nil {
		return false, err
	}
	defer s.closeMu.RUnlock()
	it, err := s.db.NewIter(&lookupOpts)
	if err != nil {
		return false, readErr(s.dir, err)
	}
	seen, err := s.seenIn(it, appendIndexPrefix(make([]byte, 0, 16+len(id)), id),
		s.win.minLive(s.opts.Clock.Now()))
	if cerr := it.Close(); err == nil && cerr != nil {
		err = readErr(s.dir, cerr)
	}
	return seen, err
}

// SeenBatch reports for each ID whether it was marked within the retention
// window, using one iterator for all lookups.
func (s *Store) SeenBatch(ids [][]byte) ([]bool, error) {
	if err := s.checkIDs(ids); err != nil {
		return nil, err
	}
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.closeMu.RUnlock()
	q := sortedPrefixes(ids)
	out := make([]bool, len(ids))
	it, err := s.db.NewIter(&lookupOpts)
	if err != nil {
		return nil, readErr(s.dir, err)
	}
	minLive := s.win.minLive(s.opts.Clock.Now())
	for j, i := range q.order {
		if j > 0 && q.dup(j) {
			out[i] = out[q.order[j-1]]
			continue
		}
		if out[i], err = s.seenIn(it, q.prefix(i), minLive); err != nil {
			break
		}
	}
	if cerr := it.Close(); err == nil && cerr != nil {
		err = readErr(s.dir, cerr)
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// seenIn looks up the newest bucket of the index prefix p.
func (s *Store) seenIn(it *pebble.Iterator, p []byte, minLive uint64) (bool, error) {
	if !it.SeekPrefixGE(p) {
		if err := it.Error(); err != nil {
			return false, readErr(s.dir, err)
		}
		return false, nil
	}
	b, ok := indexBucket(it.Key(), len(p))
	if !ok {
		return false, &CorruptError{Dir: s.dir, Reason: "malformed index key"}
	}
	return b >= minLive, nil
}

// Mark records ids as seen now, in one batch. Marking an already marked ID
// extends its retention.
func (s *Store) Mark(ids ...[]byte) error {
	return s.apply(ids, time.Time{}, false)
}

// ApplyMarks records ids as seen at time at, in one batch. It is the hook
// for replaying marks made elsewhere: a processor applying the marks of a
// committed transaction, or restoring them from a changelog. Marks are
// idempotent and commutative (an ID stays seen until its newest mark
// expires), so replaying, reordering or duplicating them is harmless. Marks
// whose time is already outside the retention window are skipped.
func (s *Store) ApplyMarks(ids [][]byte, at time.Time) error {
	return s.apply(ids, at, true)
}

func (s *Store) apply(ids [][]byte, at time.Time, explicit bool) error {
	if err := s.checkIDs(ids); err != nil {
		return err
	}
	if len(ids) == 0 {
		return nil
	}
	if err := s.enter(); err != nil {
		return err
	}
	defer s.closeMu.RUnlock()
	now := s.opts.Clock.Now()
	if !explicit {
		at = now
	}
	b := s.win.bucket(at)
	if explicit && b < s.win.minLive(now) {
		return nil
	}
	q := sortedPrefixes(ids)
	s.gate.RLock()
	defer s.gate.RUnlock()
	b = max(b, s.floor.Load())
	batch := s.db.NewBatch()
	defer batch.Close()
	s.addMarks(batch, ids, q.order, b)
	return s.commit(batch, now)
}

// addMarks adds the index keys marking ids[order[...]] in bucket b,
// skipping adjacent duplicates, in key order so memtable inserts stay
// local, and one expiry-log entry listing them.
func (s *Store) addMarks(batch *pebble.Batch, ids [][]byte, order []int, b uint64) {
	var key, val []byte // pebble copies keys and values into the batch
	var prev []byte
	for _, i := range order {
		if prev != nil && bytes.Equal(prev, ids[i]) {
			continue
		}
		prev = ids[i]
		key = appendIndexKey(key[:0], ids[i], b)
		_ = batch.Set(key, nil, nil)
		val = appendLogID(val, ids[i])
	}
	_ = batch.Set(appendLogKey(key[:0], b, s.seq.Add(1)), val, nil)
}

func (s *Store) commit(batch *pebble.Batch, now time.Time) error {
	if batch.Empty() {
		return nil
	}
	if err := batch.Commit(s.wo); err != nil {
		return readErr(s.dir, err)
	}
	s.maybeExpire(now)
	return nil
}

// Forget removes ids from the store, in one batch.
func (s *Store) Forget(ids ...[]byte) error {
	if err := s.checkIDs(ids); err != nil {
		return err
	}
	if err := s.enter(); err != nil {
		return err
	}
	defer s.closeMu.RUnlock()
	it, err := s.db.NewIter(nil)
	if err != nil {
		return readErr(s.dir, err)
	}
	batch := s.db.NewBatch()
	defer batch.Close()
	var p []byte
	for _, id := range ids {
		p = appendIndexPrefix(p[:0], id)
		// All buckets of an ID share its prefix; the expiry-log entries are
		// left to expiry, whose deletes of absent keys are harmless.
		for ok := it.SeekPrefixGE(p); ok; ok = it.Next() {
			_ = batch.Delete(it.Key(), nil)
		}
	}
	err = it.Error()
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return readErr(s.dir, err)
	}
	if batch.Empty() {
		return nil
	}
	if err := batch.Commit(s.wo); err != nil {
		return readErr(s.dir, err)
	}
	return nil
}

// prefixes holds the index prefixes of a batch of IDs in one buffer, with
// the IDs' positions sorted by prefix. Sorted order makes batch lookups
// walk the LSM forward and lets the memtable reuse insertion splices.
type prefixes struct {
	buf   []byte
	off   []int // off[i]:off[i+1] is the prefix of ids[i]
	order []int
}

func sortedPrefixes(ids [][]byte) *prefixes {
	n := 0
	for _, id := range ids {
		n += len(id) + 3
	}
	q := &prefixes{
		buf:   make([]byte, 0, n),
		off:   make([]int, len(ids)+1),
		order: make([]int, len(ids)),
	}
	for i, id := range ids {
		q.buf = appendIndexPrefix(q.buf, id)
		q.off[i+1] = len(q.buf)
		q.order[i] = i
	}
	// Stable, so the first occurrence of a duplicate keeps the lowest index.
	slices.SortStableFunc(q.order, func(a, b int) int {
		return bytes.Compare(q.prefix(a), q.prefix(b))
	})
	return q
}

func (q *prefixes) prefix(i int) []byte { return q.buf[q.off[i]:q.off[i+1]:q.off[i+1]] }

// dup reports whether the j-th ID in sorted order equals the previous one.
func (q *prefixes) dup(j int) bool {
	return bytes.Equal(q.prefix(q.order[j]), q.prefix(q.order[j-1]))
}
