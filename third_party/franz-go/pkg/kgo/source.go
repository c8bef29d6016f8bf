package kgo

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo/internal/xsync"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type readerFrom interface {
	ReadFrom([]byte) error
}

// A source consumes from an individual broker.
//
// As long as there is at least one active cursor, a source aims to have *one*
// buffered fetch at all times. As soon as the fetch is taken, a source issues
// another fetch in the background.
type source struct {
	cl     *Client // our owning client, for cfg, metadata triggering, context, etc.
	nodeID int32   // the node ID of the broker this source belongs to

	// Tracks how many _failed_ fetch requests we have in a row (unable to
	// receive a response). Any response, even responses with an ErrorCode
	// set, are successful. This field is used for backoff purposes.
	consecutiveFailures int

	fetchState workLoop
	sem        chan struct{} // closed when fetchable, recreated when a buffered fetch exists
	buffered   bufferedFetch // contains a fetch the source has buffered for polling

	session fetchSession // supports fetch sessions as per KIP-227

	cursorsMu    xsync.Mutex
	cursors      []*cursor // contains all partitions being consumed on this source
	cursorsStart int       // incremented every fetch req to ensure all partitions are fetched

	share sourceShare
}

type sourceShare struct {
	s  *source // back-pointer for hook, sem, maybeShareConsume
	sc *shareConsumer

	mu           xsync.Mutex
	cursors      []*shareCursor
	cursorsStart int
	sessionEpoch int32              // 0=new, incremented on success, -1=close
	sessionGen   uint32             // incremented on every session reset; stamps acks so we drop those from an earlier session
	sessionParts map[tidp]struct{}  // broker-confirmed session partitions; createShareFetchReq diffs WANT against this to compute add/forget
	ackCh        chan struct{}      // acks pending, batch on timer
	ackFlushCh   chan struct{}      // flush acks immediately
	buffered     shareBufferedFetch // decoded share fetch waiting for poll
	purgedAcks   []cursorAckDrain   // acks drained from purged cursors, sent with the next request
}

func (cl *Client) newSource(nodeID int32) *source {
	s := &source{
		cl:     cl,
		nodeID: nodeID,
		sem:    make(chan struct{}),
	}
	if cl.cfg.disableFetchSessions {
		s.session.kill()
	}
	s.share.s = s
	s.share.sc = cl.consumer.s
	s.share.ackCh = make(chan struct{}, 1)
	s.share.ackFlushCh = make(chan struct{}, 1)
	s.share.sessionParts = make(map[tidp]struct{})
	close(s.sem)
	return s
}

func (s *source) addCursor(add *cursor) {
	s.cursorsMu.Lock()
	add.cursorsIdx = len(s.cursors)
	s.cursors = append(s.cursors, add)
	s.cursorsMu.Unlock()

	// Adding a new cursor may allow a new partition to be fetched.
	// We do not need to cancel any current fetch nor kill the session,
	// since adding a cursor is non-destructive to work in progress.
	// If the session is currently stopped, this is a no-op.
	s.maybeConsume()
}

// Removes a cursor from the source.
//
// The caller should do this with a stopped session if necessary, which
// should clear any buffered fetch and reset the source's session.
func (s *source) removeCursor(rm *cursor) {
	s.cursorsMu.Lock()
	defer s.cursorsMu.Unlock()

	if rm.cursorsIdx != len(s.cursors)-1 {
		s.cursors[rm.cursorsIdx], s.cursors[len(s.cursors)-1] = s.cursors[len(s.cursors)-1], nil
		s.cursors[rm.cursorsIdx].cursorsIdx = rm.cursorsIdx
	} else {
		s.cursors[rm.cursorsIdx] = nil // do not let the memory hang around
	}

	s.cursors = s.cursors[:len(s.cursors)-1]
	if s.cursorsStart == len(s.cursors) {
		s.cursorsStart = 0
	}
}

// cursor is where we are consuming from for an individual partition.
type cursor struct {
	topic string
	// topicID is written once at cursor creation and is deliberately
	// never re-adopted if a delete+recreate hands back a new ID for the
	// same name: a recreated topic stalls loudly (UNKNOWN_TOPIC_ID, see
	// the UnknownTopicID arm below) and the user must purge+re-add. This
	// is the principled alternative to librdkafka/Java's adopt-and-gamble;
	// issue #908 records why auto-adoption was backed out (PR #391/#377:
	// OffsetForLeaderEpoch has no TopicID field, so an adopted ID cannot
	// be validated against truncation). The metadata merge copies this
	// pointer over rather than swapping the ID; do not "fix" the stall
	// into an adopt without solving #908.
	topicID   [16]byte
	partition int32

	unknownIDFails atomic.Int32

	keepControl bool // whether to keep control records

	cursorsIdx int // updated under source mutex

	// The source we are currently on. This is modified in two scenarios:
	//
	//  * by metadata when the consumer session is completely stopped
	//
	//  * by a fetch when handling a fetch response that returned preferred
	//  replicas
	//
	// This is additionally read within a session when cursor is
	// transitioning from used to usable.
	source *source

	// If this cursor moves to a preferred replica: unix nano of when.
	// This is set in `move`, and read when handling a response. Both are
	// independent events in a live session. If we have been consuming from
	// the preferred replica for more than RecheckPreferredReplicaInterval,
	// we fetch from the original leader again.
	moveAt int64

	// useState is an atomic that has two states: unusable and usable. A
	// cursor can be used in a fetch request if it is in the usable state.
	// Once used, the cursor is unusable, and will be set back to usable
	// one the request lifecycle is complete (a usable fetch response, or
	// once listing offsets or loading epochs completes).
	//
	// A cursor can be set back to unusable when sources are stopped. This
	// can be done if a group loses a partition, for example.
	//
	// The used state is exclusively updated by either building a fetch
	// request or when the source is stopped.
	useState atomic.Bool

	// fatal is set when a batch decompresses past
	// MaxDecompressBatchBytes. The cursor stays unusable, no matter
	// what completes, until SetOffsets moves it past the batch or the
	// partition is unassigned.
	fatal atomic.Bool

	topicPartitionData // updated in metadata when session is stopped

	// cursorOffset is our epoch/offset that we are consuming. When a fetch
	// request is issued, we "freeze" a view of the offset and of the
	// leader epoch (see cursorOffsetNext for why the leader epoch). When a
	// buffered fetch is taken, we update the cursor.
	cursorOffset
}

// cursorOffset tracks offsets/epochs for a cursor.
type cursorOffset struct {
	// What the cursor is at: we request this offset next.
	offset int64

	// The epoch of the last record we consumed. Also used for KIP-320, if
	// we are fenced or we have an offset out of range error, we go into
	// the OffsetForLeaderEpoch recovery. The last consumed epoch tells the
	// broker which offset we want: either (a) the next offset if the last
	// consumed epoch is the current epoch, or (b) the offset of the first
	// record in the next epoch. This allows for exact offset resetting and
	// data loss detection.
	//
	// See kmsg.OffsetForLeaderEpochResponseTopicPartition for more
	// details.
	lastConsumedEpoch int32

	// If we receive OFFSET_OUT_OF_RANGE, and we previously *know* we
	// consumed an offset, we reset to the nearest offset after our prior
	// known valid consumed offset.
	lastConsumedTime time.Time

	// The current high watermark of the partition. Uninitialized (0) means
	// we do not know the HWM, or there is no lag.
	hwm int64
}

// lastConsumedMilli returns the millisecond of the last record we consumed,
// or zero if we have consumed nothing. Resetting after an out of range fetch
// resumes by this millisecond.
func (o *cursorOffset) lastConsumedMilli() int64 {
	if o.lastConsumedTime.IsZero() {
		return 0
	}
	return max(o.lastConsumedTime.UnixMilli(), 1) // ensure we lookup a time after 0, not a reserved offset below 0
}

// use, for fetch requests, freezes a view of the cursorOffset.
func (c *cursor) use() *cursorOffsetNext {
	// A source using a cursor has exclusive access to the use field by
	// virtue of that source building a request during a live session,
	// or by virtue of the session being stopped.
	c.useState.Store(false)
	return &cursorOffsetNext{
		cursorOffset:       c.cursorOffset,
		from:               c,
		currentLeaderEpoch: c.leaderEpoch,
	}
}

// unset transitions a cursor to an unusable state when the cursor is no longer
// to be consumed. This is called exclusively after sources are stopped.
// This also unsets the cursor offset, which is assumed to be unused now.
// A later assignment starts the cursor fresh, so a fatal batch is forgotten.
func (c *cursor) unset() {
	c.useState.Store(false)
	c.fatal.Store(false)
	c.setOffset(cursorOffset{
		offset:            -1,
		lastConsumedEpoch: -1,
		hwm:               0,
	})
}

// usable returns whether a cursor can be used for building a fetch request.
func (c *cursor) usable() bool {
	return c.useState.Load()
}

// allowUsable allows a cursor to be fetched, and is called either in assigning
// offsets, or when a buffered fetch is taken or discarded, or when listing /
// epoch loading finishes.
//
// We capture c.source before Swap because Swap makes this cursor immediately
// eligible for fetching. With kfake (in-process), a fetch can complete and
// move() can overwrite c.source before we reach maybeConsume.
func (c *cursor) allowUsable() {
	if c.fatal.Load() {
		return
	}
	s := c.source
	c.useState.Swap(true)
	s.maybeConsume()
}

// setOffset sets the cursors offset which will be used the next time a fetch
// request is built. This function is called under the source mutex while the
// source is stopped, and the caller is responsible for calling maybeConsume
// after.
func (c *cursor) setOffset(o cursorOffset) {
	c.cursorOffset = o
}

// cursorOffsetNext is updated while processing a fetch response.
//
// When a buffered fetch is taken, we update a cursor with the final values in
// the modified cursor offset.
type cursorOffsetNext struct {
	cursorOffset
	from *cursor

	// The leader epoch at the time we took this cursor offset snapshot. We
	// need to copy this rather than accessing it through `from` because a
	// fetch request can be canceled while it is being written (and reading
	// the epoch).
	//
	// The leader field itself is only read within the context of a session
	// while the session is alive, thus it needs no such guard.
	//
	// Basically, any field read in AppendTo needs to be copied into
	// cursorOffsetNext.
	currentLeaderEpoch int32
}

type cursorOffsetPreferred struct {
	cursorOffsetNext
	preferredReplica int32
	ooor             bool
	recheck          bool
}

// Moves a cursor from one source to another. This is done while handling a
// fetch response or creating a fetch request, which means within the context
// of a live session.
//
// NOTE: We cannot add the cursor to the new source until AFTER we are done
// modifying everything on the cursor. FURTHER, we cannot add the cursor to the
// new source until we are done accessing *any* field on the cursor.  As soon
// as we add the cursor to the new source, it is eligible for use in a new
// fetch request -- and, pathologically, the cursor could move again and the
// source can be changed again (and at that point, all bets are off and there
// can be some weird access patterns and modifying of fields that leads to
// races or crashes). Point is: remove, modify, add. Do not modify after add.
// See #1167.
func (p *cursorOffsetPreferred) move() {
	c := p.from

	// Before we migrate the cursor, we check if the destination source
	// exists. If not, we do not migrate and instead force a metadata.

	c.source.cl.sinksAndSourcesMu.Lock()
	sns, exists := c.source.cl.sinksAndSources[p.preferredReplica]
	c.source.cl.sinksAndSourcesMu.Unlock()

	if !exists {
		// The preferred replica is a broker we have not yet learned from
		// metadata - e.g. a freshly added replica that the broker we
		// fetched from already knows about, before our periodic refresh
		// caught up. We force a metadata update so the source comes to
		// exist for a future move, but we must also re-enable the cursor
		// on its current (leader) source. The caller (source.fetch) deletes
		// this cursor from the request's used offsets right after we return,
		// so neither the fetch's used-offset finishing nor a later buffered
		// poll will re-enable it: leaving it unusable here would strand the
		// partition. The leader is unchanged, so no cursor
		// migration re-enables it, and a metadata refresh that merely
		// learns the new broker never touches cursor usability - the
		// partition would silently never be consumed again until an
		// unrelated session restart (rebalance, assign, leader change).
		//
		// Re-enabling on the current source keeps us consuming from the
		// leader until a later fetch's preferred replica can be honored.
		c.source.cl.triggerUpdateMetadataNow("cursor moving to a different broker that is not yet known")
		c.allowUsable()
		return
	}

	c.source.removeCursor(c)
	c.source = sns.source
	c.moveAt = time.Now().UnixNano()
	c.useState.Swap(true)
	c.source.addCursor(c)
}

type cursorPreferreds []cursorOffsetPreferred

func (cs cursorPreferreds) String() string {
	type pnext struct {
		p       int32
		next    int32
		ooor    bool
		recheck bool
	}
	ts := make(map[string][]pnext)
	for _, c := range cs {
		t := c.from.topic
		p := c.from.partition
		ts[t] = append(ts[t], pnext{p, c.preferredReplica, c.ooor, c.recheck})
	}
	tsorted := make([]string, 0, len(ts))
	for t, ps := range ts {
		tsorted = append(tsorted, t)
		slices.SortFunc(ps, func(l, r pnext) int {
			return cmp.Or(cmp.Compare(l.p, r.p), cmp.Compare(l.next, r.next))
		})
	}
	slices.Sort(tsorted)

	sb := new(strings.Builder)
	for i, t := range tsorted {
		ps := ts[t]
		fmt.Fprintf(sb, "%s{", t)

		for j, p := range ps {
			if j < len(ps)-1 {
				if p.ooor {
					fmt.Fprintf(sb, "p%d=>b%d[ooor], ", p.p, p.next)
				} else if p.recheck {
					fmt.Fprintf(sb, "p%d=>b%d[recheck], ", p.p, p.next)
				} else {
					fmt.Fprintf(sb, "p%d=>b%d, ", p.p, p.next)
				}
			} else {
				if p.ooor {
					fmt.Fprintf(sb, "p%d=>b%d[ooor]", p.p, p.next)
				} else if p.recheck {
					fmt.Fprintf(sb, "p%d=>b%d[recheck]", p.p, p.next)
				} else {
					fmt.Fprintf(sb, "p%d=>b%d", p.p, p.next)
				}
			}
		}

		if i < len(tsorted)-1 {
			fmt.Fprint(sb, "}, ")
		} else {
			fmt.Fprint(sb, "}")
		}
	}
	return sb.String()
}

func (cs cursorPreferreds) eachPreferred(fn func(cursorOffsetPreferred)) {
	for _, c := range cs {
		fn(c)
	}
}

type usedOffsets map[string]map[int32]*cursorOffsetNext

func (os usedOffsets) eachOffset(fn func(*cursorOffsetNext)) {
	for _, ps := range os {
		for _, o := range ps {
			fn(o)
		}
	}
}

func (os usedOffsets) finishUsingAllWithSet() {
	os.eachOffset(func(o *cursorOffsetNext) { o.from.setOffset(o.cursorOffset); o.from.allowUsable() })
}

func (os usedOffsets) finishUsingAll() {
	os.eachOffset(func(o *cursorOffsetNext) { o.from.allowUsable() })
}

// bufferedFetch is a fetch response waiting to be consumed by the client.
type bufferedFetch struct {
	fetch Fetch

	doneFetch   chan<- bool // when unbuffered, we send down this
	usedOffsets usedOffsets // what the offsets will be next if this fetch is used
}

func (s *source) hookBuffered(f *Fetch) {
	// Collect matching hooks once, then fuse dispatch with the metrics walk
	// so we visit each record exactly once regardless of hook count.
	var bufH []HookFetchRecordBuffered
	s.cl.cfg.hooks.each(func(h Hook) {
		if h, ok := h.(HookFetchRecordBuffered); ok {
			bufH = append(bufH, h)
		}
	})

	var nrecs int
	var nbytes int64
	for i := range f.Topics {
		t := &f.Topics[i]
		for j := range t.Partitions {
			p := &t.Partitions[j]
			nrecs += len(p.Records)
			for k := range p.Records {
				r := p.Records[k]
				nbytes += r.userSize()
				for _, h := range bufH {
					h.OnFetchRecordBuffered(r)
				}
			}
		}
	}
	s.cl.consumer.bufferedRecords.Add(int64(nrecs))
	s.cl.consumer.bufferedBytes.Add(nbytes)
}

// hookDeferUnbuffered is the unbuffered counterpart of hookBuffered, split
// because its dispatch must NOT run at the call sites: every take/discard
// path holds c.sourcesReadyMu, and the poll path additionally holds c.mu
// (the invalidation path holds c.mu and sessionChangeMu too). User hook
// code invoked there can re-enter the client (the hook docs bless
// interceptor usage), and a re-entrant call that needs c.mu would park
// forever with c.mu held, wedging every future poll, every rebalance's
// assign, and Close. So this captures what dispatch needs now and queues
// the user-code dispatch on the consumer, to run once the locks release.
//
// The capture must be eager for a second reason: callers compact the
// fetch's Topics/Partitions slices in place after this returns (pause
// stripping reuses the same backing arrays), so a closure over f would
// observe a corrupted view. Records themselves are never mutated; we
// flatten the record pointers. Gauge accounting is atomic and happens
// immediately; only user code is deferred, and only when an unbuffered
// hook is actually registered.
//
// Must be called with c.sourcesReadyMu held.
func (s *source) hookDeferUnbuffered(f *Fetch, polled bool) {
	var unbH []HookFetchRecordUnbuffered
	s.cl.cfg.hooks.each(func(h Hook) {
		if h, ok := h.(HookFetchRecordUnbuffered); ok {
			unbH = append(unbH, h)
		}
	})

	c := &s.cl.consumer
	var nrecs int
	var nbytes int64
	if len(unbH) == 0 {
		// No hook to dispatch. The gauges still need the walk (bytes
		// are per-record), but nothing is captured and nothing is
		// allocated.
		for i := range f.Topics {
			t := &f.Topics[i]
			for j := range t.Partitions {
				p := &t.Partitions[j]
				nrecs += len(p.Records)
				for k := range p.Records {
					nbytes += p.Records[k].userSize()
				}
			}
		}
		c.bufferedRecords.Add(-int64(nrecs))
		c.bufferedBytes.Add(-nbytes)
		return
	}

	var recs []*Record
	for i := range f.Topics {
		t := &f.Topics[i]
		for j := range t.Partitions {
			p := &t.Partitions[j]
			nrecs += len(p.Records)
			for k := range p.Records {
				r := p.Records[k]
				nbytes += r.userSize()
				recs = append(recs, r)
			}
		}
	}
	c.bufferedRecords.Add(-int64(nrecs))
	c.bufferedBytes.Add(-nbytes)

	if len(recs) == 0 {
		return
	}
	c.deferredFetchHooks = append(c.deferredFetchHooks, func() {
		// unbH is almost always length one; keeping it outermost keeps
		// the per-record loop free of the hook-slice ranging.
		for _, h := range unbH {
			for _, r := range recs {
				h.OnFetchRecordUnbuffered(r, polled)
			}
		}
	})
}

// takeBuffered drains a buffered fetch and updates offsets.
func (s *source) takeBuffered(paused pausedTopics) Fetch {
	if len(paused) == 0 {
		return s.takeBufferedFn(true, usedOffsets.finishUsingAllWithSet)
	}
	var strip map[string]map[int32]struct{}
	f := s.takeBufferedFn(true, func(os usedOffsets) {
		for t, ps := range os {
			// If the entire topic is paused, we allowUsable all
			// and strip the topic entirely.
			pps, ok := paused.t(t)
			if !ok {
				for _, o := range ps {
					o.from.setOffset(o.cursorOffset)
					o.from.allowUsable()
				}
				continue
			}
			if strip == nil {
				strip = make(map[string]map[int32]struct{})
			}
			if pps.all {
				for _, o := range ps {
					o.from.allowUsable()
				}
				strip[t] = nil // initialize key, for existence-but-len-0 check below
				continue
			}
			stript := make(map[int32]struct{})
			for _, o := range ps {
				if _, ok := pps.m[o.from.partition]; ok {
					o.from.allowUsable()
					stript[o.from.partition] = struct{}{}
					continue
				}
				o.from.setOffset(o.cursorOffset)
				o.from.allowUsable()
			}
			// We only add stript to strip if there are any
			// stripped partitions. We could have a paused
			// partition that is on another broker, while this
			// broker has no paused partitions -- if we add stript
			// here, our logic below (stripping this entire topic)
			// is more confusing (present nil vs. non-present nil).
			if len(stript) > 0 {
				strip[t] = stript
			}
		}
	})
	if strip != nil {
		keep := f.Topics[:0]
		for _, t := range f.Topics {
			stript, ok := strip[t.Topic]
			if ok {
				if len(stript) == 0 {
					continue // stripping this entire topic
				}
				keepp := t.Partitions[:0]
				for _, p := range t.Partitions {
					if _, ok := stript[p.Partition]; ok {
						continue
					}
					keepp = append(keepp, p)
				}
				t.Partitions = keepp
			}
			keep = append(keep, t)
		}
		f.Topics = keep
	}
	return f
}

func (s *source) discardBuffered() {
	s.takeBufferedFn(false, usedOffsets.finishUsingAll)
}

// pollOne holds the first Fetch, FetchTopic, and FetchPartition that
// PollRecords returns, so that in the likely common case of taking one or a
// few records, the fetch costs only one alloc.
type pollOne struct {
	f [1]Fetch
	t [1]FetchTopic
	p [1]FetchPartition
}

// takeNBuffered takes a limited amount of records from a buffered fetch,
// updating offsets in each partition per records taken.
//
// This only allows a new fetch once every buffered record has been taken.
//
// This returns the number of records taken and whether the source has been
// completely drained.
func (s *source) takeNBuffered(paused pausedTopics, n int, one *pollOne) (Fetch, int, bool) {
	var (
		r      Fetch
		rstrip Fetch
		taken  int
	)

	b := &s.buffered
	bf := &b.fetch
	for len(bf.Topics) > 0 && n > 0 {
		t := &bf.Topics[0]
		tCursors := b.usedOffsets[t.Topic]

		// If the topic is outright paused, we allowUsable all
		// partitions in the topic and skip the topic entirely.
		if paused.has(t.Topic, -1) {
			rstrip.Topics = append(rstrip.Topics, *t)
			bf.Topics = bf.Topics[1:]
			for _, pCursor := range tCursors {
				pCursor.from.allowUsable()
			}
			delete(b.usedOffsets, t.Topic)
			continue
		}

		var rt *FetchTopic
		ensureTopicAdded := func() {
			if rt != nil {
				return
			}
			if one != nil && len(r.Topics) == 0 {
				one.t[0] = *t
				r.Topics = one.t[:]
				rt = &r.Topics[0]
				rt.Partitions = one.p[:0]
				return
			}
			r.Topics = append(r.Topics, *t)
			rt = &r.Topics[len(r.Topics)-1]
			rt.Partitions = nil
		}
		var rtstrip *FetchTopic
		ensureTopicStripped := func() {
			if rtstrip != nil {
				return
			}
			rstrip.Topics = append(rstrip.Topics, *t)
			rtstrip = &rstrip.Topics[len(rstrip.Topics)-1]
			rtstrip.Partitions = nil
		}

		for len(t.Partitions) > 0 && n > 0 {
			p := &t.Partitions[0]

			if paused.has(t.Topic, p.Partition) {
				ensureTopicStripped()
				rtstrip.Partitions = append(rtstrip.Partitions, *p)
				t.Partitions = t.Partitions[1:]
				pCursor := tCursors[p.Partition]
				pCursor.from.allowUsable()
				delete(tCursors, p.Partition)
				if len(tCursors) == 0 {
					delete(b.usedOffsets, t.Topic)
				}
				continue
			}

			ensureTopicAdded()
			rt.Partitions = append(rt.Partitions, *p)
			rp := &rt.Partitions[len(rt.Partitions)-1]

			take := min(n, len(p.Records))

			rp.Records = p.Records[:take:take]
			p.Records = p.Records[take:]

			n -= take
			taken += take

			pCursor := tCursors[p.Partition]

			if len(p.Records) == 0 {
				t.Partitions = t.Partitions[1:]

				pCursor.from.setOffset(pCursor.cursorOffset)
				pCursor.from.allowUsable()
				delete(tCursors, p.Partition)
				if len(tCursors) == 0 {
					delete(b.usedOffsets, t.Topic)
				}
				continue
			}

			lastReturnedRecord := rp.Records[len(rp.Records)-1]
			pCursor.from.setOffset(cursorOffset{
				offset:            lastReturnedRecord.Offset + 1,
				lastConsumedEpoch: lastReturnedRecord.LeaderEpoch,
				lastConsumedTime:  lastReturnedRecord.Timestamp,
				hwm:               p.HighWatermark,
			})
		}

		if len(t.Partitions) == 0 {
			bf.Topics = bf.Topics[1:]
		}
	}

	if len(rstrip.Topics) > 0 {
		s.hookDeferUnbuffered(&rstrip, true)
	}
	s.hookDeferUnbuffered(&r, true) // unbuffered, polled

	drained := len(bf.Topics) == 0
	if drained {
		s.takeBuffered(nil)
	}
	return r, taken, drained
}

func (s *source) takeBufferedFn(polled bool, offsetFn func(usedOffsets)) Fetch {
	r := s.buffered
	s.buffered = bufferedFetch{}
	offsetFn(r.usedOffsets)
	r.doneFetch <- true
	close(s.sem)

	s.hookDeferUnbuffered(&r.fetch, polled) // unbuffered, potentially polled

	return r.fetch
}

// createReq actually creates a fetch request.
func (s *source) createReq() *fetchRequest {
	req := &fetchRequest{
		maxWait:        s.cl.cfg.maxWait,
		minBytes:       s.cl.cfg.minBytes,
		maxBytes:       s.cl.cfg.maxBytes.load(),
		maxPartBytes:   s.cl.cfg.maxPartBytes.load(),
		rack:           s.cl.cfg.rack,
		isolationLevel: s.cl.cfg.isolationLevel,
		preferLagFn:    s.cl.cfg.preferLagFn,

		// We copy a view of the session for the request, which allows
		// modify source while the request may be reading its copy.
		session: s.session,
	}

	paused := s.cl.consumer.loadPaused()

	// While building this request, if any cursor is follow fetching and it
	// has been more than the recheck-if-we-should-still-follow interval,
	// we skip the cursor and move it back to the leader.
	//
	// This is safe w.r.t. metadata updates because `createReq` is running
	// in the context of a live consumer session.
	var rechecks cursorPreferreds
	defer func() {
		if len(rechecks) > 0 {
			if s.cl.cfg.logger.Level() >= LogLevelInfo {
				s.cl.cfg.logger.Log(LogLevelInfo, "redirecting follower fetchers back to their leader to re-check if a new follower should be chosen",
					"from_broker", s.nodeID,
					"moves", rechecks.String(),
				)
			}
			for _, c := range rechecks {
				c.move()
			}
		}
	}()

	s.cursorsMu.Lock()
	defer s.cursorsMu.Unlock()

	cursorIdx := s.cursorsStart
	for range s.cursors {
		c := s.cursors[cursorIdx]
		cursorIdx = (cursorIdx + 1) % len(s.cursors)
		if !c.usable() {
			continue
		}
		if s.nodeID != c.leader && c.moveAt > 0 && time.Since(time.Unix(0, c.moveAt)) > s.cl.cfg.recheckPreferredReplicaInterval {
			rechecks = append(rechecks, cursorOffsetPreferred{
				cursorOffsetNext: *c.use(),
				preferredReplica: c.leader,
				recheck:          true,
			})
			continue
		}
		if paused.has(c.topic, c.partition) {
			continue
		}
		req.addCursor(c)
	}

	// We could have lost our only record buffer just before we grabbed the
	// source lock above.
	if len(s.cursors) > 0 {
		s.cursorsStart = (s.cursorsStart + 1) % len(s.cursors)
	}

	return req
}

func (s *source) maybeConsume() {
	if s.share.sc != nil {
		s.maybeShareConsume()
		return
	}
	if s.fetchState.maybeBegin() {
		go s.loopFetch()
	}
}

func (s *source) loopFetch() {
	consumer := &s.cl.consumer
	session := consumer.loadSession()

	if session == noConsumerSession {
		s.fetchState.hardFinish()
		// It is possible that we were triggered to consume while we
		// had no consumer session, and then *after* loopFetch loaded
		// noConsumerSession, the session was saved and triggered to
		// consume again. If this function is slow the first time
		// around, it could still be running and about to hardFinish.
		// The second trigger will do nothing, and then we hardFinish
		// and block a new session from actually starting consuming.
		//
		// To guard against this, after we hard finish, we load the
		// session again: if it is *not* noConsumerSession, we trigger
		// attempting to consume again. Worst case, the trigger is
		// useless and it will exit below when it builds an empty
		// request.
		sessionNow := consumer.loadSession()
		if session != sessionNow {
			s.maybeConsume()
		}
		return
	}

	session.incWorker()
	defer session.decWorker()

	// After our add, check quickly **without** another select case to
	// determine if this context was truly canceled. Any other select that
	// has another select case could theoretically race with the other case
	// also being selected.
	select {
	case <-session.ctx.Done():
		s.fetchState.hardFinish()
		return
	default:
	}

	// We receive on canFetch when we can fetch, and we send back when we
	// are done fetching.
	canFetch := make(chan chan bool, 1)

	again := true
	for again {
		select {
		case <-session.ctx.Done():
			s.fetchState.hardFinish()
			return
		case <-s.sem:
		}

		select {
		case <-session.ctx.Done():
			s.fetchState.hardFinish()
			return
		case session.desireFetch() <- canFetch:
		}

		select {
		case <-session.ctx.Done():
			session.cancelFetchCh <- canFetch
			s.fetchState.hardFinish()
			return
		case doneFetch := <-canFetch:
			// Perform another last minute best-effort check on session context
			// to avoid calling fetch with a canceled context just because it passed
			// the above selects by chance due to pseudo-random select behavior.
			if session.ctx.Err() != nil {
				doneFetch <- false
				s.fetchState.hardFinish()
				return
			}
			again = s.fetchState.maybeFinish(s.fetch(session, doneFetch))
		}
	}
}

// killSessionOnClose issues a fetch that closes the source's fetch session,
// returning nil if the source's broker is gone.
func (s *source) killSessionOnClose(ctx context.Context) *respWaiter {
	br, err := s.cl.brokerOrErr(nil, s.nodeID, errUnknownBroker)
	if err != nil {
		return nil
	}
	s.session.kill()
	req := &fetchRequest{
		maxWait:        1,
		minBytes:       1,
		maxBytes:       1,
		maxPartBytes:   1,
		rack:           s.cl.cfg.rack,
		isolationLevel: s.cl.cfg.isolationLevel,
		session:        s.session,
	}
	return br.issue(ctx, req)
}

// fetch is the main logic center of fetching messages.
//
// This is a long function, made much longer by winded documentation, that
// contains a lot of the side effects of fetching and updating. The function
// consists of two main bulks of logic:
//
//   - First, issue a request that can be killed if the source needs to be
//     stopped. Processing the response modifies no state on the source.
//
//   - Second, we keep the fetch response and update everything relevant
//     (session, trigger some list or epoch updates, buffer the fetch).
//
// One small part between the first and second step is to update preferred
// replicas. We always keep the preferred replicas from the fetch response
// *even if* the source needs to be stopped. The knowledge of which preferred
// replica to use would not be out of date even if the consumer session is
// changing.
func (s *source) fetch(consumerSession *consumerSession, doneFetch chan<- bool) (fetched bool) {
	req := s.createReq()

	// For all returns, if we do not buffer our fetch, then we want to
	// ensure our used offsets are usable again.
	var (
		alreadySentToDoneFetch bool
		setOffsets             bool
		buffered               bool
	)
	defer func() {
		if !buffered {
			if req.numOffsets > 0 {
				if setOffsets {
					req.usedOffsets.finishUsingAllWithSet()
				} else {
					req.usedOffsets.finishUsingAll()
				}
			}
			if !alreadySentToDoneFetch {
				doneFetch <- false
			}
		}
	}()

	if req.numOffsets == 0 { // cursors could have been set unusable
		return fetched
	}

	// The request returns early if our session stops.
	ctx := consumerSession.ctx
	var kresp kmsg.Response
	br, err := s.cl.brokerOrErr(ctx, s.nodeID, errUnknownBroker)
	if err == nil {
		kresp, err = br.waitResp(ctx, req)
	}
	if err != nil && ctx.Err() != nil {
		return fetched
	}
	fetched = true

	var didBackoff bool
	backoff := func(why any) {
		// We preemptively allow more fetches (since we are not buffering)
		// and reset our session because of the error (who knows if kafka
		// processed the request but the client failed to receive it).
		doneFetch <- false
		alreadySentToDoneFetch = true
		s.session.reset()
		didBackoff = true

		s.cl.triggerUpdateMetadata(true, fmt.Sprintf("load during source backoff: %v", why))
		s.consecutiveFailures++
		after := time.NewTimer(s.cl.cfg.retryBackoff(s.consecutiveFailures))
		defer after.Stop()
		select {
		case <-after.C:
		case <-ctx.Done():
		}
	}
	defer func() {
		if !didBackoff {
			s.consecutiveFailures = 0
		}
	}()

	// If we had an error, we backoff. Killing a fetch quits the backoff,
	// but that is fine; we may just re-request too early and fall into
	// another backoff.
	if err != nil {
		// A response over BrokerMaxReadBytes will likely be too large
		// again when we retry, so we surface the error rather than
		// stall silently.
		if errors.Is(err, errResponseTooLarge) {
			s.cl.consumer.addFakeReadyForDraining("", -1, err, "fetch response is larger than BrokerMaxReadBytes")
		}
		backoff(err)
		return fetched
	}

	// The logic below here should be relatively quick.
	//
	// Note that fetch runs entirely in the context of a consumer session.
	// loopFetch does not return until this function does, meaning we
	// cannot concurrently issue a second fetch for partitions that are
	// being processed below.

	resp := kresp.(*kmsg.FetchResponse)
	fetch, reloadOffsets, preferreds, allErrsStripped, updateWhy := s.handleReqResp(br, req, resp)

	deleteReqUsedOffset := func(topic string, partition int32) {
		t := req.usedOffsets[topic]
		delete(t, partition)
		if len(t) == 0 {
			delete(req.usedOffsets, topic)
		}
	}

	// Before updating the source, we move all cursors that have new
	// preferred replicas and remove them (and any reload offsets) from
	// being tracked in our req offsets.
	//
	// Polling uses usedOffsets to update cursors; we need to remove moved
	// or reloading cursors from being modified when the records that were
	// fetched are finally polled.
	if len(preferreds) > 0 {
		if s.cl.cfg.logger.Level() >= LogLevelInfo {
			s.cl.cfg.logger.Log(LogLevelInfo, "fetch partitions returned preferred replicas",
				"from_broker", s.nodeID,
				"moves", preferreds.String(),
			)
		}
		preferreds.eachPreferred(func(c cursorOffsetPreferred) {
			c.move()
			deleteReqUsedOffset(c.from.topic, c.from.partition)
		})
	}
	reloadOffsets.each(deleteReqUsedOffset)

	// handleReqResp only parses the body of the response, not the top
	// level error code.
	//
	// The top level error code is related to fetch sessions only, and if
	// there was an error, the body was empty (so processing is basically a
	// no-op). We process the fetch session error now.
	switch err := kerr.ErrorForCode(resp.ErrorCode); err {
	case nil:
		// success; fall through to session bump below
	case kerr.FetchSessionIDNotFound:
		if s.session.epoch == 0 {
			// If the epoch was zero, the broker did not even
			// establish a session for us (and thus is maxed on
			// sessions). We stop trying.
			s.cl.cfg.logger.Log(LogLevelInfo, "session failed with SessionIDNotFound while trying to establish a session; broker likely maxed on sessions; continuing on without using sessions", "broker", logID(s.nodeID))
			s.session.kill()
		} else {
			s.cl.cfg.logger.Log(LogLevelInfo, "received SessionIDNotFound from our in use session, our session was likely evicted; resetting session", "broker", logID(s.nodeID))
			s.session.reset()
		}
		return fetched
	case kerr.InvalidFetchSessionEpoch:
		s.cl.cfg.logger.Log(LogLevelInfo, "resetting fetch session", "broker", logID(s.nodeID), "err", err)
		s.session.reset()
		return fetched

	case kerr.FetchSessionTopicIDError, kerr.InconsistentTopicID:
		s.cl.cfg.logger.Log(LogLevelInfo, "topic id issues, resetting session and updating metadata", "broker", logID(s.nodeID), "err", err)
		s.session.reset()
		s.cl.triggerUpdateMetadataNow("topic id issues")
		return fetched

	default:
		// Any other top-level error is unexpected: current brokers only
		// emit session-related codes here, and every one of those arms
		// above self-heals in a single round-trip (a reset re-establishes
		// the session at epoch 0, which the broker then accepts). An
		// unexpected code has no such bounded heal: a non-conformant or
		// future broker that returns one persistently would spin this
		// fetch at round-trip pace, re-logging on every iteration, because
		// nothing here paces the loop. Back off rather than bumping the
		// session epoch against a failed request; backoff also resets the
		// session defensively so the next request re-establishes state the
		// broker agrees with. This mirrors the transport-error and
		// all-partitions-stripped paths, and the share fetch loop's
		// top-level-error arm.
		s.cl.cfg.logger.Log(LogLevelWarn, "fetch response has unexpected top-level error, resetting session and backing off", "broker", logID(s.nodeID), "err", err)
		backoff(err)
		return fetched
	}

	// At this point, we have successfully processed the response. Even if
	// the response contains no records, we want to keep any offset
	// advancements (we could have consumed only control records, we must
	// advance past them).
	setOffsets = true

	if resp.Version < 7 || resp.SessionID <= 0 {
		// If the version is less than 7, we cannot use fetch sessions,
		// so we kill them on the first response.
		s.session.kill()
	} else {
		s.session.bumpEpoch(resp.SessionID)
		// Commit the request's session-used mutations now that the
		// broker has acknowledged the request.
		s.session.commitFromReq(req.committedTopics, req.committedForgotten)
	}

	// The broker resolves a session partition's name once, when the
	// partition enters the session. If the topic is deleted and
	// recreated, that partition now reaches the new topic and every
	// fetch of the session answers it INCONSISTENT_TOPIC_ID. A full
	// fetch carries our ID and is answered UNKNOWN_TOPIC_ID.
	//
	// We strip inconsistent_topic_id and unknown_topic_id, so we need
	// to reset the session: if we don't, fetching can spin loop (brokers return
	// error responses immediately, no waiting for other data on other partitions).
	if updateWhy.has(kerr.InconsistentTopicID) {
		s.cl.cfg.logger.Log(LogLevelInfo, "fetch partition has an inconsistent topic ID, resetting session", "broker", logID(s.nodeID))
		s.session.reset()
	}

	// If we have a reason to update (per-partition fetch errors), and the
	// reason is not just unknown topic or partition, then we immediately
	// update metadata. We avoid updating for unknown because it _likely_
	// means the topic does not exist and reloading is wasteful. We only
	// trigger a metadata update if we have no reload offsets. Having
	// reload offsets *always* triggers a metadata update.
	if updateWhy != nil {
		why := updateWhy.reason(fmt.Sprintf("fetch had inner topic errors from broker %d", s.nodeID))
		// loadWithSessionNow triggers a metadata update IF there are
		// offsets to reload. If there are no offsets to reload, we
		// trigger one here.
		if !reloadOffsets.loadWithSessionNow(consumerSession, why) {
			if updateWhy.isOnly(kerr.UnknownTopicOrPartition) || updateWhy.isOnly(kerr.UnknownTopicID) {
				s.cl.triggerUpdateMetadata(false, why)
			} else {
				s.cl.triggerUpdateMetadataNow(why)
			}
		}
	}

	if fetch.hasErrorsOrRecords() {
		buffered = true
		s.buffered = bufferedFetch{
			fetch:       fetch,
			doneFetch:   doneFetch,
			usedOffsets: req.usedOffsets,
		}
		s.sem = make(chan struct{})
		s.hookBuffered(&fetch) // buffered, not polled
		s.cl.consumer.addSourceReadyForDraining(s)
	} else if allErrsStripped {
		// If we stripped all errors from the response, we are likely
		// fetching from topics that were deleted. We want to back off
		// a bit rather than spin-loop immediately re-requesting
		// deleted topics.
		backoff("empty fetch response due to all partitions having retryable errors")
	}
	return fetched
}

// Parses a fetch response into a Fetch, offsets to reload, and whether
// metadata needs updating.
//
// This function reads cursor fields which may be updated outside of consumer
// sessions, thus, we need to run this only inside a consumer session.
func (s *source) handleReqResp(br *broker, req *fetchRequest, resp *kmsg.FetchResponse) (
	f Fetch,
	reloadOffsets listOrEpochLoads,
	preferreds cursorPreferreds,
	allErrsStripped bool,
	updateWhy multiUpdateWhy,
) {
	f = Fetch{Topics: make([]FetchTopic, 0, len(resp.Topics))}
	var (
		debugWhyStripped multiUpdateWhy
		numErrsStripped  int
		kip320           = s.cl.supportsOffsetForLeaderEpoch()
		kmove            kip951move
		// seen guards against a broker returning the same partition (or the
		// same topic) more than once in a single fetch response. Each
		// requested partition maps to one stable *cursorOffsetNext for the
		// life of the request; processing one twice would double-advance its
		// offset / double-append its records, or enqueue two move()s for one
		// cursor (the #1167 concurrent-source hazard). We must not dedup by
		// deleting from req.usedOffsets - that map re-enables the cursor
		// after the response - so we track seen pointers separately.
		seen map[*cursorOffsetNext]struct{}
	)
	defer kmove.maybeBeginMove(s.cl)

	strip := func(t string, p int32, err error) {
		numErrsStripped++
		if s.cl.cfg.logger.Level() < LogLevelDebug {
			return
		}
		debugWhyStripped.add(t, p, err)
	}

	for _, rt := range resp.Topics {
		topic := rt.Topic
		// v13 only uses topic IDs, so we have to map the response
		// uuid's to our string topics.
		if resp.Version >= 13 {
			topic = req.id2topic[rt.TopicID]
		}

		// We always include all cursors on this source in the fetch;
		// we should not receive any topics or partitions we do not
		// expect.
		topicOffsets, ok := req.usedOffsets[topic]
		if !ok {
			s.cl.cfg.logger.Log(LogLevelWarn, "broker returned topic from fetch that we did not ask for",
				"broker", logID(s.nodeID),
				"topic", topic,
			)
			continue
		}

		fetchTopic := FetchTopic{
			Topic:      topic,
			TopicID:    rt.TopicID,
			Partitions: make([]FetchPartition, 0, len(rt.Partitions)),
		}

		for i := range rt.Partitions {
			rp := &rt.Partitions[i]
			partition := rp.Partition
			partOffset, ok := topicOffsets[partition]
			if !ok {
				s.cl.cfg.logger.Log(LogLevelWarn, "broker returned partition from fetch that we did not ask for",
					"broker", logID(s.nodeID),
					"topic", topic,
					"partition", partition,
				)
				continue
			}
			if _, dup := seen[partOffset]; dup {
				s.cl.cfg.logger.Log(LogLevelWarn, "broker returned a duplicate partition in a fetch response, ignoring the duplicate",
					"broker", logID(s.nodeID),
					"topic", topic,
					"partition", partition,
				)
				continue
			}
			if seen == nil {
				seen = make(map[*cursorOffsetNext]struct{}, req.numOffsets)
			}
			seen[partOffset] = struct{}{}
			c := partOffset.from

			// If we are fetching from the replica already, Kafka replies with a -1
			// preferred read replica. If Kafka replies with a preferred replica,
			// it sends no records.
			if preferred := rp.PreferredReadReplica; resp.Version >= 11 && preferred >= 0 {
				s.cl.sawPreferredReplica.Store(true)
				preferreds = append(preferreds, cursorOffsetPreferred{
					cursorOffsetNext: *partOffset,
					preferredReplica: preferred,
				})
				continue
			}

			priorOffset := partOffset.offset
			fp := partOffset.processRespPartition(br, rp, s.cl.cfg.decompressor, s.cl.cfg.hooks)
			if fp.Err != nil {
				if moving := kmove.maybeAddFetchPartition(resp, rp, c); moving {
					strip(topic, partition, fp.Err)
					continue
				}
				updateWhy.add(topic, partition, fp.Err)

				// Refetching the batch can only fail the same way.
				// We keep the partition so the error reaches
				// PollFetches, and the cursor stays unusable after
				// the fetch is drained.
				if tooLarge, ok := errors.AsType[*ErrDecompressTooLarge](fp.Err); ok {
					partOffset.from.fatal.Store(true)
					s.cl.cfg.logger.Log(LogLevelError, "batch decompresses larger than MaxDecompressBatchBytes, stopping consuming the partition; skip the batch with SetOffsets",
						"broker", logID(s.nodeID),
						"topic", topic,
						"partition", partition,
						"offset", tooLarge.Offset,
					)
				}
			}

			// A response can carry batch data for a partition yet
			// advance nothing: every batch's last offset below our
			// requested offset (a broker violating "return the batch
			// containing the fetch offset"). Nothing buffers, no
			// error is set, and the cursor re-enables at the same
			// offset, so the next fetch re-requests immediately and
			// the loop runs hot at round-trip pace. Strip the
			// partition: if the whole response is such non-progress,
			// the allErrsStripped backoff below paces us like any
			// other all-stripped response. Legitimate empties are
			// excluded: a caught-up partition has no batch bytes,
			// control/aborted records advance the offset even when
			// not kept, and a compacted empty batch advances via its
			// preserved last offset.
			if fp.Err == nil && len(fp.Records) == 0 && partOffset.offset == priorOffset && len(rp.RecordBatches) > 0 {
				strip(topic, partition, errFetchNoProgress)
				continue
			}

			// We only keep the partition if it has no error, or an
			// error we do not internally retry.
			var keep bool
			switch fp.Err {
			default:
				if kerr.IsRetriable(fp.Err) && !s.cl.cfg.keepRetryableFetchErrors {
					// UnknownLeaderEpoch: our meta is newer than the broker we fetched from
					// OffsetNotAvailable: fetched from out of sync replica or a behind in-sync one (KIP-392 case 1 and case 2)
					// UnknownTopicID: kafka has not synced the state on all brokers
					// And other standard retryable errors.
					strip(topic, partition, fp.Err)
				} else {
					// - bad auth
					// - unsupported compression
					// - unsupported message version
					// - unknown error
					// - or, no error
					keep = true
				}

			case nil:
				c.unknownIDFails.Store(0)
				keep = true

			case kerr.UnknownTopicID:
				// We need to keep UnknownTopicID even though it is
				// retryable, because encountering this error means
				// the topic has been recreated and we will never
				// consume the topic again anymore. This is an error
				// worth bubbling up.
				//
				// Kafka will actually return this error for a brief
				// window immediately after creating a topic for the
				// first time, meaning the controller has not yet
				// propagated to the leader that it is now the leader
				// of a new partition. We need to ignore this error
				// for a little bit.
				if fails := c.unknownIDFails.Add(1); fails > 5 {
					c.unknownIDFails.Add(-1)
					keep = true
				} else if s.cl.cfg.keepRetryableFetchErrors {
					keep = true
				} else {
					strip(topic, partition, fp.Err)
				}

			case kerr.OffsetOutOfRange:
				// If we are out of range, we reset to what we can.
				// With Kafka >= 2.1, we should only get offset out
				// of range if we fetch before the start, but a user
				// could start past the end and want to reset to
				// the end. We respect that.
				//
				// KIP-392 (case 3) specifies that if we are consuming
				// from a follower, then if our offset request is before
				// the low watermark, we list offsets from the follower.
				// However, Kafka does not actually implement handling
				// ListOffsets from anything from the leader, so we
				// need to redirect ourselves back to the leader.
				//
				// KIP-392 (case 4) specifies that if we are consuming
				// a follower and our request is larger than the high
				// watermark, then we should first check for truncation
				// from the leader and then if we still get out of
				// range, reset with list offsets.
				//
				// It further goes on to say that "out of range errors
				// due to ISR propagation delays should be extremely
				// rare". Rather than falling back to listing offsets,
				// we stay in a cycle of validating the leader epoch
				// until the follower has caught up.
				//
				// In all cases except case 4, we also have to check if
				// no reset offset was configured. If so, we ignore
				// trying to reset and instead keep our failed partition.
				addList := func(replica int32, log bool) {
					switch {
					case s.cl.cfg.resetOffset.noReset:
						keep = true

					case c.lastConsumedTime.IsZero():
						// Nothing consumed: a rewind has nothing to rewind from and
						// resumes at the log start.
						reset := s.cl.cfg.resetOffset
						if reset.at == atRewind {
							reset = NewOffset().AtStart()
						}
						reloadOffsets.addLoad(topic, partition, loadTypeList, offsetLoad{
							replica: replica,
							Offset:  reset,
						})
						if log {
							s.cl.cfg.logger.Log(LogLevelInfo, "received OFFSET_OUT_OF_RANGE on the first fetch, resetting to the configured ConsumeResetOffset",
								"broker", logID(s.nodeID),
								"topic", topic,
								"partition", partition,
								"prior_offset", partOffset.offset,
							)
						}

					default:
						// We were consuming and the log changed under us. If we fell below the log start, the
						// start is exact and we resume there. Otherwise the broker lost data at a point we
						// cannot determine, and ConsumeResetOffset decides; see listOffsetsForBrokerLoad. The
						// epoch never reaches the wire on a list load; we carry the epoch we consumed at so
						// the reset can report it in ErrDataLoss.
						reloadOffsets.addLoad(topic, partition, loadTypeList, offsetLoad{
							replica:           replica,
							lastConsumedMilli: c.lastConsumedMilli(),
							Offset:            NewOffset().At(partOffset.offset).WithEpoch(c.lastConsumedEpoch),
						})
						if log {
							s.cl.cfg.logger.Log(LogLevelWarn, "received OFFSET_OUT_OF_RANGE while consuming;"+
								" either you were consuming too slowly and the broker has deleted the segment you were in the middle of consuming,"+
								" in which case we resume at the log start,"+
								" or the broker has lost data, in which case we resume per ConsumeResetOffset",
								"broker", logID(s.nodeID),
								"topic", topic,
								"partition", partition,
								"prior_offset", partOffset.offset,
							)
						}
					}
				}

				switch {
				case s.nodeID == c.leader: // non KIP-392 case
					addList(-1, true)

				case partOffset.offset < fp.LogStartOffset: // KIP-392 case 3
					// KIP-392 specifies that we should list offsets against the follower,
					// but that actually is not supported and the Java client redirects
					// back to the leader. The leader then does *not* direct the client
					// back to the follower because the follower is not an in sync
					// replica. If we did not redirect back to the leader, we would spin
					// loop receiving offset_out_of_range from the follower for Fetch, and
					// then not_leader_or_follower from the follower for ListOffsets
					// (even though it is a follower). So, we just set the preferred replica
					// back to the follower. We go directly back to fetching with the
					// hope that the offset is available on the leader, and if not, we'll
					// just get an OOOR error again and fall into case 1 just above.
					preferreds = append(preferreds, cursorOffsetPreferred{
						cursorOffsetNext: *partOffset,
						preferredReplica: c.leader,
						ooor:             true,
					})

				default: // partOffset.offset > fp.HighWatermark, KIP-392 case 4
					if kip320 {
						reloadOffsets.addLoad(topic, partition, loadTypeEpoch, offsetLoad{
							replica: -1,
							// If the validation answers UNDEFINED_EPOCH_OFFSET, the reset it issues follows
							// ConsumeResetOffset; see loadEpochsForBrokerLoad.
							lastConsumedMilli: c.lastConsumedMilli(),
							Offset: Offset{
								at:    partOffset.offset,
								epoch: partOffset.lastConsumedEpoch,
							},
						})
					} else {
						// If the broker does not support offset for leader epoch but
						// does support follower fetching for some reason, we have to
						// fallback to listing.
						addList(-1, true)
					}
				}

			case kerr.FencedLeaderEpoch:
				// With fenced leader epoch, we notify an error only
				// if necessary after we find out if loss occurred.
				// If we have consumed nothing, then we got unlucky
				// by being fenced right after we grabbed metadata.
				// We just refresh metadata and try again.
				//
				// It would be odd for a broker to reply we are fenced
				// but not support offset for leader epoch, so we do
				// not check KIP-320 support here.
				if partOffset.lastConsumedEpoch >= 0 {
					reloadOffsets.addLoad(topic, partition, loadTypeEpoch, offsetLoad{
						replica: -1,
						// If the validation answers UNDEFINED_EPOCH_OFFSET, the reset it issues follows
						// ConsumeResetOffset; see loadEpochsForBrokerLoad.
						lastConsumedMilli: c.lastConsumedMilli(),
						Offset: Offset{
							at:    partOffset.offset,
							epoch: partOffset.lastConsumedEpoch,
						},
					})
				}
			}

			if keep {
				fetchTopic.Partitions = append(fetchTopic.Partitions, fp)
			}
		}

		if len(fetchTopic.Partitions) > 0 {
			f.Topics = append(f.Topics, fetchTopic)
		}
	}

	if s.cl.cfg.logger.Level() >= LogLevelDebug && len(debugWhyStripped) > 0 {
		s.cl.cfg.logger.Log(LogLevelDebug, "fetch stripped partitions", "why", debugWhyStripped.reason(""))
	}

	return f, reloadOffsets, preferreds, req.numOffsets == numErrsStripped, updateWhy
}

func (o *cursorOffsetNext) processRespPartition(br *broker, rp *kmsg.FetchResponseTopicPartition, decompressor Decompressor, hooks hooks) (fp FetchPartition) {
	if rp.ErrorCode == 0 {
		o.hwm = rp.HighWatermark
	}
	opts := ProcessFetchPartitionOpts{
		KeepControlRecords:   br.cl.cfg.keepControl,
		DisableCRCValidation: br.cl.cfg.disableFetchCRCValidation,
		Offset:               o.offset,
		IsolationLevel:       IsolationLevel{br.cl.cfg.isolationLevel},
		Topic:                o.from.topic,
		Partition:            o.from.partition,
		Pools:                br.cl.cfg.pools,

		lastEpoch: &o.lastConsumedEpoch,
	}
	fp, o.offset = ProcessFetchPartition(opts, rp, decompressor, func(m FetchBatchMetrics) {
		hooks.each(func(h Hook) {
			if h, ok := h.(HookFetchBatchRead); ok {
				h.OnFetchBatchRead(br.meta, o.from.topic, o.from.partition, m)
			}
		})
	})
	if len(fp.Records) > 0 {
		o.lastConsumedTime = fp.Records[len(fp.Records)-1].Timestamp
	}

	return fp
}

// ProcessFetchPartitionOpts contains required inputs for processing a fetch
// partition and options for how records & offsets should be processed.
type ProcessFetchPartitionOpts struct {
	// KeepControlRecords sets the parser to keep control messages and
	// return them with fetches, overriding the default that discards them.
	//
	// Generally, control messages are not useful. This field is the same
	// as [KeepControlRecords].
	KeepControlRecords bool

	// DisableCRCValidation opts out of validating the CRC prefixing
	// every batch. This should only be true if your broker does not
	// properly support CRCs.
	DisableCRCValidation bool

	// Offset is the minimum offset for which we'll parse records. Records
	// with lower offsets will not be parsed or returned.
	Offset int64

	// IsolationLevel controls whether or not to return uncommitted records.
	// See [IsolationLevel].
	IsolationLevel IsolationLevel

	// Topic is used to populate the Topic field of each Record.
	Topic string

	// Partition is used to populate the Partition field of each Record.
	Partition int32

	// Pools contain potential pools to use for memory pooling.
	Pools []Pool

	// shareAckSlab, if non-nil, is called once per decoded batch
	// to allocate a slab for share group ack state tracking. The
	// slab is injected into each record's context via shareAckKey.
	shareAckSlab func(numRecords int, firstRecord *Record) *shareAckSlab

	// lastEpoch, if non-nil, is set to the leader epoch of each decoded
	// record or batch that moves Offset forward, including control records
	// and aborted batches that are not returned.
	lastEpoch *int32
}

// ProcessFetchPartition processes all records in all batches or message sets
// in a *kmsg.FetchResponseTopicPartition, returning the processed
// FetchPartition and the offset of the last record that was processed. If
// hooks is non-nil, it is called with the metrics from processing this batch.
//
// This function is useful when issuing manual Fetch requests for records or in
// any scenario where you want to process raw fetch responses.
func ProcessFetchPartition(o ProcessFetchPartitionOpts, rp *kmsg.FetchResponseTopicPartition, decompressor Decompressor, hooks func(FetchBatchMetrics)) (FetchPartition, int64) {
	fp := FetchPartition{
		Partition:        rp.Partition,
		Err:              kerr.ErrorForCode(rp.ErrorCode),
		HighWatermark:    rp.HighWatermark,
		LastStableOffset: rp.LastStableOffset,
		LogStartOffset:   rp.LogStartOffset,
	}

	var aborter aborter
	if o.IsolationLevel.level == 1 {
		aborter = buildAborter(rp)
	}

	// A response could contain any of message v0, message v1, or record
	// batches, and this is solely dictated by the magic byte (not the
	// fetch response version). The magic byte is located at byte 17.
	//
	// 1 thru 8: int64 offset / first offset
	// 9 thru 12: int32 length
	// 13 thru 16: crc (magic 0 or 1), or partition leader epoch (magic 2)
	// 17: magic
	//
	// We decode and validate similarly for messages and record batches, so
	// we "abstract" away the high level stuff into a check function just
	// below, and then switch based on the magic for how to process.
	var (
		in = rp.RecordBatches

		r           readerFrom
		kind        string
		length      int32
		lengthField *int32
		crcField    *int32
		crcTable    *crc32.Table
		crcAt       int

		check = func() bool {
			// If we call into check, we know we have a valid
			// length, so we should be at least able to parse our
			// top level struct and validate the length and CRC.
			if err := r.ReadFrom(in[:length]); err != nil {
				fp.Err = fmt.Errorf("unable to read %s, not enough data", kind)
				return false
			}
			if length := int32(len(in[12:length])); length != *lengthField {
				fp.Err = fmt.Errorf("encoded length %d does not match read length %d", *lengthField, length)
				return false
			}
			// We have already validated that the slice is at least
			// 17 bytes, but our CRC may be later (i.e. RecordBatch
			// starts at byte 21). Ensure there is at least space
			// for a CRC.
			if !o.DisableCRCValidation {
				if len(in) < crcAt {
					fp.Err = fmt.Errorf("length %d is too short to allow for a crc", len(in))
					return false
				}
				if crcCalc := int32(crc32.Checksum(in[crcAt:length], crcTable)); crcCalc != *crcField {
					fp.Err = fmt.Errorf("encoded crc %x does not match calculated crc %x", *crcField, crcCalc)
					return false
				}
			}
			return true
		}
	)

	for len(in) > 17 && fp.Err == nil {
		offset := int64(binary.BigEndian.Uint64(in))
		length = int32(binary.BigEndian.Uint32(in[8:]))
		length += 12 // for the int64 offset we skipped and int32 length field itself
		// length is read as a signed int32: a high-bit-set length field (or a
		// near-MaxInt32 one, which overflows negative once we add 12) is
		// negative and would slip past the truncation check below, panicking
		// check()'s in[:length] with a negative bound. Treat a negative length
		// as an untrustworthy/truncated batch and stop, matching the negative
		// guards already in parseReadSize and the xerial decoder.
		if length < 0 || len(in) < int(length) {
			break
		}

		switch magic := in[16]; magic {
		case 0:
			m := new(kmsg.MessageV0)
			kind = "message v0"
			lengthField = &m.MessageSize
			crcField = &m.CRC
			crcTable = crc32.IEEETable
			crcAt = 16
			r = m
		case 1:
			m := new(kmsg.MessageV1)
			kind = "message v1"
			lengthField = &m.MessageSize
			crcField = &m.CRC
			crcTable = crc32.IEEETable
			crcAt = 16
			r = m
		case 2:
			rb := new(kmsg.RecordBatch)
			kind = "record batch"
			lengthField = &rb.Length
			crcField = &rb.CRC
			crcTable = crc32c
			crcAt = 21
			r = rb

		default:
			fp.Err = fmt.Errorf("unknown magic %d; message offset is %d and length is %d, skipping and setting to next offset", magic, offset, length)
			if next := offset + 1; next > o.Offset {
				o.Offset = next
			}
			return fp, o.Offset
		}

		if !check() {
			break
		}

		in = in[length:]

		var m FetchBatchMetrics

		switch t := r.(type) {
		case *kmsg.MessageV0:
			m.CompressedBytes = int(length) // for message sets, we include the message set overhead in length
			m.CompressionType = uint8(t.Attributes) & 0b0000_0111
			m.NumRecords, m.UncompressedBytes = o.processV0OuterMessage(&fp, t, decompressor)

		case *kmsg.MessageV1:
			m.CompressedBytes = int(length)
			m.CompressionType = uint8(t.Attributes) & 0b0000_0111
			m.NumRecords, m.UncompressedBytes = o.processV1OuterMessage(&fp, t, decompressor)

		case *kmsg.RecordBatch:
			m.CompressedBytes = len(t.Records) // for record batches, we only track the record batch length
			m.CompressionType = uint8(t.Attributes) & 0b0000_0111
			m.NumRecords, m.UncompressedBytes = o.processRecordBatch(&fp, t, aborter, decompressor)
		}

		if m.UncompressedBytes == 0 {
			m.UncompressedBytes = m.CompressedBytes
		}
		if hooks != nil {
			hooks(m)
		}

		// If we encounter a decompression error BUT we have successfully decompressed
		// one batch, it is likely that we have received a partial batch. Kafka returns
		// UP TO the requested max partition bytes, sometimes truncating data at the end.
		// It returns at least one valid batch, but everything after is copied as is
		// (i.e. a quick slab copy). We set the error to nil and return what we have.
		//
		// If we have a decompression error immediately, we keep it and bubble it up.
		// The client cannot progress, and the end user needs visibility.
		if isDecompressErr(fp.Err) && len(fp.Records) > 0 {
			fp.Err = nil
			break
		}
	}

	return fp, o.Offset
}

func (o *ProcessFetchPartitionOpts) decompress(decompressor Decompressor, src []byte, compression CompressionCodecType, offset, nextOffset int64, epoch int32) ([]byte, error) {
	out, err := decompressor.Decompress(src, compression)
	if err == nil {
		return out, nil
	}
	if errors.Is(err, ErrMaxDecompress) {
		err = &ErrDecompressTooLarge{
			Topic:      o.Topic,
			Partition:  o.Partition,
			Offset:     offset,
			Epoch:      epoch,
			NextOffset: nextOffset,
		}
	}
	return nil, &errDecompress{err}
}

type aborter map[int64][]int64

func buildAborter(rp *kmsg.FetchResponseTopicPartition) aborter {
	if len(rp.AbortedTransactions) == 0 {
		return nil
	}
	a := make(aborter)
	for _, abort := range rp.AbortedTransactions {
		a[abort.ProducerID] = append(a[abort.ProducerID], abort.FirstOffset)
	}
	// shouldAbortBatch and trackAbortedPID below both treat a[pid][0] as the
	// smallest remaining aborted first offset for that producer: a batch is
	// aborted once its FirstOffset reaches a[pid][0], and each abort marker
	// pops a[pid][0]. The broker is NOT required to return a producer's aborted
	// transactions sorted by first offset, though. Apache Kafka happens to (its
	// transaction index is appended in last-offset order, which for one
	// producer's strictly sequential transactions coincides with first-offset
	// order), but Redpanda concatenates its newest in-memory aborted ranges
	// (highest offsets) ahead of older on-disk snapshot ranges, so one
	// producer's entries can arrive highest-first-offset first. With a[pid][0]
	// not the smallest, a lower aborted transaction slips past the
	// `FirstOffset < pidAborts[0]` guard and its records are surfaced to the
	// application as committed - a read_committed violation. Sort each
	// producer's first offsets ascending to restore the invariant the rest of
	// the filtering relies on (the Java client makes the same guarantee with a
	// first-offset-ordered priority queue).
	for pid := range a {
		slices.Sort(a[pid])
	}
	return a
}

func (a aborter) shouldAbortBatch(b *kmsg.RecordBatch) bool {
	if len(a) == 0 || b.Attributes&0b0001_0000 == 0 {
		return false
	}
	pidAborts := a[b.ProducerID]
	if len(pidAborts) == 0 {
		return false
	}
	// If the first offset in this batch is less than the first offset
	// aborted, then this batch is not aborted.
	if b.FirstOffset < pidAborts[0] {
		return false
	}
	return true
}

func (a aborter) trackAbortedPID(producerID int64) {
	pidAborts := a[producerID]
	if len(pidAborts) == 0 {
		// Already exhausted for this PID. A well-formed response pops once
		// per aborted transaction (one abort marker each), so this is only
		// reachable from a buggy/hostile broker; reslicing a[producerID][1:]
		// on the nil/empty slice would panic. Java removes the PID from a Set
		// here, which is idempotent - mirror that.
		return
	}
	remaining := pidAborts[1:]
	if len(remaining) == 0 {
		delete(a, producerID)
	} else {
		a[producerID] = remaining
	}
}

//////////////////////////////////////
// processing records to fetch part //
//////////////////////////////////////

func (o *ProcessFetchPartitionOpts) processRecordBatch(
	fp *FetchPartition,
	batch *kmsg.RecordBatch,
	aborter aborter,
	decompressor Decompressor,
) (int, int) {
	if batch.Magic != 2 {
		fp.Err = fmt.Errorf("unknown batch magic %d", batch.Magic)
		return 0, 0
	}
	lastOffset := batch.FirstOffset + int64(batch.LastOffsetDelta)
	if lastOffset < o.Offset {
		// If the last offset in this batch is less than what we asked
		// for, we got a batch that we entirely do not need. We can
		// avoid all work (although we should not get this batch).
		return 0, 0
	}

	var usesPools bool

	rawRecords := batch.Records
	var decompressBytes []byte
	if compression := CompressionCodecType(batch.Attributes & 0x0007); compression != 0 {
		var err error
		if rawRecords, err = o.decompress(decompressor, rawRecords, compression, batch.FirstOffset, lastOffset+1, batch.PartitionLeaderEpoch); err != nil {
			fp.Err = err
			return 0, 0 // truncated batch
		}
		// We only put back into the decompress pool IF we decompressed
		// AND if a pool implement the interface AND if the batch was
		// actually compressed. The default decompressor uses the pool
		// if present, and it is expected that users overriding the
		// decompressor use the pool as well (if provided to the
		// client). Worst case, the use gets data put back into their
		// pool that they didn't create.
		pools(o.Pools).each(func(p Pool) bool {
			if _, ok := p.(PoolDecompressBytes); ok {
				decompressBytes = rawRecords
				usesPools = true
				return true
			}
			return false
		})
	}

	uncompressedBytes := len(rawRecords)

	numRecords := int(batch.NumRecords)
	// NumRecords is decoded straight off the wire and is therefore
	// attacker/bug controlled. A negative count would panic the slice
	// sizing below (ensureLen does s[:n], which panics for n<0); reject it
	// as a corrupt batch, matching the Java client's InvalidRecordException
	// guard (DefaultRecordBatch: "Found invalid record count"). A count
	// larger than the available record bytes is likewise impossible for a
	// well-formed batch - every record needs at least one byte - so clamp
	// the up-front allocation to the byte count to keep a bogus huge count
	// from driving a massive allocation. The true decodable count is
	// recomputed by readRawRecordsDirect, and the truncation defer below
	// leaves the offset unadvanced whenever it disagrees with numRecords.
	if numRecords < 0 {
		fp.Err = fmt.Errorf("invalid record batch: negative record count %d", numRecords)
		return 0, 0
	}
	if numRecords > len(rawRecords) {
		// A batch claiming records with ZERO record bytes deserves a
		// special word: the clamp below would make it decode zero
		// records "successfully", and the KAFKA-5443 defer would then
		// advance the offset past the batch's whole claimed range -- a
		// silent skip of offsets the broker asserts hold records. The
		// legitimate compacted-empty batch (KAFKA-5443) claims ZERO
		// records, so claiming more with no bytes is corruption; error
		// loudly like the Java client's InvalidRecordException instead
		// of silently skipping.
		if len(rawRecords) == 0 {
			fp.Err = fmt.Errorf("invalid record batch: %d claimed records with no record bytes", numRecords)
			return 0, uncompressedBytes
		}
		numRecords = len(rawRecords)
	}

	// Presize for the first batch; later batches grow the slice normally.
	if cap(fp.Records) == 0 {
		fp.Records = make([]*Record, 0, numRecords)
	}

	var ndecoded int // set once we decode, below

	// KAFKA-5443: compacted topics preserve the last offset in a batch,
	// even if the last record is removed, meaning that using offsets from
	// records alone may not get us to the next offset we need to ask for.
	//
	// We only perform this logic if we did not consume a truncated batch.
	// If we consume a truncated batch, then what was truncated could have
	// been an offset we are interested in consuming. Even if our fetch did
	// not advance this partition at all, we will eventually fetch from the
	// partition and not have a truncated response, at which point we will
	// either advance offsets or will set to nextAskOffset.
	nextAskOffset := lastOffset + 1
	defer func() {
		if numRecords == ndecoded && o.Offset < nextAskOffset {
			o.Offset = nextAskOffset
			if o.lastEpoch != nil {
				*o.lastEpoch = batch.PartitionLeaderEpoch
			}
		}
	}()

	abortBatch := aborter.shouldAbortBatch(batch)
	var rrecords []Record
	pools(o.Pools).each(func(p Pool) bool {
		if precs, ok := p.(PoolRecords); ok {
			rrecords = precs.GetRecords(numRecords)
			usesPools = true
			return true
		}
		return false
	})
	rrecords = ensureLen(rrecords, numRecords)

	var p *recordPools
	var poolsCtx context.Context
	if usesPools {
		p, poolsCtx = recordPoolsCtx(o.Pools, decompressBytes, rrecords)
	}

	recordCtx := poolsCtx
	var slabbed bool
	if o.shareAckSlab != nil && len(rrecords) > 0 {
		if slab := o.shareAckSlab(numRecords, &rrecords[0]); slab != nil {
			slabbed = true
			parent := poolsCtx
			if parent == nil {
				parent = context.Background()
			}
			recordCtx = context.WithValue(parent, shareAckKey, slab)
		}
	}

	ndecoded = readRawRecordsDirect(recordCtx, rrecords, rawRecords, o.Topic, fp.Partition, batch)
	var nkept int
	defer func() {
		if p == nil {
			return
		}
		if nkept > 0 {
			p.n.Add(int64(nkept))
			return
		}
		// No record from this batch was kept: an aborted transaction's
		// data batch, a control/marker batch, or a batch wholly below
		// the requested offset. Nothing will ever call Recycle, so the
		// recordPools put-back would never run and abort-heavy
		// read_committed workloads would leak every pool Get. Release
		// the pooled slices now, zeroing the written-then-discarded
		// records like Recycle would have. Skip when a share-ack slab
		// was created: the slab indexes rrecords by pointer, and putting
		// the slice back would let the pool hand out memory the slab
		// still references.
		if slabbed {
			return
		}
		clear(p.recs)
		p.release()
	}()

	// A control batch ends at most one aborted transaction for its producer,
	// so we pop the aborter at most once per batch. A well-formed control
	// batch holds a single marker record; a buggy/hostile broker can pack many
	// (and Java inspects only a control batch's first record), so without this
	// guard a second abort marker would pop an already-empty aborter slice.
	abortMarkerHandled := false
	for i := range ndecoded {
		record := &rrecords[i]

		if kept := o.maybeKeepRecord(fp, record, abortBatch); kept {
			nkept++
		}

		if abortBatch && !abortMarkerHandled && record.Attrs.IsControl() {
			// A control record has a key and a value where the key
			// is int16 version and int16 type. Aborted records
			// have a type of 0.
			if key := record.Key; len(key) >= 4 && key[2] == 0 && key[3] == 0 {
				aborter.trackAbortedPID(batch.ProducerID)
				abortMarkerHandled = true
			}
		}
	}

	return ndecoded, uncompressedBytes
}

// readRawRecordsDirect decodes up to len(rs) raw v2 records from in into rs,
// returning how many it decoded; it stops at the first record that is
// truncated or does not decode.
func readRawRecordsDirect(ctx context.Context, rs []Record, in []byte, topic string, partition int32, batch *kmsg.RecordBatch) int {
	var (
		attrs = RecordAttrs{uint8(batch.Attributes)}
		n     int
	)
	for ; n < len(rs); n++ {
		length, used := kbin.Varint(in)
		total := used + int(length)
		if used <= 0 || length < 0 || len(in) < total { // used < 0 is an overflowing varint
			break
		}
		b := kbin.Reader{Src: in[used:total]}
		b.Int8() // record attributes, unused
		tsDelta := b.Varlong()
		offsetDelta := b.Varint()
		key := b.VarintBytes()
		value := b.VarintBytes()
		var headers []RecordHeader
		if nh := int(b.VarintArrayLen()); nh > 0 {
			headers = make([]RecordHeader, nh)
			for i := range headers {
				headers[i] = RecordHeader{Key: b.VarintString(), Value: b.VarintBytes()}
			}
		}
		if !b.Ok() {
			break
		}

		r := &rs[n]
		r.Key = key
		r.Value = value
		r.Headers = headers
		r.Topic = topic
		r.Partition = partition
		r.Attrs = attrs
		r.ProducerID = batch.ProducerID
		r.ProducerEpoch = batch.ProducerEpoch
		r.LeaderEpoch = batch.PartitionLeaderEpoch
		if batch.FirstOffset == -1 {
			r.Offset = -1
		} else {
			r.Offset = batch.FirstOffset + int64(offsetDelta)
		}
		if attrs.TimestampType() == 0 {
			r.Timestamp = timeFromMillis(batch.FirstTimestamp + tsDelta)
		} else {
			r.Timestamp = timeFromMillis(batch.MaxTimestamp)
		}
		r.Context = ctx //nolint:fatcontext // not a nested context
		in = in[total:]
	}
	return n
}

// Processes an outer v1 message. There could be no inner message, which makes
// this easy, but if not, we decompress and process each inner message as
// either v0 or v1. We only expect the inner message to be v1, but technically
// a crazy pipeline could have v0 anywhere.
func (o *ProcessFetchPartitionOpts) processV1OuterMessage(
	fp *FetchPartition,
	message *kmsg.MessageV1,
	decompressor Decompressor,
) (int, int) {
	compression := CompressionCodecType(message.Attributes & 0x0003)
	if compression == 0 {
		o.processV1Message(fp, message)
		return 1, 0
	}

	rawInner, err := o.decompress(decompressor, message.Value, compression, message.Offset, message.Offset+1, -1)
	if err != nil {
		fp.Err = err
		return 0, 0 // truncated batch
	}

	uncompressedBytes := len(rawInner)

	var innerMessages []readerFrom
out:
	for len(rawInner) > 17 { // magic at byte 17
		length := int32(binary.BigEndian.Uint32(rawInner[8:]))
		length += 12 // offset and length fields
		// A negative length (high-bit-set length field, signed int32) would
		// slip past the truncation check and panic rawInner[:length]; treat it
		// as a truncated message set. See the record-batch loop's guard.
		if length < 0 || len(rawInner) < int(length) {
			break
		}

		var (
			magic = rawInner[16]

			msg         readerFrom
			lengthField *int32
			crcField    *int32
		)

		switch magic {
		case 0:
			m := new(kmsg.MessageV0)
			msg = m
			lengthField = &m.MessageSize
			crcField = &m.CRC
		case 1:
			m := new(kmsg.MessageV1)
			msg = m
			lengthField = &m.MessageSize
			crcField = &m.CRC

		default:
			fp.Err = fmt.Errorf("message set v1 has inner message with invalid magic %d", magic)
			break out
		}

		if err := msg.ReadFrom(rawInner[:length]); err != nil {
			fp.Err = fmt.Errorf("unable to read message v%d, not enough data", magic)
			break
		}
		if length := int32(len(rawInner[12:length])); length != *lengthField {
			fp.Err = fmt.Errorf("encoded length %d does not match read length %d", *lengthField, length)
			break
		}
		if !o.DisableCRCValidation {
			if crcCalc := int32(crc32.ChecksumIEEE(rawInner[16:length])); crcCalc != *crcField {
				fp.Err = fmt.Errorf("encoded crc %x does not match calculated crc %x", *crcField, crcCalc)
				break
			}
		}
		innerMessages = append(innerMessages, msg)
		rawInner = rawInner[length:]
	}
	if len(innerMessages) == 0 {
		return 0, uncompressedBytes
	}

	// Inner offsets: the log cleaner preserves each retained inner
	// message's original offset, so a compacted compressed message set
	// legally contains offset gaps. For a v1 wrapper, inner offsets are
	// stored relative to the set's first offset and the wrapper carries
	// the absolute offset of the last inner message, so absolute =
	// (wrapper - lastInner) + inner. We previously relabeled inner
	// messages contiguously counting back from the wrapper offset, which
	// mislabels every record before a gap; a commit taken mid-set then
	// names an offset that skips real records for any other client
	// reading the log honestly. Kafka and librdkafka both honor the
	// stored offsets; downstream we already handle gapped offsets (see
	// maybeKeepRecord's compaction comment).
	//
	// Two wrapper quirks, matching Kafka's own consumer: a wrapper
	// offset of 0 means the inner offsets are used as-is (certain
	// versions of librdkafka produced wrapper offset 0), and a wrapper
	// offset below the last inner offset is an invalid set that we
	// surface rather than guess at.
	innerOffset := func(m readerFrom) int64 {
		switch m := m.(type) {
		case *kmsg.MessageV0:
			return m.Offset
		case *kmsg.MessageV1:
			return m.Offset
		}
		return 0
	}
	var base int64
	if message.Offset != 0 {
		lastInner := innerOffset(innerMessages[len(innerMessages)-1])
		if message.Offset < lastInner {
			fp.Err = fmt.Errorf("invalid compressed message set: wrapper offset %d is less than the last inner offset %d", message.Offset, lastInner)
			return 0, uncompressedBytes
		}
		base = message.Offset - lastInner
	}
	for i := range innerMessages {
		innerMessage := innerMessages[i]
		switch innerMessage := innerMessage.(type) {
		case *kmsg.MessageV0:
			innerMessage.Offset += base
			innerMessage.Attributes |= int8(compression)
			if !o.processV0Message(fp, innerMessage) {
				return i, uncompressedBytes
			}
		case *kmsg.MessageV1:
			innerMessage.Offset += base
			innerMessage.Attributes |= int8(compression)
			if !o.processV1Message(fp, innerMessage) {
				return i, uncompressedBytes
			}
		}
	}
	return len(innerMessages), uncompressedBytes
}

func (o *ProcessFetchPartitionOpts) processV1Message(
	fp *FetchPartition,
	message *kmsg.MessageV1,
) bool {
	if message.Magic != 1 {
		fp.Err = fmt.Errorf("unknown message magic %d", message.Magic)
		return false
	}
	if uint8(message.Attributes)&0b1111_0000 != 0 {
		fp.Err = fmt.Errorf("unknown attributes on message %d", message.Attributes)
		return false
	}
	record := v1MessageToRecord(o.Topic, fp.Partition, message)
	o.maybeKeepRecord(fp, record, false)
	return true
}

// Processes an outer v0 message. We expect inner messages to be entirely v0 as
// well, so this only tries v0 always.
func (o *ProcessFetchPartitionOpts) processV0OuterMessage(
	fp *FetchPartition,
	message *kmsg.MessageV0,
	decompressor Decompressor,
) (int, int) {
	compression := CompressionCodecType(message.Attributes & 0x0003)
	if compression == 0 {
		o.processV0Message(fp, message)
		return 1, 0 // uncompressed bytes is 0; set to compressed bytes on return
	}

	rawInner, err := o.decompress(decompressor, message.Value, compression, message.Offset, message.Offset+1, -1)
	if err != nil {
		fp.Err = err
		return 0, 0 // truncated batch
	}

	uncompressedBytes := len(rawInner)

	var innerMessages []kmsg.MessageV0
	for len(rawInner) > 17 { // magic at byte 17
		length := int32(binary.BigEndian.Uint32(rawInner[8:]))
		length += 12 // offset and length fields
		// A negative length (high-bit-set length field, signed int32) would
		// slip past the truncation check and panic rawInner[:length]; treat it
		// as a truncated message set. See the record-batch loop's guard.
		if length < 0 || len(rawInner) < int(length) {
			break // truncated batch
		}
		var m kmsg.MessageV0
		if err := m.ReadFrom(rawInner[:length]); err != nil {
			fp.Err = fmt.Errorf("unable to read message v0, not enough data")
			break
		}
		if length := int32(len(rawInner[12:length])); length != m.MessageSize {
			fp.Err = fmt.Errorf("encoded length %d does not match read length %d", m.MessageSize, length)
			break
		}
		if !o.DisableCRCValidation {
			if crcCalc := int32(crc32.ChecksumIEEE(rawInner[16:length])); crcCalc != m.CRC {
				fp.Err = fmt.Errorf("encoded crc %x does not match calculated crc %x", m.CRC, crcCalc)
				break
			}
		}
		innerMessages = append(innerMessages, m)
		rawInner = rawInner[length:]
	}
	if len(innerMessages) == 0 {
		return 0, uncompressedBytes
	}

	// For a v0 wrapper, inner offsets are stored ABSOLUTE (magic-0-era
	// brokers rewrote compressed sets server-side on append), so we use
	// them as-is; Kafka's own consumer does the same. The log cleaner
	// preserves retained messages' offsets, so gaps from compaction are
	// legal and handled downstream (see maybeKeepRecord). We previously
	// relabeled contiguously counting back from the wrapper offset,
	// mislabeling every record before a gap.
	for i := range innerMessages {
		innerMessage := &innerMessages[i]
		innerMessage.Attributes |= int8(compression)
		if !o.processV0Message(fp, innerMessage) {
			return i, uncompressedBytes
		}
	}
	return len(innerMessages), uncompressedBytes
}

func (o *ProcessFetchPartitionOpts) processV0Message(
	fp *FetchPartition,
	message *kmsg.MessageV0,
) bool {
	if message.Magic != 0 {
		fp.Err = fmt.Errorf("unknown message magic %d", message.Magic)
		return false
	}
	if uint8(message.Attributes)&0b1111_1000 != 0 {
		fp.Err = fmt.Errorf("unknown attributes on message %d", message.Attributes)
		return false
	}
	record := v0MessageToRecord(o.Topic, fp.Partition, message)
	o.maybeKeepRecord(fp, record, false)
	return true
}

// maybeKeepRecord keeps a record if it is within our range of offsets to keep.
//
// If the record is being aborted or the record is a control record and the
// client does not want to keep control records, this does not keep the record.
func (o *ProcessFetchPartitionOpts) maybeKeepRecord(fp *FetchPartition, record *Record, abort bool) (kept bool) {
	if record.Offset < o.Offset {
		// We asked for offset 5, but that was in the middle of a
		// batch; we got offsets 0 thru 4 that we need to skip.
		return false
	}

	// We only keep control records if specifically requested.
	if record.Attrs.IsControl() {
		abort = !o.KeepControlRecords
	}
	if !abort {
		fp.Records = append(fp.Records, record)
		kept = true
	}

	// The record offset may be much larger than our expected offset if the
	// topic is compacted.
	o.Offset = record.Offset + 1
	if o.lastEpoch != nil {
		*o.lastEpoch = record.LeaderEpoch
	}
	return kept
}

///////////////////////////////
// kmsg.Record to kgo.Record //
///////////////////////////////

func timeFromMillis(millis int64) time.Time {
	return time.Unix(0, millis*1e6)
}

func messageAttrsToRecordAttrs(attrs int8, v0 bool) RecordAttrs {
	uattrs := uint8(attrs)
	if v0 {
		uattrs |= 0b1000_0000
	}
	return RecordAttrs{uattrs}
}

func v0MessageToRecord(
	topic string,
	partition int32,
	message *kmsg.MessageV0,
) *Record {
	return &Record{
		Key:           message.Key,
		Value:         message.Value,
		Topic:         topic,
		Partition:     partition,
		Attrs:         messageAttrsToRecordAttrs(message.Attributes, true),
		ProducerID:    -1,
		ProducerEpoch: -1,
		LeaderEpoch:   -1,
		Offset:        message.Offset,
	}
}

func v1MessageToRecord(
	topic string,
	partition int32,
	message *kmsg.MessageV1,
) *Record {
	return &Record{
		Key:           message.Key,
		Value:         message.Value,
		Timestamp:     timeFromMillis(message.Timestamp),
		Topic:         topic,
		Partition:     partition,
		Attrs:         messageAttrsToRecordAttrs(message.Attributes, false),
		ProducerID:    -1,
		ProducerEpoch: -1,
		LeaderEpoch:   -1,
		Offset:        message.Offset,
	}
}

//////////////////
// fetchRequest //
//////////////////

type fetchRequest struct {
	version      int16
	maxWait      int32
	minBytes     int32
	maxBytes     int32
	maxPartBytes int32
	rack         string

	isolationLevel int8
	preferLagFn    PreferLagFn

	numOffsets  int
	usedOffsets usedOffsets

	torder []string           // order of topics to write
	porder map[string][]int32 // per topic, order of partitions to write

	// topic2id and id2topic track bidirectional lookup of topics and IDs
	// that are being added to *this* specific request. topic2id slightly
	// duplicates the map t2id in the fetch session, but t2id is different
	// in that t2id tracks IDs in use from all prior requests -- and,
	// importantly, t2id is cleared of IDs that are no longer used (see
	// ForgottenTopics).
	//
	// We need to have both a session t2id map and a request t2id map:
	//
	//   * The session t2id is what we use when creating forgotten topics.
	//   If we are forgetting a topic, the ID is not in the req t2id.
	//
	//   * The req topic2id is used for adding to the session t2id. When
	//   building a request, if the id is in req.topic2id but not
	//   session.t2id, we promote the ID into the session map.
	//
	// Lastly, id2topic is used when handling the response, as our reverse
	// lookup from the ID back to the topic (and then we work with the
	// topic name only). There is no equivalent in the session because
	// there is no need for the id2topic lookup ever in the session.
	topic2id map[string][16]byte
	id2topic map[[16]byte]string

	disableIDs bool // #295: using an old IBP on new Kafka results in ApiVersions advertising 13+ while the broker does not return IDs

	// Session is a copy of the source session at the time a request is
	// built. If the source is reset, the session it has is reset at the
	// field level only. Our view of the original session is still valid.
	session fetchSession

	// Snapshots of the topic / forgotten-topic slices from the
	// serialized kmsg.FetchRequest, captured at AppendTo time so fetch()
	// can apply them to s.session.used after a successful response.
	// Overwritten by each AppendTo call; the last call wins, which is
	// correct because only the last serialization made it onto the
	// wire.
	committedTopics    []kmsg.FetchRequestTopic
	committedForgotten []kmsg.FetchRequestForgottenTopic
}

func (f *fetchRequest) addCursor(c *cursor) {
	if f.usedOffsets == nil {
		f.usedOffsets = make(usedOffsets)
		f.id2topic = make(map[[16]byte]string)
		f.topic2id = make(map[string][16]byte)
		f.porder = make(map[string][]int32)
	}
	partitions := f.usedOffsets[c.topic]
	if partitions == nil {
		partitions = make(map[int32]*cursorOffsetNext)
		f.usedOffsets[c.topic] = partitions
		f.id2topic[c.topicID] = c.topic
		f.topic2id[c.topic] = c.topicID
		if c.topicID == noID {
			f.disableIDs = true
		}
		f.torder = append(f.torder, c.topic)
	}
	partitions[c.partition] = c.use()
	f.porder[c.topic] = append(f.porder[c.topic], c.partition)
	f.numOffsets++
}

// PreferLagFn accepts topic and partition lag, the previously determined topic
// order, and the previously determined per-topic partition order, and returns
// a new topic and per-topic partition order.
//
// Most use cases will not need to look at the prior orders, but they exist if
// you want to get fancy.
//
// You can return partial results: if you only return topics, partitions within
// each topic keep their prior ordering. If you only return some topics but not
// all, the topics you do not return / the partitions you do not return will
// retain their original ordering *after* your given ordering.
//
// NOTE: torderPrior and porderPrior must not be modified. To avoid a bit of
// unnecessary allocations, these arguments are views into data that is used to
// build a fetch request.
type PreferLagFn func(lag map[string]map[int32]int64, torderPrior []string, porderPrior map[string][]int32) ([]string, map[string][]int32)

// PreferLagAt is a simple PreferLagFn that orders the largest lag first, for
// any topic that is collectively lagging more than preferLagAt, and for any
// partition that is lagging more than preferLagAt.
//
// The function does not prescribe any ordering for topics that have the same
// lag. It is recommended to use a number more than 0 or 1: if you use 0, you
// may just always undo client ordering when there is no actual lag.
func PreferLagAt(preferLagAt int64) PreferLagFn {
	if preferLagAt < 0 {
		return nil
	}
	return func(lag map[string]map[int32]int64, _ []string, _ map[string][]int32) ([]string, map[string][]int32) {
		type plag struct {
			p   int32
			lag int64
		}
		type tlag struct {
			t   string
			lag int64
			ps  []plag
		}

		// First, collect all partition lag into per-topic lag.
		tlags := make(map[string]tlag, len(lag))
		for t, ps := range lag {
			for p, lag := range ps {
				prior := tlags[t]
				tlags[t] = tlag{
					t:   t,
					lag: prior.lag + lag,
					ps:  append(prior.ps, plag{p, lag}),
				}
			}
		}

		// We now remove topics and partitions that are not lagging
		// enough. Collectively, the topic could be lagging too much,
		// but individually, no partition is lagging that much: we will
		// sort the topic first and keep the old partition ordering.
		for t, tlag := range tlags {
			if tlag.lag < preferLagAt {
				delete(tlags, t)
				continue
			}
			for i := 0; i < len(tlag.ps); i++ {
				plag := tlag.ps[i]
				if plag.lag < preferLagAt {
					tlag.ps[i] = tlag.ps[len(tlag.ps)-1]
					tlag.ps = tlag.ps[:len(tlag.ps)-1]
					i--
				}
			}
		}
		if len(tlags) == 0 {
			return nil, nil
		}

		var sortedLags []tlag
		for _, tlag := range tlags {
			sort.Slice(tlag.ps, func(i, j int) bool { return tlag.ps[i].lag > tlag.ps[j].lag })
			sortedLags = append(sortedLags, tlag)
		}
		sort.Slice(sortedLags, func(i, j int) bool { return sortedLags[i].lag > sortedLags[j].lag })

		// We now return our laggy topics and partitions, and let the
		// caller add back any missing topics / partitions in their
		// prior order.
		torder := make([]string, 0, len(sortedLags))
		for _, t := range sortedLags {
			torder = append(torder, t.t)
		}
		porder := make(map[string][]int32, len(sortedLags))
		for _, tlag := range sortedLags {
			ps := make([]int32, 0, len(tlag.ps))
			for _, p := range tlag.ps {
				ps = append(ps, p.p)
			}
			porder[tlag.t] = ps
		}
		return torder, porder
	}
}

// If the end user prefers to consume lag, we reorder our previously ordered
// partitions, preferring first the laggiest topics, and then within those, the
// laggiest partitions.
func (f *fetchRequest) adjustPreferringLag() {
	if f.preferLagFn == nil {
		return
	}

	tall := make(map[string]struct{}, len(f.torder))
	for _, t := range f.torder {
		tall[t] = struct{}{}
	}
	pall := make(map[string][]int32, len(f.porder))
	for t, ps := range f.porder {
		pall[t] = slices.Clone(ps)
	}

	lag := make(map[string]map[int32]int64, len(f.torder))
	for t, ps := range f.usedOffsets {
		plag := make(map[int32]int64, len(ps))
		lag[t] = plag
		for p, c := range ps {
			hwm := max(c.hwm, 0)
			lag := hwm - c.offset
			if c.offset <= 0 {
				lag = hwm
			}
			if lag < 0 {
				lag = 0
			}
			plag[p] = lag
		}
	}

	torder, porder := f.preferLagFn(lag, f.torder, f.porder)
	if torder == nil && porder == nil {
		return
	}
	defer func() { f.torder, f.porder = torder, porder }()

	if len(torder) == 0 {
		torder = f.torder // user did not modify topic order, keep old order
	} else {
		// Remove any extra topics the user returned that we were not
		// consuming, and add all topics they did not give back.
		for i := 0; i < len(torder); i++ {
			t := torder[i]
			if _, exists := tall[t]; !exists {
				torder = slices.Delete(torder, i, i+1) // user gave topic we were not fetching
				i--
			}
			delete(tall, t)
		}
		for _, t := range f.torder {
			if _, exists := tall[t]; exists {
				torder = append(torder, t) // user did not return topic we were fetching
				delete(tall, t)
			}
		}
	}

	if len(porder) == 0 {
		porder = f.porder // user did not modify partition order, keep old order
		return
	}

	pused := make(map[int32]struct{})
	for t, ps := range pall {
		order, exists := porder[t]
		if !exists {
			porder[t] = ps // shortcut: user did not define this partition's oorder, keep old order
			continue
		}
		for _, p := range ps {
			pused[p] = struct{}{}
		}
		for i := 0; i < len(order); i++ {
			p := order[i]
			if _, exists := pused[p]; !exists {
				order = slices.Delete(order, i, i+1)
				i--
			}
			delete(pused, p)
		}
		for _, p := range f.porder[t] {
			if _, exists := pused[p]; exists {
				order = append(order, p)
				delete(pused, p)
			}
		}
		porder[t] = order
	}
}

func (*fetchRequest) Key() int16 { return 1 }
func (f *fetchRequest) MaxVersion() int16 {
	if f.disableIDs || f.session.disableIDs {
		return 12
	}
	return 18
}
func (f *fetchRequest) SetVersion(v int16) { f.version = v }
func (f *fetchRequest) GetVersion() int16  { return f.version }
func (f *fetchRequest) IsFlexible() bool   { return f.version >= 12 } // version 12+ is flexible
func (f *fetchRequest) AppendTo(dst []byte) []byte {
	req := kmsg.NewFetchRequest()
	req.Version = f.version
	req.ReplicaID = -1
	req.MaxWaitMillis = f.maxWait
	req.MinBytes = f.minBytes
	req.MaxBytes = f.maxBytes
	req.IsolationLevel = f.isolationLevel
	req.SessionID = f.session.id
	req.SessionEpoch = f.session.epoch
	req.Rack = f.rack

	// We track which partitions we add in this request; any partitions
	// missing that are already in the session get added to forgotten
	// topics at the end.
	var sessionUsed map[string]map[int32]struct{}
	if !f.session.killed {
		sessionUsed = make(map[string]map[int32]struct{}, len(f.usedOffsets))
	}

	f.adjustPreferringLag()

	for _, topic := range f.torder {
		partitions := f.usedOffsets[topic]

		var reqTopic *kmsg.FetchRequestTopic
		sessionTopic := f.session.lookupTopic(topic, f.topic2id)

		var usedTopic map[int32]struct{}
		if sessionUsed != nil {
			usedTopic = make(map[int32]struct{}, len(partitions))
		}

		for _, partition := range f.porder[topic] {
			cursorOffsetNext := partitions[partition]

			if usedTopic != nil {
				usedTopic[partition] = struct{}{}
			}

			if !sessionTopic.hasPartitionAt(
				partition,
				cursorOffsetNext.offset,
				cursorOffsetNext.currentLeaderEpoch,
			) {
				if reqTopic == nil {
					t := kmsg.NewFetchRequestTopic()
					t.Topic = topic
					t.TopicID = f.topic2id[topic]
					req.Topics = append(req.Topics, t)
					reqTopic = &req.Topics[len(req.Topics)-1]
				}

				reqPartition := kmsg.NewFetchRequestTopicPartition()
				reqPartition.Partition = partition
				reqPartition.CurrentLeaderEpoch = cursorOffsetNext.currentLeaderEpoch
				reqPartition.FetchOffset = cursorOffsetNext.offset
				reqPartition.LastFetchedEpoch = -1
				reqPartition.LogStartOffset = -1
				reqPartition.PartitionMaxBytes = f.maxPartBytes
				reqTopic.Partitions = append(reqTopic.Partitions, reqPartition)
			}
		}

		if sessionUsed != nil {
			sessionUsed[topic] = usedTopic
		}
	}

	// Now for everything that we did not use in our session, add it to
	// forgotten topics. The resulting ForgottenTopics list is what the
	// broker is asked to drop; the actual mutation of f.session.used and
	// f.session.t2id happens only after the response is processed, via
	// fetchSession.commitFromReq. Doing the mutation here would be
	// unsafe under broker.go's zero-bytes-written retry path, which can
	// call AppendTo a second time on the same *fetchRequest.
	if sessionUsed != nil {
		for topic, partitions := range f.session.used {
			var forgottenTopic *kmsg.FetchRequestForgottenTopic
			topicUsed := sessionUsed[topic]
			for partition := range partitions {
				if topicUsed != nil {
					if _, partitionUsed := topicUsed[partition]; partitionUsed {
						continue
					}
				}
				if forgottenTopic == nil {
					t := kmsg.NewFetchRequestForgottenTopic()
					t.Topic = topic
					t.TopicID = f.session.t2id[topic]
					req.ForgottenTopics = append(req.ForgottenTopics, t)
					forgottenTopic = &req.ForgottenTopics[len(req.ForgottenTopics)-1]
				}
				forgottenTopic.Partitions = append(forgottenTopic.Partitions, partition)
			}
		}
	}

	// Snapshot the topics / forgotten-topics so fetch() can commit them
	// to s.session.used after a successful response. Last AppendTo wins
	// (the last serialization is what actually went on the wire).
	f.committedTopics = req.Topics
	f.committedForgotten = req.ForgottenTopics

	return req.AppendTo(dst)
}

func (*fetchRequest) ReadFrom([]byte) error {
	panic("unreachable -- the client never uses ReadFrom on its internal fetchRequest")
}

func (f *fetchRequest) ResponseKind() kmsg.Response {
	r := kmsg.NewPtrFetchResponse()
	r.Version = f.version
	return r
}

// fetchSessions, introduced in KIP-227, allow us to send less information back
// and forth to a Kafka broker.
type fetchSession struct {
	id    int32
	epoch int32

	used map[string]map[int32]fetchSessionOffsetEpoch // what we have in the session so far
	t2id map[string][16]byte

	disableIDs bool // if anything in t2id has no ID
	killed     bool // if we cannot use a session anymore
}

func (s *fetchSession) kill() {
	s.epoch = -1
	s.used = nil
	s.t2id = nil
	s.disableIDs = false
	s.killed = true
}

// reset resets the session by setting the next request to use epoch 0.
// We do not reset the ID; using epoch 0 for an existing ID unregisters the
// prior session.
func (s *fetchSession) reset() {
	if s.killed {
		return
	}
	s.epoch = 0
	s.used = nil
	s.t2id = nil
	s.disableIDs = false
}

// commitFromReq applies to s the session-used mutations implied by a
// successful fetch request: partitions in req.Topics were TOLD to the
// broker at their FetchOffset/CurrentLeaderEpoch, and partitions in
// req.ForgottenTopics were TOLD to be removed. We call this only after
// the broker has acknowledged the request via a successful (non-error)
// response, guaranteeing the broker's session state matches what we're
// recording here.
func (s *fetchSession) commitFromReq(topics []kmsg.FetchRequestTopic, forgotten []kmsg.FetchRequestForgottenTopic) {
	if s.killed {
		return
	}
	if s.used == nil {
		s.used = make(map[string]map[int32]fetchSessionOffsetEpoch)
		s.t2id = make(map[string][16]byte)
	}
	for _, rt := range topics {
		topic := rt.Topic
		if topic == "" {
			continue
		}
		t := s.used[topic]
		if t == nil {
			t = make(map[int32]fetchSessionOffsetEpoch)
			s.used[topic] = t
			s.t2id[topic] = rt.TopicID
			if rt.TopicID == noID {
				s.disableIDs = true
			}
		}
		for _, rp := range rt.Partitions {
			t[rp.Partition] = fetchSessionOffsetEpoch{rp.FetchOffset, rp.CurrentLeaderEpoch}
		}
	}
	for _, rft := range forgotten {
		topic := rft.Topic
		if topic == "" {
			continue
		}
		t, ok := s.used[topic]
		if !ok {
			continue
		}
		for _, p := range rft.Partitions {
			delete(t, p)
		}
		if len(t) == 0 {
			id := s.t2id[topic]
			delete(s.used, topic)
			delete(s.t2id, topic)
			if id == noID {
				// Recompute disableIDs from remaining topics.
				s.disableIDs = false
				for _, tid := range s.t2id {
					if tid == noID {
						s.disableIDs = true
						break
					}
				}
			}
		}
	}
}

// bumpEpoch bumps the epoch and saves the session id.
//
// Kafka replies with the session ID of the session to use. When it does, we
// start from epoch 1, wrapping back to 1 if we go negative.
func (s *fetchSession) bumpEpoch(id int32) {
	if s.killed {
		return
	}
	if id != s.id {
		s.epoch = 0 // new session: reset to 0 for the increment below
	}
	s.epoch++
	if s.epoch < 0 {
		s.epoch = 1 // we wrapped: reset back to 1 to continue this session
	}
	s.id = id
}

func (s *fetchSession) lookupTopic(topic string, t2id map[string][16]byte) fetchSessionTopic {
	if s.killed {
		return nil
	}
	if s.used == nil {
		s.used = make(map[string]map[int32]fetchSessionOffsetEpoch)
		s.t2id = make(map[string][16]byte)
	}
	t := s.used[topic]
	if t == nil {
		t = make(map[int32]fetchSessionOffsetEpoch)
		s.used[topic] = t
		id := t2id[topic]
		s.t2id[topic] = id
		if id == noID {
			s.disableIDs = true
		}
	}
	return t
}

type fetchSessionOffsetEpoch struct {
	offset int64
	epoch  int32
}

type fetchSessionTopic map[int32]fetchSessionOffsetEpoch

// hasPartitionAt is a pure query: does s already track partition at the
// given offset/epoch? It must NOT mutate s. Session-used writes happen
// only after a successful response, via fetchSession.commitFromReq.
func (s fetchSessionTopic) hasPartitionAt(partition int32, offset int64, epoch int32) bool {
	if s == nil { // if we are nil, the session was killed
		return false
	}
	at, exists := s[partition]
	return exists && at == fetchSessionOffsetEpoch{offset, epoch}
}

///////////
// SHARE //
///////////

type shareBufferedFetch struct {
	fetch     Fetch
	doneFetch chan<- bool
}

func (s *source) signalShareAcks() {
	select {
	case s.share.ackCh <- struct{}{}:
	default:
	}
	s.maybeShareConsume()
}

func (s *source) signalShareAckFlush() {
	select {
	case s.share.ackFlushCh <- struct{}{}:
	default:
	}
	s.maybeShareConsume()
}

func (s *source) resetShareSession() {
	s.share.mu.Lock()
	prev := s.share.sessionEpoch
	s.share.sessionEpoch = 0
	s.share.sessionGen++
	clear(s.share.sessionParts) // must also be cleared, else we'll have a corrupted session
	s.share.mu.Unlock()
	s.cl.cfg.logger.Log(LogLevelDebug, "resetting share session",
		"broker", logID(s.nodeID),
		"prev_session_epoch", prev,
	)
}

// bumpShareSessionEpochIfCurrent increments the session epoch only if
// it still matches the caller-supplied epoch. Used after top-level
// errors that are NOT session-destroying: a concurrent manage
// goroutine may have reset our session mid-flight (UnknownMemberID
// path), in which case we must not bump because the reset set the
// epoch to 0.
func (s *source) bumpShareSessionEpochIfCurrent(epoch int32) {
	s.share.mu.Lock()
	if s.share.sessionEpoch == epoch {
		s.share.sessionEpoch = max(1, epoch+1) // MaxInt32 wraps to 1, as in Kafka
	}
	s.share.mu.Unlock()
}

func (s *source) removeShareCursor(c *shareCursor) {
	s.share.mu.Lock()
	if c.cursorsIdx != len(s.share.cursors)-1 {
		s.share.cursors[c.cursorsIdx], s.share.cursors[len(s.share.cursors)-1] = s.share.cursors[len(s.share.cursors)-1], nil
		s.share.cursors[c.cursorsIdx].cursorsIdx = c.cursorsIdx
	} else {
		s.share.cursors[c.cursorsIdx] = nil
	}
	s.share.cursors = s.share.cursors[:len(s.share.cursors)-1]
	if s.share.cursorsStart == len(s.share.cursors) {
		s.share.cursorsStart = 0
	}
	s.share.mu.Unlock()
	// We don't need to wake the source to send this as a forgotten
	// partition, but it doesn't hurt.
	s.maybeShareConsume()
}

func (s *source) addShareCursor(add *shareCursor) {
	s.share.mu.Lock()
	add.cursorsIdx = len(s.share.cursors)
	s.share.cursors = append(s.share.cursors, add)
	s.share.mu.Unlock()
	// A cursor migrating between sources may carry pending acks
	// from the old source. Signal the new source's loop so those
	// acks are drained rather than stranded.
	//
	// No lost-signal window with concurrent appendAck on the same
	// cursor: appendAck always (a) acquires c.ackMu to append the
	// new entry, then (b) releases c.ackMu, then (c) atomically
	// loads c.source and signals it. The interleavings:
	//
	//   - addShareCursor reads pending under c.ackMu before
	//     appendAck appends: hasPending may be false here, but
	//     appendAck's later c.source.Load() returns this new
	//     source (migrateShareCursorTo stored it before calling
	//     addShareCursor) and signals us directly.
	//   - addShareCursor reads pending after appendAck appends:
	//     hasPending is true and we signal here. appendAck's
	//     concurrent c.source-read+signal is a harmless duplicate.
	//
	// Either way, every appended entry is followed by a signal to
	// the cursor's current source. The same reasoning covers
	// pendingGaps via enqueueGaps' signal.
	add.ackMu.Lock()
	hasPending := len(add.pendingAcks) > 0 || len(add.pendingGaps) > 0
	add.ackMu.Unlock()
	if hasPending {
		s.signalShareAcks()
	}
	s.maybeShareConsume()
}
