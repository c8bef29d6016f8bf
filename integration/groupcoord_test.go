package integration

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow/internal/kafkatest"
)

// The tests below pin the classic group coordinator behaviour that the
// soak's liveness rests on, with raw JoinGroup/SyncGroup/Heartbeat
// requests (no processor, no franz-go group logic). Apache Kafka passes
// them; kfake (v0.0.0-20260918054303-01f206a7e32c, the newest) fails both,
// which is finding 5 in docs/reliability.md: a long kfake soak ends in a
// rebalance that never completes. They are skipped on kfake unless
// -kfake-group-conformance is set, so the default pass stays green while the
// deviation stays reproducible:
//
//	go test ./integration -run TestCoordinator -v -kfake-group-conformance
var kfakeGroupConformance = flag.Bool("kfake-group-conformance", false,
	"run the group coordinator conformance tests on kfake too (they fail there: finding 5)")

func skipOnKfake(t *testing.T) {
	t.Helper()
	if !kafkatest.Real() && !*kfakeGroupConformance {
		t.Skip("kfake's group coordinator deviates here (docs/reliability.md, finding 5); run with -kfake-group-conformance to see it")
	}
}

// TestCoordinatorExpiresUnreachableJoiner: a new static member whose
// connection dies while its first JoinGroup waits must still expire once
// the join completes (Kafka gives every member a session deadline when the
// join completes, delivered or not). In the soak this is a worker SIGKILLed
// (or replaced) moments after it started, during a rebalance.
//
// kfake arms the session timer only when the join response reaches the
// client (group.reply); a brand-new member has no timer before that, so
// the dead joiner stays a member forever once the leader's sync clears the
// pending-sync deadline.
func TestCoordinatorExpiresUnreachableJoiner(t *testing.T) {
	skipOnKfake(t)
	kafkatest.ProtocolIndependent(t)
	c := kafkatest.New(t)
	group := kafkatest.Name(t, "g")
	const session, rebal = 2 * time.Second, 10 * time.Second
	// a outlasts z's expiry while it waits in JoinGroup even on kfake
	// (TestCoordinatorKeepsWaitingJoiner is that deviation).
	a := newRawMember(t, c, group, "a", 6*time.Second, rebal)
	a.beat = 500 * time.Millisecond
	z := newRawMember(t, c, group, "z", 3*time.Second, rebal)
	d := newRawMember(t, c, group, "d", session, rebal)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	stopA := runLive(t, a)
	defer stopA()
	if ok, st, ids := waitGroup(t, c, group, []string{"a"}, 20*time.Second); !ok {
		t.Fatalf("a alone: group %s %v", st, ids)
	}
	// z joins (a rejoins with it), then falls silent: the next rebalance
	// waits for it until its session expires.
	if err := z.joinSync(ctx); err != nil {
		t.Fatal(err)
	}
	// d joins and dies before its join completes.
	joined := make(chan error, 1)
	go func() { _, err := d.join(ctx); joined <- err }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, ids := describe(t, c, group)
		if st == "PreparingRebalance" && slices.Contains(ids, "d") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("d never showed up in a rebalance: group %s %v", st, ids)
		}
		time.Sleep(50 * time.Millisecond)
	}
	d.cl.Close()
	<-joined
	t0 := time.Now()

	// Kafka: z's session expires (3 s), the join completes without d's
	// answer reaching it, d's session (or pending-sync) deadline removes
	// it, and a is alone again: well within 25 s.
	ok, st, ids := waitGroup(t, c, group, []string{"a"}, 25*time.Second)
	if !ok {
		t.Errorf("%v after d died the group is %s with members %v: a dead joiner never expired (kfake: finding 5)",
			time.Since(t0).Round(time.Second), st, ids)
	} else {
		t.Logf("dead joiner gone after %v", time.Since(t0).Round(100*time.Millisecond))
	}

}

// TestCoordinatorRebalanceDeadline: a rebalance ends at its rebalance
// timeout, counted from its start, however many members join meanwhile;
// members that did not rejoin by then are dropped. In the soak, workers
// join every few seconds while dead members hold a rebalance open.
//
// kfake restarts the deadline on every join (group.rebalance resets
// tRebalance), so under joins more often than the rebalance timeout the
// rebalance never ends while one member stays silent.
func TestCoordinatorRebalanceDeadline(t *testing.T) {
	skipOnKfake(t)
	kafkatest.ProtocolIndependent(t)
	c := kafkatest.New(t)
	group := kafkatest.Name(t, "g")
	// Sessions far longer than the test: only the rebalance deadline can
	// remove the silent member.
	const session, rebal = 60 * time.Second, 4 * time.Second
	a := newRawMember(t, c, group, "a", session, rebal)
	z := newRawMember(t, c, group, "z", session, rebal)
	e := newRawMember(t, c, group, "e", session, rebal)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	a.beat = time.Second // notices a rebalance quickly
	stopA := runLive(t, a)
	defer stopA()
	if ok, st, ids := waitGroup(t, c, group, []string{"a"}, 20*time.Second); !ok {
		t.Fatalf("a alone: group %s %v", st, ids)
	}
	if err := z.joinSync(ctx); err != nil {
		t.Fatal(err)
	}

	t0 := time.Now()
	joined := make(chan time.Duration, 1)
	go func() {
		_, err := e.join(ctx)
		if err != nil {
			t.Errorf("e join: %v", err)
		}
		joined <- time.Since(t0)
	}()
	// More joins every 1.5 s for 9 s, each on its own connection.
	var wg sync.WaitGroup
	for i := 0; i < 6; i++ {
		select {
		case <-time.After(1500 * time.Millisecond):
		case took := <-joined:
			joined <- took
		}
		f := newRawMember(t, c, group, fmt.Sprintf("f%d", i), session, rebal)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = f.join(ctx) // answered at some rebalance's end, or cut at cleanup
		}()
	}
	took := <-joined
	cancel()
	wg.Wait()
	if took > rebal+2*time.Second {
		t.Fatalf("e's JoinGroup took %v with a %v rebalance timeout: the deadline moved with each later join (kfake: finding 5)",
			took.Round(100*time.Millisecond), rebal)
	}
	t.Logf("e joined after %v (rebalance timeout %v)", took.Round(100*time.Millisecond), rebal)
}

// TestCoordinatorKeepsWaitingJoiner: a live member waiting in JoinGroup
// longer than its session timeout (the rebalance waits for a silent
// member) stays a member: Kafka exempts members awaiting a join from the
// session deadline and bounds them by the rebalance timeout instead.
//
// kfake keeps the session timer running from the member's last heartbeat
// and drops it without answering its JoinGroup; the client learns it only
// when that request times out (rebalance timeout + 10 s in franz-go) and
// then joins again as a new member: one more rebalance.
func TestCoordinatorKeepsWaitingJoiner(t *testing.T) {
	skipOnKfake(t)
	kafkatest.ProtocolIndependent(t)
	c := kafkatest.New(t)
	group := kafkatest.Name(t, "g")
	a := newRawMember(t, c, group, "a", 2*time.Second, 10*time.Second)
	a.beat = 300 * time.Millisecond
	z := newRawMember(t, c, group, "z", 5*time.Second, 10*time.Second)
	e := newRawMember(t, c, group, "e", 5*time.Second, 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	stopA := runLive(t, a)
	defer stopA()
	if ok, st, ids := waitGroup(t, c, group, []string{"a"}, 20*time.Second); !ok {
		t.Fatalf("a alone: group %s %v", st, ids)
	}
	if err := z.joinSync(ctx); err != nil {
		t.Fatal(err)
	}
	// z falls silent; e's join starts a rebalance that waits ~5 s for z,
	// and a waits in JoinGroup meanwhile, longer than its 2 s session.
	t0 := time.Now()
	jr, err := e.join(ctx)
	if err != nil {
		t.Fatalf("e join: %v", err)
	}
	took := time.Since(t0)
	// The join just completed: a, waiting in JoinGroup all along, must be
	// in the new generation (answered with e).
	st, ids := describe(t, c, group)
	if !slices.Contains(ids, "a") || a.drops() > 0 {
		t.Errorf("the join completed after %v without a (group %s, members %v, a dropped %d times): a's session ran out while it waited in JoinGroup (kfake: finding 5)",
			took.Round(100*time.Millisecond), st, ids, a.drops())
	}
	if err := e.sync(ctx, jr); err != nil {
		t.Logf("e sync: %v", err) // not under test
	}
}
