package processor

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestCompletionQueueWakes: every push leaves a wake pending on the
// channel (so a loop waiting in waitInFlight or endTxn sees it), a burst
// sends at most one, and an armed poll is interrupted once per arming.
func TestCompletionQueueWakes(t *testing.T) {
	for _, tc := range []struct {
		ops string // arm, push, recv (drain the wake channel), take
		// after the last op:
		wake     bool // a wake is pending
		cancels  int  // times an armed poll was interrupted
		taken    int  // items the takes returned, together
		left     int  // items still queued
		stillArm bool // the poll's wake is still armed
	}{
		{ops: "push", wake: true, left: 1},
		{ops: "push push push", wake: true, left: 3},
		{ops: "push recv", left: 1},
		{ops: "push recv push", wake: true, left: 2},
		{ops: "push recv take push", wake: true, taken: 1, left: 1},
		{ops: "arm", stillArm: true},
		{ops: "arm push push", wake: true, cancels: 1, left: 2},
		{ops: "arm push arm push", wake: true, cancels: 2, left: 2},
		{ops: "push arm", wake: true, left: 1, stillArm: true}, // the loop checks pending() after arming
		{ops: "arm push recv take arm push", wake: true, cancels: 2, taken: 1, left: 1},
	} {
		t.Run(tc.ops, func(t *testing.T) {
			q := newCompletionQueue()
			cancels, taken := 0, 0
			for _, op := range strings.Fields(tc.ops) {
				switch op {
				case "arm":
					_, cancel := context.WithCancel(context.Background())
					f := context.CancelFunc(func() { cancels++; cancel() })
					q.pollWake.Store(&f)
				case "push":
					q.push(&item{})
					if len(q.wake) != 1 {
						t.Fatalf("after a push no wake is pending")
					}
				case "recv":
					<-q.wake
				case "take":
					taken += len(q.take(nil))
				default:
					t.Fatalf("unknown op %q", op)
				}
			}
			if got := len(q.wake) == 1; got != tc.wake {
				t.Errorf("wake pending = %v, want %v", got, tc.wake)
			}
			if cancels != tc.cancels {
				t.Errorf("poll interrupted %d times, want %d", cancels, tc.cancels)
			}
			if taken != tc.taken {
				t.Errorf("took %d items, want %d", taken, tc.taken)
			}
			if left := len(q.take(nil)); left != tc.left {
				t.Errorf("%d items left, want %d", left, tc.left)
			}
			if got := q.pollWake.Load() != nil; got != tc.stillArm {
				t.Errorf("poll wake armed = %v, want %v", got, tc.stillArm)
			}
		})
	}
}

// TestCompletionQueueNoLostWake: a loop that takes only after a wake
// (as waitInFlight does) sees every item concurrent pushers hand it.
func TestCompletionQueueNoLostWake(t *testing.T) {
	const pushers, each = 4, 20000
	q := newCompletionQueue()
	for range pushers {
		go func() {
			for range each {
				q.push(&item{})
			}
		}()
	}
	var got int
	var buf []*item
	timeout := time.After(time.Minute)
	for got < pushers*each {
		select {
		case <-q.wake:
		case <-timeout:
			t.Fatalf("no wake for %d of %d items", pushers*each-got, pushers*each)
		}
		buf = q.take(buf)
		got += len(buf)
	}
}
