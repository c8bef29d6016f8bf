package dedupe

import (
	"context"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// expireChunk bounds the point deletes per expiry batch, so a large bucket
// becomes many modest commits rather than one huge one.
const expireChunk = 4096

// ExpireStats describes one expiry run.
type ExpireStats struct {
	// Below is the first live bucket: everything below it is gone.
	Below uint64
	// Deleted is the number of index entries deleted.
	Deleted int
}

// ExpireNow synchronously removes every bucket that lies entirely outside
// the retention window. Expired IDs are already reported as unseen; this
// reclaims their space. It is safe to call concurrently with all other
// operations, which it never blocks for longer than a pending write (or
// indexing batch) takes to commit.
func (s *Store) ExpireNow(ctx context.Context) (ExpireStats, error) {
	if err := s.enter(); err != nil {
		return ExpireStats{}, err
	}
	defer s.closeMu.RUnlock()
	return s.expire(ctx)
}

// maybeExpire wakes the background expiry when a bucket boundary has passed
// since the last run. It is called after writes, so an idle store does no
// work, and a fake clock drives expiry deterministically.
func (s *Store) maybeExpire(now time.Time) {
	if s.opts.DisableAutoExpiry || s.win.minLive(now) <= s.floor.Load() {
		return
	}
	select {
	case s.expireCh <- struct{}{}:
	default: // a run is already pending
	}
}

func (s *Store) expireLoop(ctx context.Context) {
	defer s.bg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.expireCh:
		}
		st, err := s.expire(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("dedupe: background expiry failed", "dir", s.dir, "err", err)
		} else if err == nil && st.Deleted > 0 {
			s.log.Debug("dedupe: expired", "dir", s.dir, "below", st.Below, "deleted", st.Deleted)
		}
	}
}

// expire drops all buckets below minLive(now). Expiry reads only the expiry
// log of the expired buckets (never the rest of the store), deletes the index
// keys the log entries name (a blind point delete: a newer mark of the same ID
// has a different key and survives), then drops the log range with one
// DeleteRange. Lookups take no lock that expiry holds.
func (s *Store) expire(ctx context.Context) (ExpireStats, error) {
	s.expMu.Lock()
	defer s.expMu.Unlock()
	cut := s.win.minLive(s.opts.Clock.Now())
	// Raise the floor with writers excluded: after this no write can add to
	// a bucket below cut, so the log range read below is final.
	s.gate.Lock()
	if cut > s.floor.Load() {
		s.floor.Store(cut)
	}
	cut = s.floor.Load()
	s.gate.Unlock()
	st := ExpireStats{Below: cut}
	if s.filter != nil {
		// Marks below the floor read as unseen already.
		s.filter.dropBelow(cut)
	}

	lo, hi := []byte{tagLog}, logBound(cut)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return st, readErr(s.dir, err)
	}
	defer func() { _ = it.Close() }()
	batch := s.db.NewBatch()
	defer func() { _ = batch.Close() }()
	var key []byte
	for ok := it.First(); ok; ok = it.Next() {
		b, valid := decodeLogKey(it.Key())
		v, err := it.ValueAndErr()
		if err != nil {
			return st, readErr(s.dir, err)
		}
		valid = valid && decodeLogValue(v, func(id []byte) {
			key = appendIndexKey(key[:0], id, b)
			_ = batch.Delete(key, nil)
			st.Deleted++
		})
		if !valid {
			return st, &CorruptError{Dir: s.dir, Reason: "malformed expiry log entry"}
		}
		if batch.Count() < expireChunk {
			continue
		}
		// Expiry deletes need no fsync: if lost they are redone next run.
		if err := s.commit(batch, syncSoon); err != nil {
			return st, err
		}
		batch.Reset()
		if err := s.interrupted(ctx); err != nil {
			return st, err
		}
	}
	if err := it.Error(); err != nil {
		return st, readErr(s.dir, err)
	}
	if st.Deleted == 0 {
		return st, nil
	}
	// The WAL is ordered, so the range delete cannot survive a crash that
	// loses the point deletes before it.
	_ = batch.DeleteRange(lo, hi, nil)
	if err := s.commit(batch, syncSoon); err != nil {
		return st, err
	}
	return st, nil
}

func (s *Store) interrupted(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.bgCtx.Err() != nil {
		return ErrClosed
	}
	return nil
}
