package processor

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"

	"github.com/onceflow/onceflow/internal/offsetmeta"
	"github.com/onceflow/onceflow/processor/internal/sched"
	"github.com/onceflow/onceflow/statestore"
)

// tp names a topic partition.
type tp struct {
	topic     string
	partition int32
}

// item is one fetched record on its way through a session.
//
// Fields are owned by one goroutine at a time: the loop until dispatch and
// after the completion queue hands the item back; the worker running its
// session in between. stuck is the one field both touch.
//
// Every fetched record is one, so it holds only what every record uses;
// what retries, state, tracing and dedupe need is in x, allocated by the
// first of them that needs it (the item slab was about 220 bytes a record
// and the largest part of the processor's garbage).
type item struct {
	rec  *kgo.Record
	part *partition
	gen  uint64 // part.gen at dispatch; a mismatch makes the item stale

	// Session-owned.
	outputs  []*kgo.Record
	dlq      *kgo.Record
	sess     *sched.Session[*item]
	attempts int32

	// Loop-owned.
	done    bool
	fetched int64 // the clock's Unix nanoseconds when fetched

	stuck    atomic.Bool
	nextDone *item      // the item pushed before it (completionQueue)
	x        *itemExtra // nil until needed
}

// itemExtra is the part of an item that most records never need. Its
// fields are owned as the item's are.
type itemExtra struct {
	// Session-owned.
	firstFailure time.Time
	failure      error // what dead-lettered it, for Run's error without a dead-letter topic
	// storeErr is a failed read of a local store in the current attempt
	// (storeFailed): whatever the handler made of it, the attempt counts
	// for nothing and Run stops with it.
	storeErr error
	writes   []stateWrite
	span     trace.Span // the handle span, from the first attempt on (tracing only)
	spanCtx  context.Context

	// Set by the loop before dispatch (screen); eventID is read by the
	// handler too, through its context. A duplicate, or a record that
	// screen dead-lettered (dlq set), is done without its handler.
	eventID []byte // nil: none, or WithDedupe is off
	claimed bool   // the first of its event ID: marked when done
	dup     bool   // a duplicate
}

// extra returns it.x, allocating it. Only the goroutine that owns the
// item calls it.
func (it *item) extra() *itemExtra {
	if it.x == nil {
		it.x = new(itemExtra)
	}
	return it.x
}

// storeFailed records a failed read of a local store in the current
// attempt and returns err.
func (it *item) storeFailed(err error) error {
	if x := it.extra(); x.storeErr == nil {
		x.storeErr = err
	}
	return err
}

// writes returns the state writes of the current attempt.
func (it *item) writes() []stateWrite {
	if it.x == nil {
		return nil
	}
	return it.x.writes
}

func (it *item) eventID() []byte {
	if it.x == nil {
		return nil
	}
	return it.x.eventID
}

func (it *item) isDup() bool { return it.x != nil && it.x.dup }

// span returns the handle span and its context (nil without tracing).
func (it *item) span() (context.Context, trace.Span) {
	if it.x == nil {
		return nil, nil
	}
	return it.x.spanCtx, it.x.span
}

// resetAttempt drops what a failed attempt emitted and wrote.
func (it *item) resetAttempt() {
	it.outputs = it.outputs[:0]
	if it.x != nil {
		it.x.writes = it.x.writes[:0]
	}
}

// partition tracks one assigned partition: records in offset order from the
// lowest unfinished one, what was committed last, and what to skip because
// an earlier transaction already finished it.
type partition struct {
	topic string
	id    int32
	gen   atomic.Uint64

	pending      []*item // offset order; pending[0] is the lowest unfinished
	undispatched []*item // the tail of pending not yet handed to sessions
	done         int     // items in pending that are done
	held         []*item // completed, waiting for room in the commit metadata
	next         int64   // fetches below this offset are already here

	committed     int64              // last committed offset (-1: none)
	committedDone []offsetmeta.Range // finished above it, as committed
	skip          []offsetmeta.Range // still to skip at intake

	metaBound       int // upper bound on the commit metadata's binary size
	doneSinceCommit int
	paused          bool
	pauseLogged     time.Time      // last Info log of a pause or resume
	hwm             int64          // high watermark last seen (-1: none), for the lag gauge
	headSince       time.Time      // when pending[0] became the head
	laneKey         []byte         // session key under OrderByPartition
	keyspaces       []keyspacePart // its parts of the lifetime's keyspaces, in their order
	restore         *restoreGate   // nil if nothing was ever restored
}

func newPartition(topic string, id int32, gen uint64, committed int64, done []offsetmeta.Range) *partition {
	p := &partition{metaBound: offsetmeta.BinaryLen(committed, done), topic: topic, id: id, next: committed, committed: committed,
		committedDone: done, skip: done, laneKey: fmt.Appendf(nil, "%s/%d", topic, id), hwm: -1}
	p.gen.Store(gen)
	return p
}

func (p *partition) buffered() int { return len(p.pending) + len(p.held) }

// unfinished counts dispatched records not finished yet.
func (p *partition) unfinished() int { return len(p.pending) - len(p.undispatched) - p.done }

// track queues newly fetched records. Refetched ones (after a rewind) are
// ignored and ones an earlier transaction finished are done at once. The
// items of one fetch share one allocation. It counts the records it takes
// (consumed) and those it finds done (skipped) from offset countFrom on.
func (p *partition) track(recs []*kgo.Record, now time.Time, countFrom int64) (consumed, skipped int64) {
	gen, fetched := p.gen.Load(), now.UnixNano()
	var slab []item
	for i, r := range recs {
		isNew, finished := p.accept(r.Offset)
		if !isNew {
			continue
		}
		count := r.Offset >= countFrom
		if count {
			consumed++
		}
		if finished {
			if count {
				skipped++
			}
			if len(p.pending) > 0 {
				p.appendDone(&item{rec: r, part: p, gen: gen, done: true})
			}
			continue
		}
		if len(slab) == 0 {
			slab = make([]item, len(recs)-i)
		}
		it := &slab[0]
		slab = slab[1:]
		it.rec, it.part, it.gen, it.fetched = r, p, gen, fetched
		if len(p.pending) == 0 {
			p.headSince = now
		}
		p.pending = append(p.pending, it)
		p.undispatched = append(p.undispatched, it)
	}
	return consumed, skipped
}

// accept reports whether an offset is new (not refetched after a rewind),
// and whether an earlier transaction already finished it.
func (p *partition) accept(offset int64) (isNew, finished bool) {
	if offset < p.next {
		return false, false
	}
	p.next = offset + 1
	for len(p.skip) > 0 && p.skip[0].End <= offset {
		p.skip = p.skip[1:]
	}
	return true, len(p.skip) > 0 && p.skip[0].Start <= offset
}

// markDone marks a pending item finished and drops the finished prefix.
func (p *partition) markDone(it *item) {
	if p.pending[0] != it {
		p.growMetaBound()
	} // finishing the head only shrinks the metadata
	it.done = true
	p.done++
	p.doneSinceCommit++
	i := 0
	for i < len(p.pending) && p.pending[i].done {
		p.pending[i] = nil
		i++
	}
	if i > 0 {
		p.pending = p.pending[i:]
		p.done -= i
	}
}

// unmarkDone reverts markDone for an item that is not the lowest pending one
// (so no prefix was dropped). The metadata bound stays an upper bound.
func (p *partition) unmarkDone(it *item) {
	it.done = false
	p.done--
	p.doneSinceCommit--
}

// appendDone adds a record that an earlier transaction finished.
func (p *partition) appendDone(it *item) {
	p.pending = append(p.pending, it)
	p.done++
	p.growMetaBound()
}

// growMetaBound accounts for one more finished record above the head. It
// adds at most one (pending, done) pair to the metadata, whose two uvarints
// are no longer than the pending span's; extending or merging runs adds
// less. Finishing the head only ever shrinks the metadata.
func (p *partition) growMetaBound() {
	span := p.pending[len(p.pending)-1].rec.Offset - p.pending[0].rec.Offset + 1
	p.metaBound += 2 * offsetmeta.UvarintLen(uint64(span))
}

// measureMeta sets the bound to the exact size: a walk over pending.
func (p *partition) measureMeta() {
	base, done := p.commitPoint()
	p.metaBound = offsetmeta.BinaryLen(base, done)
}

// commitPoint is the offset to commit (the lowest unfinished record, or the
// next offset to fetch) and the finished ranges above it: the finished
// records pending, and the ranges an earlier transaction finished that
// are not fetched again yet (skip, above next). Without those, a commit
// right after a rewind, a restart or a rebalance, before the fetch caught
// up with them, would drop them from the metadata, and the records would
// be done twice.
func (p *partition) commitPoint() (int64, []offsetmeta.Range) {
	base := p.next
	var out []offsetmeta.Range
	if len(p.pending) > 0 {
		base = p.pending[0].rec.Offset
		// pending[0] is unfinished; consecutive finished items form one
		// range, which also covers offsets between them that hold no
		// record.
		prevDone := false
		for _, it := range p.pending[1:] {
			switch {
			case !it.done:
				prevDone = false
			case prevDone:
				out[len(out)-1].End = it.rec.Offset + 1
			default:
				out = append(out, offsetmeta.Range{Start: it.rec.Offset, End: it.rec.Offset + 1})
				prevDone = true
			}
		}
	}
	for _, r := range p.skip {
		if r.End <= p.next {
			continue
		}
		r.Start = max(r.Start, p.next)
		if n := len(out); n > 0 && out[n-1].End >= r.Start {
			out[n-1].End = max(out[n-1].End, r.End)
			continue
		}
		out = append(out, r)
	}
	return base, out
}

// metadataFits reports whether the commit metadata stays within max bytes.
// The exact size is only measured when the running upper bound exceeds it,
// so the cost per finished record stays constant away from the limit.
func (p *partition) metadataFits(max int) bool {
	// Ranges still to skip (after a rewind or an assignment) are outside
	// the running bound's model: measure while there are any.
	if p.done == 0 || len(p.skip) == 0 && offsetmeta.EncodedLenOf(p.metaBound) <= max {
		return true
	}
	p.measureMeta()
	return p.done == 0 || offsetmeta.EncodedLenOf(p.metaBound) <= max
}

// restoreGate holds a partition's records back while any of its
// keyspaces is restoring. Rewinds carry it over to the partition's new
// state, so a rewind during a restore does not let records through early.
type restoreGate struct{ pending int }

func (g *restoreGate) open() bool { return g == nil || g.pending == 0 }

// itemKey is the context key of the record a handler runs for, set when
// the processor has a state store or a dedupe store.
type itemKey struct{}

func itemFrom(ctx context.Context) *item {
	it, _ := ctx.Value(itemKey{}).(*item)
	return it
}

type stateWrite struct {
	statestore.Write
	seq uint64
}

// commitPlan is what a transaction commits for one input partition.
type commitPlan struct {
	base       int64 // the lowest unfinished offset (-1: nothing fetched since a rewind)
	done       []offsetmeta.Range
	meta       string
	doneBefore int // the partition's doneSinceCommit when planned
}
