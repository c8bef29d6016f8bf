package processor

import (
	"context"
	"sync"
	"sync/atomic"
)

// completionQueue hands finished items from the workers back to the loop.
type completionQueue struct {
	mu    sync.Mutex
	items []*item
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
	q.mu.Lock()
	q.items = append(q.items, it)
	q.mu.Unlock()
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
// takes the wake, so a burst of completions cancels the poll once.
func (q *completionQueue) wakePoll() {
	if wake := q.pollWake.Swap(nil); wake != nil {
		(*wake)()
	}
}

func (q *completionQueue) pending() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items) > 0
}

// take returns what was pushed, giving the queue into's array to reuse.
func (q *completionQueue) take(into []*item) []*item {
	q.mu.Lock()
	into, q.items = q.items, into[:0]
	q.mu.Unlock()
	return into
}

// requeue puts items taken but not handled back at the head of the queue,
// before any pushed since: they keep their order.
func (q *completionQueue) requeue(items []*item) {
	q.mu.Lock()
	q.items = append(append(make([]*item, 0, len(items)+len(q.items)), items...), q.items...)
	q.mu.Unlock()
}
