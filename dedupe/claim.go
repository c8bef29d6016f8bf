package dedupe

import "hash/maphash"

// Claim atomically checks and marks id: it returns true if id was not seen
// within the retention window and is now marked, false if it was already
// seen. Of concurrent Claims of one ID exactly one returns true.
func (s *Store) Claim(id []byte) (first bool, err error) {
	if err := s.checkID(id); err != nil {
		return false, err
	}
	if err := s.enter(); err != nil {
		return false, err
	}
	defer s.closeMu.RUnlock()
	mu := &s.stripes[s.stripe(id)]
	mu.Lock()
	defer mu.Unlock()
	now := s.opts.Clock.Now()
	it, err := s.db.NewIter(&lookupOpts)
	if err != nil {
		return false, readErr(s.dir, err)
	}
	seen, err := s.seenIn(it, appendIndexPrefix(make([]byte, 0, 16+len(id)), id),
		s.win.minLive(now))
	if cerr := it.Close(); err == nil && cerr != nil {
		err = readErr(s.dir, cerr)
	}
	if err != nil || seen {
		return false, err
	}
	s.gate.RLock()
	defer s.gate.RUnlock()
	b := max(s.win.bucket(now), s.floor.Load())
	batch := s.db.NewBatch()
	defer batch.Close()
	s.addMarks(batch, [][]byte{id}, []int{0}, b)
	if err := s.commit(batch, now); err != nil {
		return false, err
	}
	return true, nil
}

// ClaimBatch claims ids in one pebble batch (one fsync with Options.Sync).
// first[i] reports whether ids[i] was claimed by this call; of duplicates
// within ids only the first occurrence can be first.
func (s *Store) ClaimBatch(ids [][]byte) (first []bool, err error) {
	if err := s.checkIDs(ids); err != nil {
		return nil, err
	}
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.closeMu.RUnlock()
	q := sortedPrefixes(ids)
	unlock := s.lockStripes(ids)
	defer unlock()
	now := s.opts.Clock.Now()
	minLive := s.win.minLive(now)
	first = make([]bool, len(ids))
	claimed := make([]int, 0, len(ids))
	it, err := s.db.NewIter(&lookupOpts)
	if err != nil {
		return nil, readErr(s.dir, err)
	}
	for j, i := range q.order {
		if j > 0 && q.dup(j) {
			continue
		}
		seen, err := s.seenIn(it, q.prefix(i), minLive)
		if err != nil {
			_ = it.Close()
			return nil, err
		}
		if !seen {
			first[i] = true
			claimed = append(claimed, i)
		}
	}
	if err := it.Close(); err != nil {
		return nil, readErr(s.dir, err)
	}
	if len(claimed) == 0 {
		return first, nil
	}
	s.gate.RLock()
	defer s.gate.RUnlock()
	b := max(s.win.bucket(now), s.floor.Load())
	batch := s.db.NewBatch()
	defer batch.Close()
	s.addMarks(batch, ids, claimed, b)
	if err := s.commit(batch, now); err != nil {
		return nil, err
	}
	return first, nil
}

func (s *Store) stripe(id []byte) int {
	return int(maphash.Bytes(s.seed, id) % numStripes)
}

// lockStripes locks the stripes of ids in ascending order, which keeps
// concurrent batches deadlock-free.
func (s *Store) lockStripes(ids [][]byte) (unlock func()) {
	var need [numStripes]bool
	for _, id := range ids {
		need[s.stripe(id)] = true
	}
	for i := range need {
		if need[i] {
			s.stripes[i].Lock()
		}
	}
	return func() {
		for i := range need {
			if need[i] {
				s.stripes[i].Unlock()
			}
		}
	}
}
