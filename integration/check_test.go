package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/verify"
	"github.com/onceflow/onceflow/processor"
)

// outcome is a finished run.
type outcome struct {
	inputs  int
	report  verify.Report
	counts  counts
	totals  processor.Stats // summed over workers that exited cleanly
	elapsed time.Duration
}

func (o outcome) String() string {
	c, s := o.counts, o.totals
	nodes := ""
	if c.NodeRestarts != (nodeRestarts{}) {
		nodes = fmt.Sprintf(" (cluster nodes: %v)", c.NodeRestarts)
	}
	return fmt.Sprintf("%v; workers: starts=%d instances=%d kills=%d stops=%d terms=%d fenced=%d unexpected=%d broker_restarts=%d%s; "+
		"clean-exit worker totals: commits=%d aborts=%d rebuilds=%d reprocessed=%d position_regressions=%d; took %v",
		o.report, c.Starts, c.Instances, c.Kills, c.Stops, c.Terms, c.Fenced, c.Unexpected, c.BrokerRestarts, nodes,
		s.Commits, s.Aborts, s.Rebuilds, s.Reprocessed, s.PositionRegressions, o.elapsed.Round(time.Millisecond))
}

// finish stops feeding, waits until every input has an output or a dead
// letter (bounded by cfg.settle; on a hang the workers' goroutine dumps are
// logged), SIGTERMs the workers, reads output and dead letters back
// read_committed and judges them. Any broken guarantee fails the test with
// the evidence.
func (e *env) finish() outcome {
	t := e.t
	t.Helper()
	e.waitFaults()
	produced := e.feed.stop()
	if err := e.feed.error(); err != nil {
		e.fleet.logTimeline(t, 100)
		t.Fatal(err)
	}
	e.fleet.eventf("feeding stopped after %d inputs", produced)
	if produced == 0 {
		t.Fatal("no input was produced")
	}
	stopped := time.Now()
	switch e.waitAccounted(produced) {
	case waitLost:
		e.fleet.logTimeline(t, 300)
		e.check(produced) // the verdict and evidence from a fresh read-back
		e.groupState()
		t.Fatalf("LOSS: the group committed every input partition to its end and no transaction is open, yet inputs have neither output nor dead letter")
	case waitHung:
		e.hangEvidence(produced)
		e.fleet.dumpAll()
		e.fleet.logTimeline(t, 300)
		o := e.check(produced) // a fresh read-back: lost or only late?
		t.Logf("read back after the hang: %s", o.report)
		t.Fatalf("HANG: not every input accounted for after feeding stopped (no progress for %v, or over %v)", stallBound, e.cfg.settle)
	}
	settled := time.Since(stopped)
	e.fleet.eventf("every input accounted for")
	e.checkMembership(e.membershipGrace())
	termAt := time.Now()
	e.fleet.termAll(30 * time.Second)
	stopTook := time.Since(termAt)
	t.Logf("all inputs accounted for %v after feeding stopped; SIGTERMed workers exited in %v",
		settled.Round(time.Millisecond), stopTook.Round(time.Millisecond))
	if stopTook > 10*time.Second {
		t.Logf("SLOW STOP: SIGTERMed workers took %v to exit", stopTook.Round(time.Millisecond))
		e.fleet.keep()
		e.fleet.logTimeline(t, 100)
	}
	o := e.check(produced)
	o.counts, o.elapsed = e.fleetTotals(&o.totals), time.Since(e.t0)
	_, problems, _, _ := e.fleet.snapshot()
	for _, p := range problems {
		t.Errorf("worker problem: %s", p)
	}
	if len(problems) > 0 {
		e.fleet.logTimeline(t, 300)
	}
	if *keepLogs {
		e.fleet.logTimeline(t, 300)
		e.fleet.logStderr(t, 8000)
	}
	t.Logf("RESULT %s", o)
	return o
}

func (e *env) fleetTotals(into *processor.Stats) counts {
	c, _, _, results := e.fleet.snapshot()
	for _, r := range results {
		s := r.Stats
		into.Commits += s.Commits
		into.Aborts += s.Aborts
		into.Rebuilds += s.Rebuilds
		into.Reprocessed += s.Reprocessed
		into.Outputs += s.Outputs
		into.DeadLettered += s.DeadLettered
		into.Fenced += s.Fenced
		into.PositionRegressions += s.PositionRegressions
	}
	return c
}

type waitResult int

const (
	waitDone waitResult = iota // every input accounted for
	waitLost                   // inputs missing, but the group committed past them
	waitHung                   // inputs missing after cfg.settle
)

// stallBound is how long the wait for the last inputs may see no progress
// before it is judged a hang.
const stallBound = 25 * time.Second

// waitAccounted waits until the tracker has seen every produced ID. While
// nothing new arrives it checks whether the missing inputs can still come:
// once the group has committed every input partition to its end and no
// output transaction is open, nothing will process them again.
func (e *env) waitAccounted(produced int) waitResult {
	deadline := time.Now().Add(e.cfg.settle)
	nextLog := time.Now().Add(10 * time.Second)
	last, lastProgress := -1, time.Now()
	for {
		distinct, dups, records := e.track.status()
		if distinct >= produced {
			return waitDone
		}
		now := time.Now()
		if distinct != last {
			last, lastProgress = distinct, now
		} else if now.Sub(lastProgress) > 3*time.Second && e.committedToEnd() {
			// Re-read the tracker: the last records may have landed
			// between the two looks.
			time.Sleep(time.Second)
			if d, _, _ := e.track.status(); d < produced {
				return waitLost
			}
			continue
		}
		// Once feeding has stopped, a healthy group makes progress at
		// least every session + transaction timeout (a dead member's
		// partitions move, its open transaction is aborted).
		if now.After(deadline) || now.Sub(lastProgress) > stallBound {
			return waitHung
		}
		if now.Sub(lastProgress) > 2*e.cfg.worker.sessionTimeout {
			e.reapDead() // kfake only
		}
		if now.After(nextLog) {
			e.t.Logf("waiting: %d of %d inputs accounted for (%d records, %d duplicates so far), %d workers running",
				distinct, produced, records, dups, len(e.fleet.live()))
			nextLog = now.Add(10 * time.Second)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkMembership checks liveness: every running worker (not stopped, not
// on its way out) must be a member of the group within grace, and every
// zombie replaced by a newer instance with its ID must have exited. A worker
// that stays out, typically after it was expelled while stopped, does no
// work although it runs; it is reported with its goroutine dump.
func (e *env) checkMembership(grace time.Duration) {
	deadline := time.Now().Add(grace)
	for {
		members := e.members()
		var out, fenced []*proc
		e.fleet.mu.Lock()
		for _, p := range e.fleet.running {
			switch {
			case p.stopped:
			case p.intent == intentNone && !members[p.instance]:
				out = append(out, p)
			case p.intent == intentFence:
				fenced = append(fenced, p) // must exit 3 by itself
			}
		}
		e.fleet.mu.Unlock()
		if len(out) == 0 && len(fenced) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, p := range fenced {
				e.fleet.signal(p, syscall.SIGQUIT, intentQuit)
				<-p.done
				e.fleet.problemf("worker %s was replaced by a newer instance with its ID and runs again, but has not exited (ErrFenced) %v after every input was accounted for; goroutine dump:\n%s",
					p, grace, quitDump(p.logPath))
			}
			for _, p := range out {
				e.fleet.signal(p, syscall.SIGQUIT, intentQuit)
				<-p.done
				e.fleet.problemf("worker %s runs but is not a member of the group (members %v) %v after every input was accounted for; goroutine dump:\n%s",
					p, keys(members), grace, quitDump(p.logPath))
			}
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// members returns the instance IDs of the group's members (none if the
// group cannot be described).
func (e *env) members() map[string]bool {
	m, _ := e.describeMembers()
	return m
}

// describeMembers is members, and whether the group answered.
func (e *env) describeMembers() (map[string]bool, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m := make(map[string]bool)
	_, members, err := e.c.DescribeGroup(ctx, e.group)
	if err != nil {
		return m, false
	}
	for _, mm := range members {
		if mm.InstanceID != "" {
			m[mm.InstanceID] = true
		}
	}
	return m, true
}

func keys(m map[string]bool) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// committedToEnd reports whether every input partition's committed offset
// is its end offset and every output and dead-letter partition is stable
// (no open transaction).
func (e *env) committedToEnd() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := e.c.Admin
	ends, err1 := adm.ListEndOffsets(ctx, e.in, e.out, e.dlq)
	stable, err2 := adm.ListCommittedOffsets(ctx, e.out, e.dlq)
	committed, err3 := adm.FetchOffsets(ctx, e.group)
	if firstErr(err1, err2, err3, ends.Error(), stable.Error()) != nil {
		return false
	}
	for p := range e.cfg.partitions {
		end, ok1 := ends.Lookup(e.in, p)
		c, ok2 := committed.Lookup(e.in, p)
		if !ok1 || !ok2 || c.Err != nil || c.At != end.Offset {
			return false
		}
	}
	ok := true
	ends.Each(func(o kadm.ListedOffset) {
		if o.Topic == e.in {
			return
		}
		if s, found := stable.Lookup(o.Topic, o.Partition); !found || s.Offset != o.Offset {
			ok = false
		}
	})
	return ok
}

// check reads output and dead letters back and judges them.
func (e *env) check(produced int) outcome {
	t := e.t
	outs := e.c.ReadCommitted(t, e.out)
	dlqs := e.c.ReadCommitted(t, e.dlq)
	ch := verify.NewChecker(produced)
	poison := uint64(e.cfg.worker.poisonEvery)
	var badDLQ, poisonOut, wrongKey []string
	for _, r := range outs {
		p, err := verify.Decode(r.Value)
		if err != nil {
			ch.Malformed()
			continue
		}
		ch.Output(verify.Observed{Session: string(r.Key), Payload: p})
		if poison > 0 && p.ID%poison == 0 {
			poisonOut = append(poisonOut, e.describe(r, p))
		}
		if string(r.Key) != sessionKey(p.ID, e.cfg.sessions) {
			wrongKey = append(wrongKey, e.describe(r, p))
		}
	}
	for _, r := range dlqs {
		p, err := verify.Decode(r.Value)
		if err != nil {
			ch.Malformed()
			continue
		}
		ch.DeadLetter(verify.Observed{Session: string(r.Key), Payload: p})
		reason := header(r, processor.HeaderReason)
		if poison == 0 || p.ID%poison != 0 || reason != "permanent" {
			badDLQ = append(badDLQ, fmt.Sprintf("%s reason=%q error=%q", e.describe(r, p), reason, header(r, processor.HeaderError)))
		}
	}
	badState := e.checkState(outs)
	rep := ch.Report()
	o := outcome{inputs: produced, report: rep}
	ok := rep.ExactlyOnce() && rep.Outputs+rep.DLQ == produced &&
		len(badDLQ) == 0 && len(poisonOut) == 0 && len(wrongKey) == 0 && len(badState) == 0
	if ok {
		return o
	}
	t.Errorf("GUARANTEE BROKEN: %s", rep)
	if rep.Outputs+rep.DLQ != produced {
		t.Errorf("outputs (%d) + dead letters (%d) != inputs (%d)", rep.Outputs, rep.DLQ, produced)
	}
	listf := func(what string, xs []string) {
		if len(xs) > 0 {
			t.Errorf("%d %s, first: \n  %s", len(xs), what, strings.Join(xs[:min(len(xs), 15)], "\n  "))
		}
	}
	listf("unexpected dead letters", badDLQ)
	listf("outputs of poison records", poisonOut)
	listf("outputs under the wrong key", wrongKey)
	listf("outputs whose session state disagrees with the committed outputs before them", badState)
	e.evidence(produced, outs, dlqs)
	e.fleet.logTimeline(t, 400)
	return o
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}
