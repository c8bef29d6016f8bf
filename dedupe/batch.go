package dedupe

import (
	"bytes"
	"slices"
)

// idBatch is the IDs of one call with their hashes and duplicates
// resolved. Nothing is sorted on the hot path: the filter, the stage and
// the expiry log need no order, and only the IDs that reach pebble are
// sorted, for a forward-moving iterator.
type idBatch struct {
	ids  [][]byte
	hash []uint64
	uniq []int // positions of first occurrences, ascending
	// first maps each position to the position of its first occurrence;
	// nil if ids has no duplicates.
	first []int32
}

func (s *Store) newIDBatch(ids [][]byte) *idBatch {
	q := &idBatch{ids: ids, hash: make([]uint64, len(ids)), uniq: make([]int, 0, len(ids))}
	for i, id := range ids {
		q.hash[i] = s.hash(id)
	}
	if len(ids) < 2 {
		q.uniq = append(q.uniq, 0)[:len(ids)]
		return q
	}
	// Open addressing on the hash: slot holds position+1 of a first
	// occurrence.
	tab := make([]int32, tableSize(len(ids)))
	mask := len(tab) - 1
	for i, id := range ids {
		h := q.hash[i]
		j := int(h) & mask
		for ; tab[j] != 0; j = (j + 1) & mask {
			k := int(tab[j] - 1)
			if q.hash[k] == h && bytes.Equal(ids[k], id) {
				if q.first == nil {
					q.first = make([]int32, len(ids))
					for x := range i {
						q.first[x] = int32(x)
					}
				}
				q.first[i] = int32(k)
				break
			}
		}
		if tab[j] == 0 {
			tab[j] = int32(i + 1)
			q.uniq = append(q.uniq, i)
			if q.first != nil {
				q.first[i] = int32(i)
			}
		}
	}
	return q
}

// lookupAll sets seen[i] for each first occurrence i of q that is marked in
// a bucket >= minLive: the filter rules out most unmarked IDs, the stage
// answers for recent marks, and the rest are looked up in pebble in key
// order with one iterator. The stage generations are loaded before the
// iterator is opened (see stage.gens).
func (s *Store) lookupAll(q *idBatch, minLive uint64, seen []bool) error {
	gens := s.stage.gens()
	var pend []int
	for _, i := range q.uniq {
		h := q.hash[i]
		switch {
		case !s.mayContain(h, minLive):
		case gens.contains(q.ids[i], h, minLive):
			seen[i] = true
		default:
			pend = append(pend, i)
		}
	}
	if len(pend) == 0 {
		return nil
	}
	n := 0
	for _, i := range pend {
		n += len(q.ids[i]) + 4
	}
	buf := make([]byte, 0, n)
	off := make([]int, len(q.ids)+1)
	for _, i := range pend {
		off[i] = len(buf)
		buf = appendIndexPrefix(buf, q.ids[i])
		off[i+1] = len(buf)
	}
	prefix := func(i int) []byte { return buf[off[i]:off[i+1]:off[i+1]] }
	slices.SortFunc(pend, func(a, b int) int { return bytes.Compare(prefix(a), prefix(b)) })
	it, err := s.db.NewIter(&lookupOpts)
	if err != nil {
		return readErr(s.dir, err)
	}
	for _, i := range pend {
		if seen[i], err = s.seenIn(it, prefix(i), minLive); err != nil {
			break
		}
	}
	if cerr := it.Close(); err == nil && cerr != nil {
		err = readErr(s.dir, cerr)
	}
	return err
}
