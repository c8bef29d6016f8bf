package integration

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/onceflow/onceflow/internal/kafkatest"
)

var (
	soakRate   = flag.Int("soak-rate", 1000, "TestSoak: inputs per second")
	soakReport = flag.String("soak-report", "", "TestSoak: also write the totals as JSON to this file")
	soakGuard  = flag.Bool("soak-position-guard", false, "TestSoak: workers run with processor.WithPositionGuard")
	soakInsts  = flag.Int("soak-instances", 0, "TestSoak: workers at the start (0: the suite's 3)")
	soakParts  = flag.Int("soak-partitions", 0, "TestSoak: input and output partitions (0: the suite's 6); sessions are 10 per partition at least")
)

// soakTotals is what a soak prints at the end.
type soakTotals struct {
	Mode           string `json:"mode"`
	Seed           uint64 `json:"seed"`
	Duration       string `json:"duration"`
	RatePerSec     int    `json:"rate_per_sec"`
	Instances      int    `json:"instances"`
	ProcessesStart int    `json:"processes_started"`
	Kills          int    `json:"kills"`
	Stops          int    `json:"stops"`
	Terms          int    `json:"terms"`
	FencedZombies  int    `json:"fenced_zombies"`
	BrokerRestarts int    `json:"broker_restarts"`
	// NodeRestarts splits a cluster's broker restarts by the fault kind
	// that chose the node (see TestClusterNodeFaults).
	NodeRestarts    map[string]int `json:"node_restarts_by_kind,omitempty"`
	WorkerProblems  int            `json:"worker_problems"`
	RecordsVerified int            `json:"records_verified"`
	Outputs         int            `json:"outputs"`
	DeadLetters     int            `json:"dead_letters"`
	Duplicates      int            `json:"duplicates"`
	Losses          int            `json:"losses"`
	OrderViolations int            `json:"order_violations"`
	Malformed       int            `json:"malformed"`
	ExactlyOnce     bool           `json:"exactly_once"`
	Aborts          int64          `json:"aborts_clean_exits"`
	Rebuilds        int64          `json:"rebuilds_clean_exits"`
	Reprocessed     int64          `json:"reprocessed_clean_exits"`
	PositionGuard   bool           `json:"position_guard"`
	PositionRegr    int64          `json:"position_regressions_clean_exits"`
	SettleSeconds   float64        `json:"settle_seconds"`
	KfakeHolds      int            `json:"kfake_holds,omitempty"`
	KfakeHeldSecs   float64        `json:"kfake_held_seconds,omitempty"`
}

// livenessWindow is how long a running worker may stay out of the group,
// by every sample in a row, before the soak reports it: alive but not
// working. Expulsions, refused rejoins and successor graces last seconds;
// a node restart expels members for up to a session. Samples are
// livenessEvery apart, so that two short absences with a rejoin between
// them are not taken for one long one (a KIP-848 soak, w90#174).
const (
	livenessWindow = 30 * time.Second
	livenessEvery  = 3 * time.Second
)

// sampleLiveness reports (with a goroutine dump) a running worker that was
// out of the group at every sample for livenessWindow; outSince keeps,
// per worker, the first sample of its current absence. A sample the group
// does not answer is skipped. A reported worker ends, and the faults go on
// without it.
func (e *env) sampleLiveness(outSince map[*proc]time.Time, now time.Time) {
	members, ok := e.describeMembers()
	if !ok {
		return
	}
	seen := make(map[*proc]bool)
	for _, p := range e.fleet.live() {
		e.fleet.mu.Lock()
		eligible := !p.stopped && p.intent == intentNone && time.Since(p.started) > 10*time.Second
		e.fleet.mu.Unlock()
		if !eligible || members[p.instance] {
			continue
		}
		seen[p] = true
		since, out := outSince[p]
		if !out {
			outSince[p] = now
			continue
		}
		if now.Sub(since) >= livenessWindow {
			delete(outSince, p)
			e.fleet.signal(p, syscall.SIGQUIT, intentQuit)
			<-p.done
			e.fleet.problemf("worker %s runs but was out of the group at every check for %v (members %v); goroutine dump:\n%s",
				p, now.Sub(since).Round(time.Second), keys(members), quitDump(p.logPath))
		}
	}
	for p := range outSince {
		if !seen[p] {
			delete(outSince, p)
		}
	}
}

// TestSoak mixes every fault family continuously for -soak: SIGKILLs with
// restarts (same or new instance ID), zombies (SIGSTOP past the session
// timeout, sometimes past the transaction timeout, sometimes replaced by a
// new process with the same ID), joins and SIGTERM leaves, and, with
// KAFKA_BROKER_SCRIPT, every 4 minutes a broker fault: on a real single-node
// broker a SIGKILL and restart of it, on a 3+ node cluster a SIGKILL and
// restart of one node, chosen in turn as an input partitions' leader, the
// group coordinator, a transaction coordinator, and any node for a long
// outage. Every 97th input is poison (dead-letter topic).
// At the end the whole output is verified and the totals printed.
//
//	go test ./integration -run Soak -soak 20m -v [-soak-report totals.json]
//
// With -soak-instances 12 -soak-partitions 300 it is the many-instance
// soak of issue 42 (TestManyInstances is its short version).
func TestSoak(t *testing.T) {
	if *soakFor <= 0 {
		t.Skip("soak test: run with -soak DURATION, e.g. go test ./integration -run Soak -soak 20m -v")
	}
	cfg := defaultConfig()
	cfg.rate = *soakRate
	cfg.worker.poisonEvery = 97
	cfg.settle = 3 * time.Minute
	cfg.worker.positionGuard = *soakGuard
	if *soakInsts > 0 {
		cfg.instances = *soakInsts
	}
	if *soakParts > 0 {
		cfg.partitions = int32(*soakParts)
		cfg.sessions = max(cfg.sessions, 10**soakParts)
	}
	e := newEnv(t, cfg)
	// Joins and leaves keep between 2 and 5 workers, around the start's
	// count when it is larger.
	stormLo, stormHi := 2, 5
	if cfg.instances > 3 {
		stormLo, stormHi = cfg.instances-2, cfg.instances+2
	}
	// Broker faults every brokerEvery: on a single node restartBroker; on
	// a cluster one node at a time, the fault kinds of TestClusterNodeFaults
	// in turn, in the background so process faults go on while the node is
	// down (a production fleet does not pause for a broker crash). Any
	// other shape (kfake, a real broker without the script, two nodes)
	// gets process faults only.
	brokers := kafkatest.Real() && brokerScript() != ""
	cluster, why := onCluster(t, e.c)
	switch {
	case cluster:
		t.Logf("soak: a %d+ node cluster: a node fault every 4 min, rotating over %v", clusterNodes, nodeFaultNames)
	case brokers && !singleBroker(t, e.c):
		brokers = false
		t.Logf("soak: no broker faults: %s", why)
	}
	nodeKind := nodeFault(0)
	var nodeDone chan struct{} // closed when the last node fault ended
	const brokerEvery = 4 * time.Minute
	nextBroker := time.Now().Add(brokerEvery / 2)
	end := time.Now().Add(*soakFor)
	nextProgress := time.Now().Add(30 * time.Second)
	outSince := make(map[*proc]time.Time) // see sampleLiveness
	nextLiveness := time.Now()
	var hold rebalanceHold // kfake only: see kfakehold_test.go
	e.sleep(2 * time.Second)
	for time.Now().Before(end) {
		if !e.sleep(e.randDur(time.Second, 3*time.Second)) {
			break
		}
		if !kafkatest.Real() {
			hold.check(e, 2*time.Minute)
			e.reapDead()
		}
		switch r := e.rng.IntN(100); {
		case cluster && time.Now().After(nextBroker) && closedOrNil(nodeDone):
			kind, down := nodeKind, e.nodeDown(nodeKind)
			rng := rand.New(rand.NewPCG(e.rng.Uint64(), e.rng.Uint64())) // e.rng stays this goroutine's
			nodeKind = (nodeKind + 1) % numNodeFaults
			done := make(chan struct{})
			nodeDone = done
			e.bg(func() {
				defer close(done)
				if err := e.nodeFault(kind, down, rng); err != nil {
					e.fleet.problemf("%s node fault: %v", kind, err)
				}
			})
			nextBroker = time.Now().Add(brokerEvery)
		case brokers && !cluster && time.Now().After(nextBroker):
			e.restartBroker(e.randDur(500*time.Millisecond, 3*time.Second))
			nextBroker = time.Now().Add(brokerEvery)
		case r < 35:
			e.killStep(0.7)
		case r < 55:
			stopFor := cfg.worker.sessionTimeout + e.randDur(time.Second, 2*time.Second)
			if e.rng.IntN(5) == 0 {
				stopFor = cfg.worker.txnTimeout + 2*time.Second // the coordinator aborts it first
			}
			e.zombieStep(stopFor, e.rng.IntN(3) == 0)
		default:
			e.stormStep(stormLo, stormHi)
		}
		if now := time.Now(); now.After(nextLiveness) {
			nextLiveness = now.Add(livenessEvery)
			e.sampleLiveness(outSince, now)
		}
		if time.Now().After(nextProgress) {
			nextProgress = time.Now().Add(30 * time.Second)
			distinct, dups, records := e.track.status()
			c, problems, _, _ := e.fleet.snapshot()
			t.Logf("soak %v/%v: %d inputs, %d accounted for (%d records, %d duplicates so far); running %d; starts %d kills %d stops %d terms %d broker restarts %d (cluster nodes: %v); kfake holds %d (%v); problems %d",
				time.Since(e.t0).Round(time.Second), *soakFor, e.feed.count(), distinct, records, dups, len(e.fleet.live()),
				c.Starts, c.Kills, c.Stops, c.Terms, c.BrokerRestarts, c.NodeRestarts, hold.holds, hold.held.Round(time.Second), len(problems))
		}
	}
	e.waitFaults()
	t0 := time.Now()
	o := e.finish()
	_, problems, _, _ := e.fleet.snapshot()
	r := o.report
	tot := soakTotals{
		Mode: string(e.c.Mode), Seed: e.seed, Duration: o.elapsed.Round(time.Second).String(), RatePerSec: cfg.rate,
		Instances: o.counts.Instances, ProcessesStart: o.counts.Starts, Kills: o.counts.Kills, Stops: o.counts.Stops,
		Terms: o.counts.Terms, FencedZombies: o.counts.Fenced, BrokerRestarts: o.counts.BrokerRestarts,
		WorkerProblems: len(problems), RecordsVerified: r.Inputs, Outputs: r.Outputs, DeadLetters: r.DLQ,
		Duplicates: r.Duplicates, Losses: r.Lost, OrderViolations: r.OrderViolations, Malformed: r.Malformed,
		ExactlyOnce: r.ExactlyOnce() && r.Outputs+r.DLQ == r.Inputs,
		Aborts:      o.totals.Aborts, Rebuilds: o.totals.Rebuilds, Reprocessed: o.totals.Reprocessed,
		PositionGuard: *soakGuard, PositionRegr: o.totals.PositionRegressions,
		SettleSeconds: time.Since(t0).Seconds(),
		KfakeHolds:    hold.holds, KfakeHeldSecs: hold.held.Seconds(),
	}
	if cluster {
		tot.NodeRestarts = o.counts.NodeRestarts.byKind()
	}
	b, _ := json.MarshalIndent(tot, "", "  ")
	t.Logf("SOAK TOTALS\n%s", b)
	fmt.Printf("SOAK TOTALS %s\n", b)
	if *soakReport != "" {
		if err := os.WriteFile(*soakReport, append(b, '\n'), 0o644); err != nil {
			t.Errorf("writing %s: %v", *soakReport, err)
		}
	}
}
