package dedupe

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/onceflow/onceflow/internal/diskguard"
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
	// guard holds the first failed write of the store's files, after
	// which the store takes no more writes (see commit).
	guard *diskguard.FS
	// writeMu makes the guard's check and the commit after it one step:
	// Pebble's fatal paths are met by the commit after a failed write,
	// never by one that checked first. Fsyncs are waited for outside it.
	writeMu sync.Mutex
	// ahead is the sync request of the last syncSoon commit, not yet
	// waited for (under writeMu).
	ahead diskguard.SyncAhead
	wo    *pebble.WriteOptions
	log   *slog.Logger
	win   window

	// closeMu guards closed; every operation holds it shared so Close
	// waits for in-flight calls before closing pebble.
	closeMu sync.RWMutex
	closed  bool

	// gate is held shared by writers from choosing a bucket until their
	// batch commits and is staged, and exclusively (briefly) by expiry to
	// raise floor, so no write can land in a bucket expiry has already
	// swept, and by indexing rounds to seal a generation.
	gate  sync.RWMutex
	floor atomic.Uint64 // lowest bucket a write may use
	seq   atomic.Uint64 // last expiry-log sequence number

	seed    maphash.Seed
	filter  *filterSet // nil with Options.DisableFilter
	stage   *stage     // marks whose index keys are not written yet
	idxMu   sync.Mutex // serialises indexing rounds
	sealedW uint64     // watermark of the sealed generation, under idxMu
	stripes [numStripes]sync.Mutex
	once    keyedLocks

	expMu    sync.Mutex // serialises expiry runs
	expireCh chan struct{}
	bgCtx    context.Context
	bgCancel context.CancelFunc
	bg       sync.WaitGroup // background expiry, indexing and filter builds
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

// Close stops background work, waits for in-flight calls, indexes staged
// marks and closes the database. Later calls return ErrClosed.
func (s *Store) Close() error {
	s.bgCancel()
	s.bg.Wait()
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.closed = true
	if err := s.indexRound(); err != nil {
		// The marks are in the log; the next Open indexes them.
		s.log.Warn("dedupe: indexing staged marks at close failed", "dir", s.dir, "err", err)
	}
	s.writeMu.Lock()
	_ = s.ahead.Wait() // its batch must not outlive the database; a failure is the guard's
	s.writeMu.Unlock()
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
	minLive := s.win.minLive(s.opts.Clock.Now())
	return s.seen(id, s.hash(id), minLive)
}

// seen looks id up in the filter, the stage and pebble, in that order. The
// stage is read before pebble's iterator is opened (see stage.gens).
func (s *Store) seen(id []byte, h, minLive uint64) (bool, error) {
	if !s.mayContain(h, minLive) {
		return false, nil
	}
	if s.stage.gens().contains(id, h, minLive) {
		return true, nil
	}
	it, err := s.db.NewIter(&lookupOpts)
	if err != nil {
		return false, readErr(s.dir, err)
	}
	var buf [64]byte
	seen, err := s.seenIn(it, appendIndexPrefix(buf[:0], id), minLive)
	if cerr := it.Close(); err == nil && cerr != nil {
		err = readErr(s.dir, cerr)
	}
	return seen, err
}

// mayContain consults the filter: false means h is certainly not marked in
// a bucket >= minLive; true means the stage and pebble must be asked.
func (s *Store) mayContain(h, minLive uint64) bool {
	return s.filter == nil || s.filter.mayContain(h, minLive)
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
	q := s.newIDBatch(ids)
	out := make([]bool, len(ids))
	if err := s.lookupAll(q, s.win.minLive(s.opts.Clock.Now()), out); err != nil {
		return nil, err
	}
	if q.first != nil {
		for i, f := range q.first {
			out[i] = out[f]
		}
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
	q := s.newIDBatch(ids)
	return s.writeMarks(q, q.uniq, b, now)
}

// markOnce is Mark for Once: fsynced with Options.Sync or SyncOnce.
func (s *Store) markOnce(id []byte) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.closeMu.RUnlock()
	now := s.opts.Clock.Now()
	q := s.newIDBatch([][]byte{id})
	wo := s.wo
	if s.opts.SyncOnce {
		wo = pebble.Sync
	}
	return s.writeGroups([]markGroup{{q: q, list: q.uniq, b: s.win.bucket(now)}}, nil, now, wo)
}

// writeMarks marks the distinct IDs q.ids[list[...]] in bucket b or, if
// expiry has moved past it, the floor. See writeGroups.
func (s *Store) writeMarks(q *idBatch, list []int, b uint64, now time.Time) error {
	return s.writeGroups([]markGroup{{q: q, list: list, b: b}}, nil, now, s.wo)
}

// markGroup is distinct IDs q.ids[list[...]] to mark in bucket b.
type markGroup struct {
	q    *idBatch
	list []int
	b    uint64
}

// writeGroups commits one expiry-log entry per group listing its IDs, and
// the metadata sets, in one batch, and stages the IDs for indexing; the
// filter learns them before the commit, the stage right after it, both
// before the caller returns or unlocks its stripes. A group whose bucket
// expiry has moved past is written in the floor. wo is s.wo unless the
// caller needs an fsync regardless.
func (s *Store) writeGroups(groups []markGroup, meta [][2][]byte, now time.Time, wo *pebble.WriteOptions) error {
	if err := s.guard.Err(); err != nil {
		return writeErr(s.dir, err) // and do not wait for room that failed index rounds never make
	}
	s.stage.waitRoom()
	s.gate.RLock()
	defer s.gate.RUnlock()
	floor := s.floor.Load()
	size := 64
	for i := range groups {
		g := &groups[i]
		g.b = max(g.b, floor)
		for _, j := range g.list {
			size += uvarintLen(len(g.q.ids[j])) + len(g.q.ids[j])
		}
		size += 1 + 2*suffixLen + 8
	}
	for _, kv := range meta {
		size += len(kv[0]) + len(kv[1]) + 16
	}
	batch := s.db.NewBatchWithSize(size)
	defer batch.Close()
	for _, g := range groups {
		if len(g.list) == 0 {
			continue
		}
		vlen := 0
		for _, i := range g.list {
			vlen += uvarintLen(len(g.q.ids[i])) + len(g.q.ids[i])
		}
		// Encode the log entry in place in the batch.
		var key [1 + 2*suffixLen]byte
		op := batch.SetDeferred(len(key), vlen)
		copy(op.Key, appendLogKey(key[:0], g.b, s.seq.Add(1)))
		val := op.Value[:0]
		for _, i := range g.list {
			val = appendLogID(val, g.q.ids[i])
		}
		_ = op.Finish()
		if s.filter != nil {
			s.filter.add(g.q.hash, g.list, g.b)
		}
	}
	for _, kv := range meta {
		_ = batch.Set(kv[0], kv[1], nil)
	}
	if err := s.commit(batch, wo); err != nil {
		return err
	}
	for _, g := range groups {
		if len(g.list) > 0 {
			s.stage.add(g.q, g.list, g.b)
		}
	}
	s.maybeExpire(now)
	return nil
}

func uvarintLen(n int) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], uint64(n))
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
	// Index staged marks first: a staged mark of a forgotten ID must not be
	// indexed (or re-indexed from the log after a crash) later.
	if err := s.indexRound(); err != nil {
		return err
	}
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
	return s.commit(batch, s.wo)
}

// commit writes batch, unless a write of the store already failed, and
// returns the error of a failed write naming the directory. Pebble cannot
// go on after a failed write of its log (it panics, or worse, in the
// commit that meets it); the guard sees the failure first (see
// diskguard), and a panic that still comes is taken back here. A syncing
// commit waits for its fsync after leaving writeMu, so that concurrent
// syncing writers still share fsyncs.
func (s *Store) commit(batch *pebble.Batch, wo *pebble.WriteOptions) error {
	if err := s.commitLocked(batch, wo); err != nil {
		return writeErr(s.dir, err)
	}
	if wo.Sync {
		if err := batch.SyncWait(); err != nil {
			if g := s.guard.Err(); g != nil {
				err = g
			}
			return writeErr(s.dir, err)
		}
	}
	return nil
}

// syncSoon is the WriteOptions of writes that need no fsync but must not
// leave their log data unwritten: a syncSoon commit requests a sync after
// the batch and returns, and the next one waits for it
// (diskguard.SyncAhead), so that a failed disk stops the writes before a
// log rotation meets it. Plain unsynced writes (Claim, Mark) stay
// unsynced: they are too many to sync each.
var syncSoon = &pebble.WriteOptions{}

func (s *Store) commitLocked(batch *pebble.Batch, wo *pebble.WriteOptions) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	return s.guard.Do(func() error {
		switch wo {
		case syncSoon:
			if err := s.ahead.Wait(); err != nil {
				return err
			}
			if err := batch.Commit(pebble.NoSync); err != nil {
				return err
			}
			return s.ahead.Request(s.db)
		}
		if wo.Sync {
			return s.db.ApplyNoSyncWait(batch, wo)
		}
		return batch.Commit(wo)
	})
}

// writeErr names the directory in a failed write's error.
func writeErr(dir string, err error) error {
	return fmt.Errorf("dedupe: writing to %q: %w", dir, err)
}
