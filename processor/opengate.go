package processor

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// openGate holds a transaction's records until they may go out: until the
// transaction before it has flushed (after), and then until the
// transaction's first record, sent alone, is acknowledged.
//
// After: with transactions pipelined (WithTransactionPipeline), the next
// transaction fills on another producer while the one before it ends. Its
// records must reach each partition after the ending transaction's, or a
// session's later output could precede its earlier one there; so they wait
// for the ending transaction's flush, which is short beside its offset
// commit and EndTxn. With one producer, after is the ending transaction's
// whole end: the producer takes one transaction at a time.
//
// The first record alone: under transaction.version=2 a partition joins
// the transaction with its first produce, and the broker answers
// CONCURRENT_TRANSACTIONS while the coordinator still writes the
// producer's previous transaction's markers: on a replicated cluster that
// takes tens of milliseconds. franz-go keeps up to five requests in flight
// per broker, so a partition's later batches reached the broker before
// its refused first one and were rejected with
// OUT_OF_ORDER_SEQUENCE_NUMBER, and the commit waited seconds for the
// retry (finding 9 in docs/reliability.md). Once the first record is in,
// the coordinator has begun the new transaction and adds further
// partitions without a conflict. Handlers keep running while records are
// held; the loop starts no commit before the acknowledgement (holding)
// and goes on polling through it; commit releases what is held before its
// flush.
type openGate struct {
	// send begins the transaction if it has not begun and produces r; an
	// error is the begin's.
	send  func(r *kgo.Record, promise func(*kgo.Record, error)) error
	flush func(context.Context) error // waits for every buffered record
	wake  func()                      // interrupts the loop's poll
	ctx   context.Context             // ends the flush goroutines with the lifetime
	wg    *sync.WaitGroup             // the flush goroutines, the lifetime's
	after <-chan struct{}             // closed when the records may go out; nil: at once

	state gateState
	since time.Time // when the first record went out
	held  []heldRecord
	acked chan struct{} // closed when the first record is acknowledged
}

type gateState uint8

const (
	gateIdle    gateState = iota // nothing produced in this transaction yet
	gateWaiting                  // records wait for after
	gateHolding                  // the first record is out, the rest wait
	gateOpen                     // the first record is acknowledged
)

type heldRecord struct {
	r       *kgo.Record
	promise func(*kgo.Record, error)
}

// afterDone reports whether after is closed.
func (g *openGate) afterDone() bool {
	if g.after == nil {
		return true
	}
	select {
	case <-g.after:
		return true
	default:
		return false
	}
}

// produce sends r, or holds it.
func (g *openGate) produce(r *kgo.Record, promise func(*kgo.Record, error)) error {
	switch g.state {
	case gateIdle:
		if g.afterDone() {
			return g.sendFirst(heldRecord{r, promise})
		}
		g.state = gateWaiting
		fallthrough
	case gateWaiting, gateHolding:
		g.held = append(g.held, heldRecord{r, promise})
		return nil
	}
	return g.send(r, promise)
}

// sendFirst sends the transaction's first record alone and waits for its
// acknowledgement on a goroutine.
func (g *openGate) sendFirst(h heldRecord) error {
	if err := g.send(h.r, h.promise); err != nil {
		return err
	}
	g.state, g.since = gateHolding, time.Now()
	acked := make(chan struct{})
	g.acked = acked
	g.wg.Go(func() {
		// Only the first record is buffered: the flush sends it without
		// lingering and ends when it is acknowledged (a failure reaches
		// its promise).
		_ = g.flush(g.ctx)
		close(acked)
		g.wake()
	})
	return nil
}

// ready reports whether held records can move on: the first may go out,
// or the rest may follow it.
func (g *openGate) ready() bool {
	switch g.state {
	case gateWaiting:
		return g.afterDone()
	case gateHolding:
		select {
		case <-g.acked:
			return true
		default:
		}
	}
	return false
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

// releaseIfReady moves held records on as far as they may go now.
func (g *openGate) releaseIfReady() error {
	if g.state == gateWaiting && g.afterDone() {
		if err := g.takeFirst(); err != nil {
			return err
		}
	}
	if g.ready() {
		return g.release()
	}
	return nil
}

// takeFirst sends the first held record alone.
func (g *openGate) takeFirst() error {
	first := g.held[0]
	g.held[0] = heldRecord{}
	g.held = g.held[1:]
	return g.sendFirst(first)
}

// releaseForCommit waits for what the gate waits for, then sends what is
// held and opens the gate for the commit's own records. Sending the held
// records before the first is in would bring back the race the gate
// prevents.
func (g *openGate) releaseForCommit(ctx context.Context) error {
	if g.state == gateWaiting {
		select {
		case <-g.after:
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := g.takeFirst(); err != nil {
			return err
		}
	}
	if g.state == gateHolding {
		select {
		case <-g.acked:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return g.release()
}

// release sends what is held, in order, and opens the gate for the rest
// of the transaction.
func (g *openGate) release() error {
	g.state = gateOpen
	for i, h := range g.held {
		g.held[i] = heldRecord{}
		if err := g.send(h.r, h.promise); err != nil {
			g.held = g.held[i+1:]
			return err
		}
	}
	g.held = g.held[:0]
	return nil
}
