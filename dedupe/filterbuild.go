package dedupe

import (
	"context"
	"hash/maphash"

	"github.com/cockroachdb/pebble/v2"
)

// hash is the per-process hash of an ID used by the filter and the Claim
// stripes.
func (s *Store) hash(id []byte) uint64 { return maphash.Bytes(s.seed, id) }

// initFilter registers the epochs that hold marks written before Open, from
// the oldest live bucket to the newest bucket in the expiry log, and starts
// building their filters in the background. Until an epoch's filter is
// built, lookups that reach it read pebble.
func (s *Store) initFilter() error {
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: []byte{tagLog}, UpperBound: []byte{tagLog + 1},
	})
	if err != nil {
		return readErr(s.dir, err)
	}
	defer func() { _ = it.Close() }()
	if !it.Last() {
		if err := it.Error(); err != nil {
			return readErr(s.dir, err)
		}
		return nil
	}
	hi, ok := decodeLogKey(it.Key())
	if !ok {
		return &CorruptError{Dir: s.dir, Reason: "malformed expiry log key"}
	}
	if !it.First() {
		if err := it.Error(); err != nil {
			return readErr(s.dir, err)
		}
		return nil
	}
	lo, ok := decodeLogKey(it.Key())
	if !ok {
		return &CorruptError{Dir: s.dir, Reason: "malformed expiry log key"}
	}
	// Older epochs hold only marks that are already outside the window.
	lo = max(lo, s.win.minLive(s.opts.Clock.Now()))
	if lo > hi {
		return nil
	}
	if hi/s.filter.k-lo/s.filter.k > maxFilterEpochSpan {
		// A log reaching this far past the window (a clock that jumped
		// far, or a damaged key) would register one epoch per bucket in
		// between. The filter only saves reads: go without it.
		s.log.Warn("dedupe: expiry log spans far more than the retention window; ID filter disabled",
			"dir", s.dir, "oldest_live_bucket", lo, "newest_bucket", hi)
		s.filter = nil
		return nil
	}
	s.filter.addUnbuilt(lo/s.filter.k, hi/s.filter.k)
	return nil
}

// maxFilterEpochSpan bounds the epochs initFilter registers: the window
// holds about filterEpochs, the rest is room for a clock that moved back.
const maxFilterEpochSpan = 16 * filterEpochs

// filterLoop builds the filters of queued epochs: those found at Open and
// those that outgrew their size.
func (s *Store) filterLoop(ctx context.Context) {
	defer s.bg.Done()
	for {
		for _, ep := range s.filter.queued() {
			if err := s.buildFilter(ctx, ep); err != nil {
				if ctx.Err() != nil || s.bgCtx.Err() != nil {
					return
				}
				// The epoch keeps answering "maybe" (or from its old,
				// fuller filter) and is retried on the next wake-up.
				s.log.Warn("dedupe: building ID filter failed", "dir", s.dir, "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-s.filter.work:
		}
	}
}

// buildFilter (re)builds the filter of ep from the expiry log, sized at
// twice its IDs. Marks committed while it runs are collected in
// ep.pending and folded in before the filter is published.
func (s *Store) buildFilter(ctx context.Context, ep *epochFilter) error {
	k := s.filter.k
	p := &pendingHashes{}
	s.gate.Lock()
	ep.pending = p
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: logBound(ep.epoch * k), UpperBound: logBound((ep.epoch + 1) * k),
	})
	s.gate.Unlock()
	if err != nil {
		s.gate.Lock()
		ep.pending = nil
		s.gate.Unlock()
		return readErr(s.dir, err)
	}
	// An epoch that outgrew its filter knows (an upper bound of) its size;
	// one found at Open is counted first.
	n := ep.n.Load()
	if ep.cur.Load() == nil {
		n = 0
		err = s.scanLog(ctx, it, func([]byte) { n++ })
	}
	b := newBlockedBloom(int(max(int64(s.filter.minIDs), 2*n)))
	n = 0
	if err == nil {
		err = s.scanLog(ctx, it, func(id []byte) { b.add(s.hash(id)); n++ })
	}
	if cerr := it.Close(); err == nil && cerr != nil {
		err = readErr(s.dir, cerr)
	}
	s.gate.Lock()
	defer s.gate.Unlock()
	ep.pending = nil
	if err != nil {
		return err
	}
	for _, h := range p.hs {
		b.add(h)
	}
	ep.cur.Store(b)
	ep.n.Store(n + int64(len(p.hs)))
	ep.queued.Store(false)
	return nil
}

// scanLog calls fn for every ID named by the log entries of it.
func (s *Store) scanLog(ctx context.Context, it *pebble.Iterator, fn func(id []byte)) error {
	i := 0
	for ok := it.First(); ok; ok = it.Next() {
		if i++; i%1024 == 0 {
			if err := s.interrupted(ctx); err != nil {
				return err
			}
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return readErr(s.dir, err)
		}
		if _, valid := decodeLogKey(it.Key()); !valid || !decodeLogValue(v, fn) {
			return &CorruptError{Dir: s.dir, Reason: "malformed expiry log entry"}
		}
	}
	if err := it.Error(); err != nil {
		return readErr(s.dir, err)
	}
	return nil
}
