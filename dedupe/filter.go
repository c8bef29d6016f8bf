package dedupe

import (
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
)

// The in-memory filter answers "definitely not marked" for most new IDs
// without touching pebble, so a Claim of a fresh ID costs only its write. It
// never answers "not marked" for a mark that is inside the window:
//
//   - Writers add an ID's hash while holding Store.gate shared, before the
//     batch that marks it commits (and, for Claim, before its stripe is
//     released). A failed commit leaves a harmless extra entry.
//   - Marks are grouped into epochs of filterEpochBuckets buckets, one filter
//     each. A lookup probes the epochs that reach into the window; an epoch
//     whose filter is not built yet (after Open, or while it is rebuilt at a
//     larger size) answers "maybe", and the caller reads pebble.
//   - Filters are built from the expiry log, which names every index key
//     of its bucket (both are written in one batch). A build registers a
//     pending list and opens its iterator with the gate held exclusively,
//     so every mark is either visible to the iterator or recorded in the
//     list, which is folded in, again under the gate, before the new filter
//     is published.
//   - Expiry drops the filters of epochs that lie wholly below the floor,
//     whose marks already read as unseen.
//
// Forget leaves the filter alone (it only over-approximates).

// filterBitsPerID is the filter size per ID at its design capacity; a
// filter is rebuilt at twice the size once it holds more IDs. At 16 bits the
// false-positive rate is about 0.1%; just after a rebuild it is far lower.
const (
	filterBitsPerID = 16
	filterMinIDs    = 1 << 17
	blockWords      = 8 // one 64-byte cache line per block
)

// blockedBloom is a split-block bloom filter: an ID selects one 64-byte
// block and sets one bit in each of its eight words, so a probe touches one
// cache line. Words are accessed atomically: lookups run concurrently with
// adds.
type blockedBloom struct {
	words   []uint64
	nblocks uint64
}

// salts pick the bit in each word (from the Parquet split-block filter).
var salts = [blockWords]uint32{
	0x47b6137b, 0x44974d91, 0x8824ad5b, 0xa2b7289d,
	0x705495c7, 0x2df1424b, 0x9efc4947, 0x5c6bfb31,
}

func newBlockedBloom(ids int) *blockedBloom {
	nb := max(1, (ids*filterBitsPerID+511)/512)
	return &blockedBloom{words: make([]uint64, nb*blockWords), nblocks: uint64(nb)}
}

// capacity is the number of IDs the filter is sized for.
func (f *blockedBloom) capacity() int64 { return int64(f.nblocks) * 512 / filterBitsPerID }

func (f *blockedBloom) block(h uint64) *[blockWords]uint64 {
	i, _ := bits.Mul64(h, f.nblocks)
	return (*[blockWords]uint64)(f.words[i*blockWords:])
}

func (f *blockedBloom) add(h uint64) {
	b, x := f.block(h), uint32(h)
	for i := range blockWords {
		m := uint64(1) << ((x * salts[i]) >> 26)
		if atomic.LoadUint64(&b[i])&m == 0 {
			atomic.OrUint64(&b[i], m)
		}
	}
}

func (f *blockedBloom) has(h uint64) bool {
	b, x := f.block(h), uint32(h)
	for i := range blockWords {
		if atomic.LoadUint64(&b[i])&(uint64(1)<<((x*salts[i])>>26)) == 0 {
			return false
		}
	}
	return true
}

// filterEpochs is the number of epochs the retention window is divided
// into: a lookup probes about this many filters, and a filter outlives its
// last live mark by at most TTL/filterEpochs.
const filterEpochs = 8

// epochFilter is the filter of the marks in one epoch.
type epochFilter struct {
	epoch uint64
	cur   atomic.Pointer[blockedBloom] // nil until built: callers read pebble
	n     atomic.Int64                 // IDs added since cur was sized
	// queued is set while a build of this epoch is pending or running.
	queued atomic.Bool
	// pending collects the hashes added during a build. It is set and
	// cleared with Store.gate held exclusively and read with it shared.
	pending *pendingHashes
}

type pendingHashes struct {
	mu sync.Mutex
	hs []uint64
}

// filterSet holds the epoch filters of a store.
type filterSet struct {
	k      uint64 // buckets per epoch
	minIDs int    // smallest filter capacity
	mu     sync.Mutex
	eps    atomic.Pointer[[]*epochFilter] // ascending by epoch; copy on write
	high   uint64                         // if hasOld, epochs <= high may hold marks from before Open
	hasOld bool
	work   chan struct{} // wakes the builder
}

func newFilterSet(win window, minIDs int) *filterSet {
	buckets := uint64(win.ttl/win.width) + 1
	f := &filterSet{
		minIDs: minIDs,
		k:      max(1, (buckets+filterEpochs-1)/filterEpochs),
		work:   make(chan struct{}, 1),
	}
	f.eps.Store(&[]*epochFilter{})
	return f
}

// mayContain reports whether h may have been marked in a bucket >= minLive.
func (f *filterSet) mayContain(h, minLive uint64) bool {
	lo := minLive / f.k
	for _, ep := range *f.eps.Load() {
		if ep.epoch < lo {
			continue
		}
		if b := ep.cur.Load(); b == nil || b.has(h) {
			return true
		}
	}
	return false
}

// add records the hashes hs[list[...]] as marked in bucket b. The caller
// holds Store.gate shared and commits the marks afterwards.
func (f *filterSet) add(hs []uint64, list []int, b uint64) {
	ep := f.epochFor(b / f.k)
	cur := ep.cur.Load()
	if cur != nil {
		for _, i := range list {
			cur.add(hs[i])
		}
	}
	if p := ep.pending; p != nil {
		p.mu.Lock()
		for _, i := range list {
			p.hs = append(p.hs, hs[i])
		}
		p.mu.Unlock()
	}
	n := ep.n.Add(int64(len(list)))
	if cur != nil && n > cur.capacity() && ep.queued.CompareAndSwap(false, true) {
		f.kick()
	}
}

func (f *filterSet) kick() {
	select {
	case f.work <- struct{}{}:
	default:
	}
}

func (f *filterSet) epochFor(e uint64) *epochFilter {
	eps := *f.eps.Load()
	for i := len(eps) - 1; i >= 0; i-- {
		if eps[i].epoch == e {
			return eps[i]
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	eps = *f.eps.Load()
	i, found := slices.BinarySearchFunc(eps, e, func(ep *epochFilter, e uint64) int {
		return cmpUint64(ep.epoch, e)
	})
	if found {
		return eps[i]
	}
	ep := &epochFilter{epoch: e}
	if f.hasOld && e <= f.high {
		// The store may hold marks of this epoch from before Open: build
		// the filter from the log; until then lookups read pebble.
		ep.queued.Store(true)
		f.kick()
	} else {
		// A new epoch: size it like its predecessor, which usually saves
		// the rebuilds of growing from the minimum.
		hint := int64(f.minIDs)
		if i > 0 {
			hint = max(hint, eps[i-1].n.Load())
		}
		ep.cur.Store(newBlockedBloom(int(hint)))
	}
	f.eps.Store(ptr(slices.Insert(slices.Clone(eps), i, ep)))
	return ep
}

// addUnbuilt registers epochs lo..hi as holding marks from before Open.
func (f *filterSet) addUnbuilt(lo, hi uint64) {
	f.mu.Lock()
	f.high, f.hasOld = hi, true
	f.mu.Unlock()
	for e := lo; ; e++ { // not e <= hi: hi may be the largest uint64
		f.epochFor(e)
		if e == hi {
			break
		}
	}
}

// dropBelow forgets the filters of epochs wholly below bucket floor.
func (f *filterSet) dropBelow(floor uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	eps := *f.eps.Load()
	n := 0
	for n < len(eps) && (eps[n].epoch+1)*f.k <= floor {
		n++
	}
	if n > 0 {
		f.eps.Store(ptr(slices.Clone(eps[n:])))
	}
}

// queued returns the epochs waiting for a build, newest first.
func (f *filterSet) queued() []*epochFilter {
	var out []*epochFilter
	eps := *f.eps.Load()
	for i := len(eps) - 1; i >= 0; i-- {
		if eps[i].queued.Load() {
			out = append(out, eps[i])
		}
	}
	return out
}

// memory returns the bytes held by built filters.
func (f *filterSet) memory() int64 {
	var n int64
	for _, ep := range *f.eps.Load() {
		if b := ep.cur.Load(); b != nil {
			n += int64(len(b.words)) * 8
		}
	}
	return n
}

func cmpUint64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func ptr[T any](v T) *T { return &v }
