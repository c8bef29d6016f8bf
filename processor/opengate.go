package processor

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// openGate sends a transaction's first record alone and holds the rest
// until the client has it acknowledged.
//
// Under transaction.version=2 a partition joins the transaction with its
// first produce, and the broker answers CONCURRENT_TRANSACTIONS while the
// coordinator still writes the previous transaction's markers: on a
// replicated cluster that takes tens of milliseconds, and the loop starts
// producing the next transaction within one. franz-go keeps up to five
// requests in flight per broker, so a partition's later batches reached
// the broker before its refused first one and were rejected with
// OUT_OF_ORDER_SEQUENCE_NUMBER, and the commit waited seconds for the
// retry (finding 9 in docs/reliability.md).
//
// Once the first record is in, the coordinator has begun the new
// transaction and adds further partitions without a conflict. Handlers
// keep running while records are held; the cost is one produce round trip
// per transaction. The loop starts no commit before that round trip ends
// (holding) and goes on polling through it; commit releases what is held
// before its flush.
type openGate struct {
	send  func(*kgo.Record, func(*kgo.Record, error)) // the session's produce
	flush func(context.Context) error                 // waits for every buffered record
	wake  func()                                      // interrupts the loop's poll
	ctx   context.Context                             // ends the flush goroutines with the lifetime

	state gateState
	since time.Time // when the first record went out
	held  []heldRecord
	acked chan struct{} // closed when the open transaction's first record is acknowledged
	wg    sync.WaitGroup
}

type gateState uint8

const (
	gateIdle    gateState = iota // nothing produced in this transaction yet
	gateHolding                  // the first record is out, the rest wait
	gateOpen                     // the first record is acknowledged
)

type heldRecord struct {
	r       *kgo.Record
	promise func(*kgo.Record, error)
}

// produce sends r, or holds it while the transaction's first record is
// unacknowledged.
func (g *openGate) produce(r *kgo.Record, promise func(*kgo.Record, error)) {
	switch g.state {
	case gateHolding:
		g.held = append(g.held, heldRecord{r, promise})
		return
	case gateIdle:
		g.state, g.since = gateHolding, time.Now()
		acked := make(chan struct{})
		g.acked = acked
		g.send(r, promise)
		g.wg.Go(func() {
			// Only the first record is buffered: the flush sends it
			// without lingering and ends when it is acknowledged (a
			// failure reaches its promise).
			_ = g.flush(g.ctx)
			close(acked)
			g.wake()
		})
		return
	}
	g.send(r, promise)
}

// ready reports whether held records can go out.
func (g *openGate) ready() bool {
	if g.state != gateHolding {
		return false
	}
	select {
	case <-g.acked:
		return true
	default:
		return false
	}
}

// holding reports whether the transaction's first record has been out,
// unacknowledged, for less than limit at now. The loop starts no commit
// meanwhile: the commit would wait for the acknowledgement anyway
// (releaseForCommit), and until it starts the loop can still poll, so
// records fetched during the wait join this transaction instead of the
// next. The limit keeps a record that cannot be delivered from holding
// the commit, and its bounded flush, off for good.
func (g *openGate) holding(now time.Time, limit time.Duration) bool {
	return g.state == gateHolding && now.Sub(g.since) < limit
}

// releaseIfReady sends what is held once the first record is acknowledged.
func (g *openGate) releaseIfReady() {
	if g.ready() {
		g.release()
	}
}

// releaseForCommit waits for the first record, then sends what is held and
// opens the gate for the commit's own records. Sending the held records
// before the first is in would bring back the race the gate prevents.
func (g *openGate) releaseForCommit(ctx context.Context) error {
	if g.state == gateHolding {
		select {
		case <-g.acked:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	g.release()
	return nil
}

// release sends what is held, in order, and opens the gate for the rest
// of the transaction.
func (g *openGate) release() {
	g.state = gateOpen
	for i, h := range g.held {
		g.send(h.r, h.promise)
		g.held[i] = heldRecord{}
	}
	g.held = g.held[:0]
}

// reset closes the gate for the next transaction; what an aborted one held
// is dropped with it.
func (g *openGate) reset() {
	clear(g.held)
	g.held = g.held[:0]
	g.state, g.acked = gateIdle, nil
}

// wait returns once the flush goroutines have ended (after ctx is done).
func (g *openGate) wait() { g.wg.Wait() }
