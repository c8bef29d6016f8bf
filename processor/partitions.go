package processor

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/offsetmeta"
	"github.com/onceflow/onceflow/processor/internal/sched"
)

// partitions is a lifetime's record path: the assigned partitions it has
// seen records of, from the fetch (intake) to their sessions (dispatch),
// back as finished work into the open transaction (drain and admission),
// with backpressure, stuck records, revokes and rewinds. The loop
// goroutine owns it; the commit path reads the partitions' commit points
// and moves them on commit (lifetime.takeCommit).
type partitions struct {
	cfg      *config
	pool     *sched.Pool[*item] // runs the records' handlers
	comps    *completionQueue   // finished records from the workers
	gen      *atomic.Uint64     // the source of partition generations
	counted  map[tp]int64       // per partition, the offset after the last record counted in Stats.Consumed
	stats    *counters
	m        *metrics // nil: off
	group    *groupEvents
	s        txnClient
	restores *restores

	all map[tp]*partition
	// keyspaces are the changelog-backed keyspaces every partition has a
	// part of (keyspace.go); empty without any.
	keyspaces []keyspace

	lane  [8]byte                 // the session key of an Unordered record (sessionKey)
	wakes []*sched.Session[*item] // dispatchAll's scratch space
	taken []*item                 // reused by drain
}

// get returns the state of an assigned partition, creating it from the
// committed offset and metadata fetched at assignment.
func (ps *partitions) get(topic string, id int32) *partition {
	k := tp{topic, id}
	if p := ps.all[k]; p != nil {
		return p
	}
	info, ok := ps.group.committed(k)
	if !ok {
		info.offset = -1
	}
	p := ps.newPartition(topic, id, info.offset, info.done)
	for _, k := range p.keyspaces {
		if spec, ok := k.restore(); ok {
			ps.restores.start(p, spec)
		}
	}
	ps.all[k] = p
	return p
}

// newPartition starts a partition's state from its committed offset and
// metadata, with its parts of the keyspaces.
func (ps *partitions) newPartition(topic string, id int32, committed int64, done []offsetmeta.Range) *partition {
	p := newPartition(topic, id, ps.gen.Add(1), committed, done)
	for _, ks := range ps.keyspaces {
		if k := ks.part(p); k != nil {
			p.keyspaces = append(p.keyspaces, k)
		}
	}
	return p
}

// rewound is the state that replaces prev on a rewind, started again from
// prev's last commit. What outlives a rewind is carried over: a restore in
// progress, the fetch state, and the keyspaces' parts without the aborted
// transaction's writes.
func (ps *partitions) rewound(prev *partition) *partition {
	p := newPartition(prev.topic, prev.id, ps.gen.Add(1), prev.committed, prev.committedDone)
	if len(prev.keyspaces) > 0 {
		p.keyspaces = make([]keyspacePart, len(prev.keyspaces))
		for i, k := range prev.keyspaces {
			p.keyspaces[i] = k.rewound()
		}
	}
	p.restore = prev.restore
	p.paused, p.pauseLogged, p.hwm = prev.paused, prev.pauseLogged, prev.hwm
	return p
}

// count is how many partitions the lifetime has: those assigned, or those
// it has seen records of if more (a revoke not yet handled).
func (ps *partitions) count() int { return max(ps.group.assignedCount(), len(ps.all)) }

// fetching counts, of n (count), the partitions whose fetching is not
// paused.
func (ps *partitions) fetching(n int) int {
	for _, p := range ps.all {
		if p.paused {
			n--
		}
	}
	return n
}

func (ps *partitions) buffered() int {
	n := 0
	for _, p := range ps.all {
		n += p.buffered()
	}
	return n
}

func (ps *partitions) unfinished() int {
	n := 0
	for _, p := range ps.all {
		n += p.unfinished() + len(p.held)
	}
	return n
}

// intake takes a poll's records into their partitions' queues, fetched at
// now, and dispatches what their windows allow.
func (ps *partitions) intake(fs kgo.Fetches, now time.Time) error {
	var consumed, skipped int64
	var err error
	fs.EachPartition(func(ftp kgo.FetchTopicPartition) {
		if len(ftp.Records) == 0 {
			if p := ps.all[tp{ftp.Topic, ftp.Partition}]; p != nil && ftp.Err == nil {
				p.hwm = max(p.hwm, ftp.HighWatermark)
			}
			return
		}
		p := ps.get(ftp.Topic, ftp.Partition)
		if ftp.Err == nil {
			p.hwm = max(p.hwm, ftp.HighWatermark)
		}
		// Counted once per run: a rewind or a reassignment fetches
		// records again, which Stats.Consumed does not count.
		k := tp{ftp.Topic, ftp.Partition}
		c, s := p.track(ftp.Records, now, ps.counted[k])
		ps.counted[k] = max(ps.counted[k], ftp.Records[len(ftp.Records)-1].Offset+1)
		consumed += c
		skipped += s
		if e := ps.dispatchWindow(p); e != nil && err == nil {
			err = e
		}
	})
	ps.stats.consumed.Add(consumed)
	ps.stats.skipped.Add(skipped)
	return err
}

// dispatchWindow hands a partition's next records to their sessions while
// fewer than the per-partition bound are out ahead of its lowest unfinished
// record. The window bounds the map of finished records in the commit
// metadata; records beyond it wait in offset order, and all of them wait
// while the partition restores. The partition's keyspaces screen records
// first: with WithDedupe, duplicates and records with invalid event IDs
// are finished without their handler, through the completion queue like
// the rest.
func (ps *partitions) dispatchWindow(p *partition) error {
	if !p.restore.open() {
		return nil
	}
	inFlight := len(p.pending) - len(p.undispatched)
	n := min(len(p.undispatched), ps.cfg.maxPartitionBuffer-inFlight)
	if n <= 0 {
		return nil
	}
	batch := p.undispatched[:n]
	for _, k := range p.keyspaces {
		if err := k.screen(batch); err != nil {
			return err
		}
	}
	run := batch[:0] // the items that run their handler, in order
	for i, it := range batch {
		batch[i] = nil
		if it.isDup() || it.dlq != nil { // screened out: done without its handler
			ps.comps.push(it)
			continue
		}
		run = append(run, it)
	}
	ps.wakes = ps.pool.DispatchAll(run, func(it *item) []byte { return ps.sessionKey(p, it) }, ps.wakes)
	clear(run)
	p.undispatched = p.undispatched[n:]
	return nil
}

func (ps *partitions) sessionKey(p *partition, it *item) []byte {
	switch ps.cfg.ordering {
	case OrderByPartition:
		return p.laneKey
	case Unordered:
		// The dispatcher copies a key it keeps, so one buffer serves.
		binary.BigEndian.PutUint64(ps.lane[:], uint64(it.rec.Offset%UnorderedLanes))
		return ps.lane[:]
	}
	if ps.cfg.sessionKey != nil {
		return ps.cfg.sessionKey(it.rec)
	}
	return it.rec.Key
}

// drain takes finished items and puts their outputs into the open
// transaction t, until t is at its budget; now is the loop step's time.
func (ps *partitions) drain(t *transaction, now time.Time) error {
	ps.taken = ps.comps.take(ps.taken)
	for i, it := range ps.taken {
		if t.full() {
			// The rest wait, in order and holding their buffer room
			// (polls take less), for the next transaction.
			ps.comps.requeue(ps.taken[i:])
			clear(ps.taken[i:])
			break
		}
		ps.taken[i] = nil
		p := it.part
		if it.gen != p.gen.Load() || it.stuck.Load() || it.done {
			continue // revoked, rewound or dead-lettered as stuck meanwhile
		}
		// Held completions go first, in order, so a session's outputs
		// keep their order. The lowest unfinished record is the
		// exception: nothing of its session waits before it, and
		// finishing it is what shrinks the metadata.
		if len(p.held) > 0 && p.pending[0] != it {
			p.held = append(p.held, it)
			continue
		}
		if err := ps.admit(t, p, it, now); err != nil {
			return err
		}
	}
	for _, p := range ps.all {
		if err := ps.admitHeld(t, p, now); err != nil {
			return err
		}
		if err := ps.dispatchWindow(p); err != nil {
			return err
		}
	}
	return nil
}

func (ps *partitions) admitHeld(t *transaction, p *partition, now time.Time) error {
	// The lowest unfinished record may wait behind others: take it first
	// (see drain), which makes room for the rest.
	if len(p.held) > 0 {
		p.measureMeta() // once per drain; admissions below only add to it
	}
	for len(p.held) > 0 {
		i := slices.Index(p.held, p.pending[0])
		if i < 0 {
			break
		}
		p.held = slices.Delete(p.held, i, i+1)
		if err := ps.admit(t, p, p.pending[0], now); err != nil {
			return err
		}
	}
	for len(p.held) > 0 {
		it := p.held[0]
		ok, err := ps.tryAdmit(t, p, it, now)
		if err != nil || !ok {
			return err
		}
		p.held[0] = nil
		p.held = p.held[1:]
	}
	return nil
}

func (ps *partitions) admit(t *transaction, p *partition, it *item, now time.Time) error {
	ok, err := ps.tryAdmit(t, p, it, now)
	if err == nil && !ok {
		p.held = append(p.held, it)
	}
	return err
}

// tryAdmit marks it finished and produces its records, unless the commit
// metadata would then outgrow the broker's limit: such an item waits.
func (ps *partitions) tryAdmit(t *transaction, p *partition, it *item, now time.Time) (bool, error) {
	if it.x != nil && it.x.storeErr != nil {
		r := it.rec
		return false, fmt.Errorf("processor: record %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, it.x.storeErr)
	}
	if it.dlq != nil && ps.cfg.dlq == "" {
		return false, noDLQError(it)
	}
	wasHead := p.pending[0] == it
	p.markDone(it)
	if wasHead {
		p.headSince = now
	} else if !p.metadataFits(ps.cfg.maxMetadataBytes) {
		p.unmarkDone(it)
		return false, nil
	}
	return true, ps.produce(t, p, it, it.outputs, it.dlq, false)
}

// produce puts what a finished record of p adds to t: its outputs, its
// dead-letter record, and its keyspaces' writes (stuck: see
// keyspacePart.produce).
func (ps *partitions) produce(t *transaction, p *partition, it *item, outputs []*kgo.Record, dlq *kgo.Record, stuck bool) error {
	if err := t.produce(outputs, dlq); err != nil {
		return err
	}
	t.holds(p)
	for _, k := range p.keyspaces {
		k.produce(t, it, stuck)
	}
	return nil
}

// checkStuck dead-letters, into t, a partition's lowest unfinished record
// once it has been the head longer than the stuck timeout at now.
func (ps *partitions) checkStuck(t *transaction, now time.Time) error {
	timeout := ps.cfg.stuckTimeout
	if timeout <= 0 {
		return nil
	}
	for _, p := range ps.all {
		for len(p.pending) > 0 && now.Sub(p.headSince) >= timeout {
			it := p.pending[0]
			markStuck(it)
			if it.sess != nil {
				it.sess.Cancel(it) // its handler, or its backoff
			}
			dlq := deadLetter(ps.cfg.dlq, it, reasonStuck, fmt.Errorf("unfinished after %v", now.Sub(p.headSince).Round(time.Millisecond)), 0, time.Time{})
			ps.cfg.logger.Error("record stuck; sending it to the dead-letter topic and moving on",
				"topic", p.topic, "partition", p.id, "offset", it.rec.Offset, "timeout", timeout)
			p.markDone(it)
			p.headSince = now
			if err := ps.produce(t, p, it, nil, dlq, true); err != nil {
				return err
			}
		}
	}
	return nil
}

// backpressure pauses fetching from a partition that takes more than its
// part of the total bound (a slow or stuck session holds its window while
// its queue grows), or whose completions wait for room in the commit
// metadata, and resumes it once its queue has drained to half the limit.
// Fetched records stay in their partition's queue, so nothing newer
// overtakes them. It reports whether it paused any.
//
// The total bound itself needs no pause: poll takes no more than the free
// room, and franz-go fetches no more from a broker while it holds a fetch
// of that broker's partitions not yet taken. Pausing is kept for isolation,
// and the limit is generous because it is not cheap: franz-go drops a
// paused partition's buffered fetch and fetches it again on resume.
// Pausing every partition at the total bound, and each one whenever a poll
// brought it more than a window, fetched the input two to three times over
// on a 3-node cluster. For the same reason one fetch of a partition is kept
// well under the limit (inputFetchBytes).
func (ps *partitions) backpressure() (paused bool) {
	limit := 2 * ps.queueShare(ps.count())
	var pause, resume map[string][]int32
	now := time.Now()
	for _, p := range ps.all {
		// Resumed at half the limit, not just under it: a resumed
		// partition's next fetch lands at once, and pausing again would
		// drop it.
		want := len(p.held) > 0 || len(p.undispatched) >= limit || p.paused && len(p.undispatched) > limit/2
		if want == p.paused {
			continue
		}
		p.paused = want
		paused = paused || want
		ps.logPause(p, now)
		m := &resume
		if want {
			m = &pause
		}
		if *m == nil {
			*m = make(map[string][]int32)
		}
		(*m)[p.topic] = append((*m)[p.topic], p.id)
	}
	if pause != nil {
		ps.s.PauseFetchPartitions(pause)
	}
	if resume != nil {
		ps.s.ResumeFetchPartitions(resume)
	}
	return paused
}

// inputFetchBytes is the transactional client's kgo.FetchMaxPartitionBytes
// (Java's max.partition.fetch.bytes). franz-go's default of 1MiB holds about
// 40,000 small compressed records, more than a partition's queue limit at
// six partitions: one fetch reached the limit, and the pause dropped the
// rest of it.
const inputFetchBytes = 256 << 10

// queueShare is what each other partition keeps of the total bound while
// one queues twice that (the backpressure limit): the total split among the
// assigned partitions and one more, and at least the per-partition bound.
// One poll takes at most this much, so that it cannot carry a partition
// from an empty queue past the limit. n is count.
func (ps *partitions) queueShare(n int) int {
	return max(ps.cfg.maxPartitionBuffer, ps.cfg.maxBuffer/(1+max(1, n)))
}

// pauseLogInterval rate-limits the Info logs of pauses and resumes per
// partition; the changes in between are logged at Debug.
const pauseLogInterval = 30 * time.Second

// logPause logs a change of p's fetch state: at Info at most once per
// pauseLogInterval per partition, else at Debug.
func (ps *partitions) logPause(p *partition, now time.Time) {
	level := slog.LevelDebug
	if now.Sub(p.pauseLogged) >= pauseLogInterval {
		level, p.pauseLogged = slog.LevelInfo, now
	}
	msg := "resumed fetching"
	if p.paused {
		msg = "paused fetching: buffer or commit metadata full"
	}
	var oldest int64 = -1
	if len(p.pending) > 0 {
		oldest = p.pending[0].rec.Offset
	}
	ps.cfg.logger.Log(context.Background(), level, msg, "topic", p.topic, "partition", p.id,
		"offset", p.next, "oldest_unfinished", oldest, "buffered", p.buffered(), "held", len(p.held))
}

// takeRestored dispatches the records of partitions whose restores
// finished. A result is matched to the partition by its gate: a rewind
// replaces the partition but keeps waiting on the same gate; a revoke
// drops it.
func (ps *partitions) takeRestored() error {
	for {
		select {
		case r := <-ps.restores.results:
			ps.restores.finished(r)
			if r.err == nil {
				r.spec.stat.Add(int64(r.st.Records))
				ps.cfg.logger.Info(r.spec.kind+" restored", "topic", r.p.topic, "partition", r.p.id, "records", r.st.Records,
					"rebuilt", r.st.Rebuilt, "took", r.st.Took, "per_second", int(float64(r.st.Records)/max(r.st.Took.Seconds(), 1e-9)))
			}
			cur := ps.all[tp{r.p.topic, r.p.id}]
			if cur == nil || cur.restore != r.gate {
				continue // revoked meanwhile: its canceled restore's error does not matter
			}
			if r.err != nil {
				return fmt.Errorf("processor: restoring %s of %s/%d: %w", r.spec.kind, r.p.topic, r.p.id, r.err)
			}
			if r.gate.pending--; !r.gate.open() {
				continue
			}
			if err := ps.dispatchWindow(cur); err != nil {
				return err
			}
		default:
			return nil
		}
	}
}

// revoke drops the revoked partitions: their dispatched items go stale,
// their restores stop, their gauges go, and the client resumes those it
// had paused (franz-go keeps a paused partition paused across a
// reassignment).
func (ps *partitions) revoke(revoked []tp) {
	resume := make(map[string][]int32)
	for _, k := range revoked {
		ps.cfg.logger.Debug("revoked", "partition", k.partition)
		ps.m.unpublish(k)
		ps.restores.cancel(k)
		if p := ps.all[k]; p != nil {
			p.gen.Store(0)
			delete(ps.all, k)
			if p.paused {
				resume[k.topic] = append(resume[k.topic], k.partition)
			}
		}
	}
	if len(resume) > 0 {
		ps.s.ResumeFetchPartitions(resume)
	}
}

// rewindUntracked rewinds the consumer's assigned partitions that the loop
// does not track to their committed offsets. A poll may have returned
// records of a partition assigned again (after a loss) into its old state,
// which the revoke then dropped: the consumer's position is past them, and
// without the rewind the new state would start after them, losing them.
// Partitions the loop tracks keep their positions.
func (ps *partitions) rewindUntracked() {
	var untracked map[string][]int32
	for _, k := range ps.group.assignedList() {
		if _, ok := ps.all[k]; ok {
			continue
		}
		if untracked == nil {
			untracked = make(map[string][]int32)
		}
		untracked[k.topic] = append(untracked[k.topic], k.partition)
	}
	if untracked != nil {
		ps.s.RewindPartitions(untracked)
	}
}

// rewindAll drops everything after the last commit: the transaction was
// aborted and the consumer rewound, so every partition starts again from
// its committed state.
func (ps *partitions) rewindAll() {
	var redo int64
	for k, p := range ps.all {
		ps.cfg.logger.Debug("rewind", "partition", k.partition, "to", p.committed, "done", p.committedDone, "next_was", p.next)
		redo += int64(p.doneSinceCommit + len(p.held))
		np := ps.rewound(p)
		p.gen.Store(0)
		ps.all[k] = np
	}
	ps.stats.reprocessed.Add(redo)
}

// staleAll makes every dispatched item of the lifetime stale.
func (ps *partitions) staleAll() {
	for _, p := range ps.all {
		p.gen.Store(0)
	}
}

// completionQueue hands finished items from the workers back to the loop.
//
// Workers push onto a lock-free stack (one compare-and-swap a record, no
// lock that the loop and the workers take turns at), which the loop takes
// whole and reverses: a session's items, pushed one after the other, come
// out in their order.
type completionQueue struct {
	top atomic.Pointer[item] // the latest pushed; linked by item.nextDone
	_   [56]byte             // the workers' line: keep the loop's fields off it

	carry []*item // taken but put back (requeue): the loop's, taken first
	// wake is signaled after each push, for a loop waiting on in-flight
	// records (waitInFlight).
	wake chan struct{}
	// pollWake, when set, interrupts the loop's poll so that completions
	// are taken, and paused partitions resumed, at once.
	pollWake atomic.Pointer[context.CancelFunc]
}

func newCompletionQueue() *completionQueue {
	return &completionQueue{wake: make(chan struct{}, 1)}
}

// push hands a finished item back to the loop.
func (q *completionQueue) push(it *item) {
	for {
		old := q.top.Load()
		it.nextDone = old
		if q.top.CompareAndSwap(old, it) {
			break
		}
	}
	// A wake already pending will be taken before the items are, so it
	// covers this one: no channel operation per record.
	if len(q.wake) == 0 {
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
	q.wakePoll()
}

// notify wakes the loop wherever it waits, for news other than
// completions (a transaction's end, its gate).
func (q *completionQueue) notify() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
	q.wakePoll()
}

// wakePoll interrupts the loop's poll, if it is polling. The first caller
// takes the wake, so a burst of completions cancels the poll once; the
// others only read it (a swap each would write the line every core reads).
func (q *completionQueue) wakePoll() {
	if q.pollWake.Load() == nil {
		return
	}
	if wake := q.pollWake.Swap(nil); wake != nil {
		(*wake)()
	}
}

// pending reports whether there are items to take. The loop's.
func (q *completionQueue) pending() bool { return len(q.carry) > 0 || q.top.Load() != nil }

// take returns what was put back and what was pushed, in order, in into's
// array. The loop's.
func (q *completionQueue) take(into []*item) []*item {
	into = append(into[:0], q.carry...)
	clear(q.carry)
	q.carry = q.carry[:0]
	n := len(into)
	for it := q.top.Swap(nil); it != nil; {
		next := it.nextDone
		it.nextDone = nil
		into = append(into, it)
		it = next
	}
	slices.Reverse(into[n:])
	return into
}

// requeue puts items taken but not handled back, before any pushed since:
// they keep their order. The loop's.
func (q *completionQueue) requeue(items []*item) { q.carry = append(q.carry, items...) }
