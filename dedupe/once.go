package dedupe

import (
	"context"
	"fmt"
	"hash/maphash"
	"sync"
)

// Once runs fn unless id was already marked, and marks id only after fn
// returns nil. It reports whether fn ran. If fn fails, id is not marked and
// Once returns (true, fn's error), so a retry runs fn again. If fn succeeds
// but the mark cannot be written, Once returns (true, err) with an error
// from the store; the effect happened and a retry will repeat it.
//
// The mark is fsynced before Once returns with Options.Sync or
// Options.SyncOnce. Concurrent Once calls for the same id in this process
// are serialised, so fn runs at most once among them. Waiting for that turn respects ctx. See
// the package documentation for the crash window that remains.
func (s *Store) Once(ctx context.Context, id []byte, fn func(ctx context.Context) error) (ran bool, err error) {
	if err := s.checkID(id); err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	unlock, err := s.once.lock(ctx, id)
	if err != nil {
		return false, err
	}
	defer unlock()
	seen, err := s.Seen(id)
	if err != nil || seen {
		return false, err
	}
	if err := fn(ctx); err != nil {
		return true, err
	}
	if err := s.markOnce(id); err != nil {
		return true, fmt.Errorf("dedupe: effect for ID ran but mark failed: %w", err)
	}
	return true, nil
}

// keyedLocks is a set of per-key mutexes. Entries are reference counted and
// removed when the last holder or waiter leaves, so memory is bounded by the
// number of keys in use, not the number ever seen. Keys are spread over
// shards to keep the map mutexes uncontended.
type keyedLocks struct {
	seed   maphash.Seed
	shards [64]lockShard
}

type lockShard struct {
	mu sync.Mutex
	m  map[string]*keyedLock
}

type keyedLock struct {
	ch   chan struct{} // capacity 1: holding the lock = a value in ch
	refs int           // holders plus waiters, guarded by the shard mutex
}

func (k *keyedLocks) init() {
	k.seed = maphash.MakeSeed()
	for i := range k.shards {
		k.shards[i].m = make(map[string]*keyedLock)
	}
}

// lock acquires the lock for key, or returns ctx's error.
func (k *keyedLocks) lock(ctx context.Context, key []byte) (unlock func(), err error) {
	sh := &k.shards[maphash.Bytes(k.seed, key)%uint64(len(k.shards))]
	sk := string(key)
	sh.mu.Lock()
	l := sh.m[sk]
	if l == nil {
		l = &keyedLock{ch: make(chan struct{}, 1)}
		sh.m[sk] = l
	}
	l.refs++
	sh.mu.Unlock()

	release := func() {
		sh.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(sh.m, sk)
		}
		sh.mu.Unlock()
	}
	select {
	case l.ch <- struct{}{}:
		return func() { <-l.ch; release() }, nil
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
}

// size returns the number of live entries; for tests.
func (k *keyedLocks) size() int {
	n := 0
	for i := range k.shards {
		k.shards[i].mu.Lock()
		n += len(k.shards[i].m)
		k.shards[i].mu.Unlock()
	}
	return n
}
