package dedupe

import (
	"bytes"
	"encoding/binary"
	"sync"
	"sync/atomic"
)

// The stage holds marks whose expiry-log entry is committed but whose index
// keys are not written yet. Writers commit only the log entry (one key per
// batch, appended at the end of the log range) and stage the IDs; an
// indexing round later writes the index keys of a whole generation as one
// sorted batch, large enough that pebble turns it into a flushable batch
// instead of inserting each key into the memtable skiplist. Lookups consult
// the stage before pebble. See index.go for the rounds and recovery.

// stageGen is one generation of staged marks: an exact set of IDs with the
// newest bucket each was marked in. The active generation takes adds (under
// Store.gate shared) and lookups; a sealed one is read-only.
type stageGen struct {
	mu   sync.RWMutex
	buf  []byte       // ID bytes
	ents []stageEnt   // in order of first mark
	tab  []stageSlot  // open addressing by hash, len a power of two
	n    atomic.Int64 // len(ents) plus len(buf)/stageIDBytes, for limits
}

// stageIDBytes is the ID size a generation limit assumes; longer IDs count
// as several entries, which bounds a generation's bytes too.
const stageIDBytes = 64

type stageEnt struct {
	h, b uint64
	off  uint32
	n    uint32
}

// stageSlot is 0 (empty) or the position of an entry plus one in the low
// half and the entry's hash in the high half, so most probes of other IDs
// end without touching the entry.
type stageSlot uint64

func newStageGen(hint int) *stageGen {
	return &stageGen{
		buf:  make([]byte, 0, hint*16),
		ents: make([]stageEnt, 0, hint),
		tab:  make([]stageSlot, tableSize(hint)),
	}
}

// tableSize returns a power of two at least twice n.
func tableSize(n int) int {
	size := 16
	for size < 2*n {
		size *= 2
	}
	return size
}

func (g *stageGen) id(e *stageEnt) []byte { return g.buf[e.off : e.off+e.n : e.off+e.n] }

// find returns the slot of id: either the one holding it (found) or the
// empty slot where it belongs. The caller holds g.mu.
func (g *stageGen) find(id []byte, h uint64) (slot int, found bool) {
	mask := len(g.tab) - 1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		sl := g.tab[i]
		if sl == 0 {
			return i, false
		}
		if uint32(sl>>32) == uint32(h>>32) {
			if e := &g.ents[uint32(sl)-1]; e.h == h && bytes.Equal(g.id(e), id) {
				return i, true
			}
		}
	}
}

// add stages the IDs q.ids[list[...]] in bucket b.
func (g *stageGen) add(q *idBatch, list []int, b uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if need := len(g.ents) + len(list); 2*need > len(g.tab) {
		g.grow(need)
	}
	for _, i := range list {
		id, h := q.ids[i], q.hash[i]
		slot, found := g.find(id, h)
		if found {
			e := &g.ents[uint32(g.tab[slot])-1]
			e.b = max(e.b, b)
			continue
		}
		g.ents = append(g.ents, stageEnt{h: h, b: b, off: uint32(len(g.buf)), n: uint32(len(id))})
		g.buf = append(g.buf, id...)
		g.tab[slot] = stageSlot(h>>32<<32 | uint64(len(g.ents)))
	}
	g.n.Store(int64(len(g.ents) + len(g.buf)/stageIDBytes))
}

// grow rehashes the table for at least n entries.
func (g *stageGen) grow(n int) {
	tab := make([]stageSlot, tableSize(n))
	mask := len(tab) - 1
	for j := range g.ents {
		h := g.ents[j].h
		i := int(h) & mask
		for tab[i] != 0 {
			i = (i + 1) & mask
		}
		tab[i] = stageSlot(h>>32<<32 | uint64(j+1))
	}
	g.tab = tab
}

// contains reports whether id is staged in a bucket >= minLive.
func (g *stageGen) contains(id []byte, h, minLive uint64) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	slot, found := g.find(id, h)
	return found && g.ents[uint32(g.tab[slot])-1].b >= minLive
}

// stageGens is the pair of generations lookups consult. It is replaced as
// a whole, so a lookup sees a consistent pair.
type stageGens struct {
	active, sealed *stageGen
}

// stage is the staging area of a store.
type stage struct {
	cur   atomic.Pointer[stageGens]
	limit int // active generation size that starts a round

	mu      sync.Mutex
	cond    sync.Cond // signalled when a round releases its generation
	running bool      // a sealed generation is being indexed
	kickCh  chan struct{}
}

func newStage(limit int) *stage {
	st := &stage{limit: limit, kickCh: make(chan struct{}, 1)}
	st.cond.L = &st.mu
	st.cur.Store(&stageGens{active: newStageGen(64)})
	return st
}

// gens returns the generations to consult. Load them before opening the
// pebble iterator that backs them up: a generation is released only after
// its index keys are visible to iterators opened later.
func (st *stage) gens() *stageGens { return st.cur.Load() }

func (gs *stageGens) contains(id []byte, h, minLive uint64) bool {
	return gs.active.contains(id, h, minLive) ||
		(gs.sealed != nil && gs.sealed.contains(id, h, minLive))
}

// add stages marks and starts a round when the active generation is full.
// The caller holds Store.gate shared.
func (st *stage) add(q *idBatch, list []int, b uint64) {
	g := st.cur.Load().active
	g.add(q, list, b)
	if g.n.Load() >= int64(st.limit) {
		select {
		case st.kickCh <- struct{}{}:
		default:
		}
	}
}

// waitRoom blocks a writer while the active generation is twice its limit
// and a round is still indexing the previous one, bounding the stage's
// memory when writers outpace indexing. Writers call it holding no locks.
func (st *stage) waitRoom() {
	if st.cur.Load().active.n.Load() < 2*int64(st.limit) {
		return
	}
	st.mu.Lock()
	for st.running && st.cur.Load().active.n.Load() >= 2*int64(st.limit) {
		st.cond.Wait()
	}
	st.mu.Unlock()
}

// seal makes the active generation the sealed one and starts a new active
// generation. It returns nil if there is nothing to index. The caller holds
// Store.gate exclusively, so no writer is adding, and serialises rounds.
func (st *stage) seal() *stageGen {
	gs := st.cur.Load()
	if len(gs.active.ents) == 0 {
		return nil
	}
	// Size the next generation like this one: under steady load they fill
	// alike, and a small one after a quiet spell stays small.
	hint := min(st.limit, len(gs.active.ents))
	st.cur.Store(&stageGens{active: newStageGen(hint), sealed: gs.active})
	return gs.active
}

// begin marks a round as running, so writers wait for room.
func (st *stage) begin() {
	st.mu.Lock()
	st.running = true
	st.mu.Unlock()
}

// release drops the sealed generation once its index keys are committed.
func (st *stage) release() {
	gs := st.cur.Load()
	st.cur.Store(&stageGens{active: gs.active})
	st.endRound()
}

// endRound wakes writers waiting for room, whether the round succeeded or
// not (a failed round keeps its generation sealed and is retried).
func (st *stage) endRound() {
	st.mu.Lock()
	st.running = false
	st.cond.Broadcast()
	st.mu.Unlock()
}

// indexHead returns the first 8 bytes of the index prefix of id,
// zero-padded, as a big-endian number, without building the prefix. Heads
// order like index keys, with ties between IDs that share their length and
// first bytes.
func indexHead(id []byte) uint64 {
	var b [8 + binary.MaxVarintLen64]byte
	b[0] = tagIndex
	n := 1 + binary.PutUvarint(b[1:], uint64(len(id)))
	copy(b[n:8], id)
	return binary.BigEndian.Uint64(b[:8])
}
