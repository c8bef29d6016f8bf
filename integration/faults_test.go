package integration

import (
	"time"
)

// Fault steps. Each is one injection; the tests call them in loops (see
// env.faults) and the soak mixes them.

// killStep SIGKILLs a random worker (no drain, no commit, no LeaveGroup:
// its open transaction stays open until fenced or timed out) and restarts
// it after up to a second, usually with the same instance ID (which fences
// the dead one's transactional ID at once) and sometimes with a new one
// (the dead member then holds its partitions until the session timeout, and
// its open transaction the output's last stable offset until the
// transaction timeout).
func (e *env) killStep(sameIDProb float64) {
	p := e.fleet.pick(e.rng)
	if p == nil {
		e.startNew()
		return
	}
	e.fleet.kill(p)
	if !e.sleep(e.randDur(0, time.Second)) {
		return
	}
	if e.rng.Float64() < sameIDProb {
		e.fleet.start(p.instance)
	} else {
		e.fleet.eventf("instance %s retired", p.instance)
		e.startNew()
	}
}

// zombieStep SIGSTOPs a random worker for stopFor (longer than the session
// timeout: the group expels it and its partitions move), then SIGCONTs it.
// A resumed zombie must not make anything visible for partitions it lost:
// its open transaction's offset commit carries a stale generation, so the
// transaction aborts (or, past the transaction timeout, the coordinator
// already aborted it). With replace, a new process takes the zombie's
// instance ID while it is stopped; the zombie must then exit 3 (ErrFenced)
// once it runs again (unless the replacement has ended by then or soon
// after: see the window below). It runs in the background and keeps at
// least one worker active; it reports whether it injected anything.
func (e *env) zombieStep(stopFor time.Duration, replace bool) bool {
	if e.fleet.active() < 2 {
		return false
	}
	p := e.fleet.pick(e.rng)
	if p == nil {
		return false
	}
	e.fleet.stop(p)
	e.bg(func() {
		if !replace {
			time.Sleep(stopFor)
			e.fleet.cont(p)
			return
		}
		time.Sleep(300 * time.Millisecond)
		e.fleet.expectFenced(p)
		r := e.fleet.start(p.instance)
		time.Sleep(stopFor - 300*time.Millisecond)
		if r == nil {
			e.fleet.replacementGone(p)
			e.fleet.cont(p)
			return
		}
		select {
		case <-r.done:
			e.fleet.replacementGone(p)
		default:
		}
		e.fleet.cont(p)
		// A replacement that ends soon after the zombie woke, before the
		// two sorted out who holds the ID, leaves the zombie the only
		// holder: it may run on. Sorting it out takes up to a takeover
		// (the zombie, its commit timed out, rebuilds and rejoins, which
		// fences the replacement; the replacement finds the holder older
		// and rejoins; the zombie's next heartbeat finds it fenced): at most
		// a rebalance plus a session timeout. A replacement that outlives
		// that window still holds the ID, and the zombie must have exited 3
		// (checkMembership).
		window := e.cfg.worker.rebalanceTimeout + e.cfg.worker.sessionTimeout
		select {
		case <-r.done:
			e.fleet.replacementGone(p)
		case <-p.done:
		case <-time.After(window):
		}
	})
	return true
}

// stormStep makes the group rebalance: a new instance joins, or a random
// one leaves with SIGTERM (it drains, commits and exits 0; a static member
// does not send LeaveGroup, so its partitions move after the session
// timeout). It keeps between lo and hi workers.
func (e *env) stormStep(lo, hi int) {
	n := e.fleet.active()
	if n <= lo || (n < hi && e.rng.IntN(2) == 0) {
		e.startNew()
		return
	}
	p := e.fleet.pick(e.rng)
	if p == nil {
		return
	}
	e.bg(func() { e.fleet.term(p, 30*time.Second) })
	// term marks p at once (pick skips it); let the signal go out.
	time.Sleep(10 * time.Millisecond)
}
