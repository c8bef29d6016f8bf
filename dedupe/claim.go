package dedupe

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
	ids := [1][]byte{id}
	q := s.newIDBatch(ids[:])
	h := q.hash[0]
	mu := &s.stripes[stripe(h)]
	mu.Lock()
	defer mu.Unlock()
	now := s.opts.Clock.Now()
	seen, err := s.seen(id, h, s.win.minLive(now))
	if err != nil || seen {
		return false, err
	}
	if err := s.writeMarks(q, q.uniq, s.win.bucket(now), now); err != nil {
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
	q := s.newIDBatch(ids)
	unlock := s.lockStripes(q.hash)
	defer unlock()
	now := s.opts.Clock.Now()
	first = make([]bool, len(ids))
	if err := s.lookupAll(q, s.win.minLive(now), first); err != nil {
		return nil, err
	}
	// first holds "seen" for the first occurrences; turn it into "claimed"
	// and collect the IDs to mark.
	claimed := make([]int, 0, len(q.uniq))
	for _, i := range q.uniq {
		if first[i] = !first[i]; first[i] {
			claimed = append(claimed, i)
		}
	}
	if len(claimed) == 0 {
		return first, nil
	}
	if err := s.writeMarks(q, claimed, s.win.bucket(now), now); err != nil {
		return nil, err
	}
	return first, nil
}

func stripe(h uint64) int { return int(h % numStripes) }

// lockStripes locks the stripes of the IDs with hashes hs in ascending
// order, which keeps concurrent batches deadlock-free.
func (s *Store) lockStripes(hs []uint64) (unlock func()) {
	var need [numStripes]bool
	for _, h := range hs {
		need[stripe(h)] = true
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
