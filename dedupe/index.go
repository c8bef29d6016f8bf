package dedupe

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// Indexing rounds and their recovery.
//
// A round seals the active generation with Store.gate held exclusively and
// records w, the last expiry-log sequence number handed out: every log
// entry with a sequence number <= w is then staged in this or an earlier
// generation (writers take their number, commit and stage while holding
// the gate shared). The round writes the index keys of the generation, in
// key order, together with indexedKey = w in one batch, then releases the
// generation. Marks in buckets below the floor are skipped: they are
// expired, and expiry may already have read their log entries.
//
// The batch needs no fsync: the marks are durable in the log. After a
// crash, Open stages the log entries with sequence numbers above indexedKey
// again (one seek per live bucket finds them, as sequence numbers grow
// within a bucket) and indexes them before returning.
//
// Forget runs a round first, so that a forgotten mark is never re-indexed
// from the log, and Close runs one so the next Open has little to redo.

// indexedKey holds the indexing watermark. It sorts right after the index
// range, so the sstables of index batches, which rewrite it, span only
// index keys plus this one and never overlap the expiry log's.
var indexedKey = []byte{tagIndex + 1}

// stageLimit is the active generation size that starts a round. Its index
// batch is well above half a default memtable in pebble's accounting, so it
// is committed as a flushable batch: sorted once, never inserted key by key.
const stageLimit = 1 << 17

// indexLoop runs rounds when the active generation fills up.
func (s *Store) indexLoop(ctx context.Context) {
	defer s.bg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.stage.kickCh:
		}
		if err := s.indexRound(); err != nil && ctx.Err() == nil {
			s.log.Warn("dedupe: writing staged index keys failed; will retry", "dir", s.dir, "err", err)
		}
	}
}

// indexRound writes the index keys of the sealed generation (sealing the
// active one first if none is pending) and releases it.
func (s *Store) indexRound() error {
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	s.gate.Lock()
	g := s.stage.gens().sealed // left over from a failed round
	if g == nil {
		if g = s.stage.seal(); g != nil {
			s.sealedW = s.seq.Load()
		}
	}
	s.gate.Unlock()
	if g == nil {
		return nil
	}
	s.stage.begin()
	if err := s.writeIndex(g, s.sealedW); err != nil {
		s.stage.endRound()
		return err
	}
	s.stage.release()
	return nil
}

func (s *Store) writeIndex(g *stageGen, w uint64) error {
	ents := make([]headEnt, len(g.ents))
	size := 64
	for i := range g.ents {
		e := &g.ents[i]
		ents[i] = headEnt{indexHead(g.id(e)), int32(i)}
		size += int(e.n) + 2*suffixLen + 4
	}
	ents = sortHeads(ents, make([]headEnt, len(ents)))
	// Equal heads imply equal ID lengths, so IDs order runs of equal heads.
	for i := 0; i < len(ents); {
		j := i + 1
		for j < len(ents) && ents[j].head == ents[i].head {
			j++
		}
		if j-i > 1 {
			slices.SortFunc(ents[i:j], func(a, b headEnt) int {
				return bytes.Compare(g.id(&g.ents[a.i]), g.id(&g.ents[b.i]))
			})
		}
		i = j
	}
	s.gate.RLock()
	defer s.gate.RUnlock()
	floor := s.floor.Load()
	batch := s.db.NewBatchWithSize(size)
	defer batch.Close()
	var key []byte
	for _, x := range ents {
		e := &g.ents[x.i]
		if e.b < floor {
			continue
		}
		key = appendIndexKey(key[:0], g.id(e), e.b)
		_ = batch.Set(key, nil, nil)
	}
	_ = batch.Set(indexedKey, binary.BigEndian.AppendUint64(key[:0], w), nil)
	if err := s.commit(batch, syncSoon); err != nil {
		return err
	}
	return nil
}

// recoverIndex stages the marks of log entries above the indexing
// watermark, in live buckets, and indexes them. It runs in Open, before
// the store is shared.
func (s *Store) recoverIndex() error {
	var w uint64
	v, closer, err := s.db.Get(indexedKey)
	switch {
	case err == nil:
		ok := len(v) == 8
		if ok {
			w = binary.BigEndian.Uint64(v)
		}
		_ = closer.Close()
		if !ok {
			return &CorruptError{Dir: s.dir, Reason: "malformed index watermark"}
		}
	case !errors.Is(err, pebble.ErrNotFound):
		return readErr(s.dir, err)
	}
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: []byte{tagLog}, UpperBound: []byte{tagLog + 1},
	})
	if err != nil {
		return readErr(s.dir, err)
	}
	g := s.stage.gens().active
	var key []byte
	q := &idBatch{ids: make([][]byte, 1), hash: make([]uint64, 1), uniq: []int{0}}
	ok := it.SeekGE(appendLogKey(key[:0], s.win.minLive(s.opts.Clock.Now()), w+1))
	for ok {
		b, seq, valid := decodeLogKeySeq(it.Key())
		if !valid {
			_ = it.Close()
			return &CorruptError{Dir: s.dir, Reason: "malformed expiry log key"}
		}
		if seq <= w {
			// Indexed entries of bucket b; skip to its unindexed tail.
			ok = it.SeekGE(appendLogKey(key[:0], b, w+1))
			continue
		}
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return readErr(s.dir, err)
		}
		if !decodeLogValue(v, func(id []byte) {
			q.ids[0] = bytes.Clone(id)
			q.hash[0] = s.hash(id)
			g.add(q, q.uniq, b)
		}) {
			_ = it.Close()
			return &CorruptError{Dir: s.dir, Reason: "malformed expiry log entry"}
		}
		ok = it.Next()
	}
	err = it.Error()
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return readErr(s.dir, err)
	}
	return s.indexRound()
}

// decodeLogKeySeq returns the bucket and sequence number of a log key.
func decodeLogKeySeq(k []byte) (b, seq uint64, ok bool) {
	b, ok = decodeLogKey(k)
	if !ok {
		return 0, 0, false
	}
	return b, binary.BigEndian.Uint64(k[1+suffixLen:]), true
}

// headEnt is a staged entry with the head of its index key.
type headEnt struct {
	head uint64
	i    int32
}

// sortHeads sorts ents by head with an LSD radix sort over bytes, skipping
// byte positions that are equal in every head (the tag, usually the length),
// and returns the sorted slice: ents or tmp, which must be as long.
func sortHeads(ents, tmp []headEnt) []headEnt {
	if len(ents) < 2 {
		return ents
	}
	var counts [8][256]int
	for _, e := range ents {
		for d := range 8 {
			counts[d][byte(e.head>>(8*d))]++
		}
	}
	src, dst := ents, tmp
	for d := range 8 {
		c := &counts[d]
		if c[byte(src[0].head>>(8*d))] == len(src) {
			continue
		}
		sum := 0
		for v, n := range c {
			c[v] = sum
			sum += n
		}
		for _, e := range src {
			v := byte(e.head >> (8 * d))
			dst[c[v]] = e
			c[v]++
		}
		src, dst = dst, src
	}
	return src
}
