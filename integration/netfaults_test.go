package integration

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/internal/kafkatest"
)

// Network faults (issue 45). Every worker reaches every broker through a
// proxy of its own (kafkatest.Net: one End per instance, one Link per
// broker; the worker's -dial-map turns every dial of a broker's address,
// bootstrap or advertised, into a dial of its proxy), so a fault can hit
// one instance, or one broker as one instance sees it, while the rest of
// the job and the test's own clients (feeder, tracker, read-back) go on
// undisturbed. Each test injects one kind of fault while input flows and
// is judged as every other test here (finish: every input exactly once
// read_committed, sessions in order, every running worker a member again,
// no worker ended by itself: the job resumes without a restart). Each
// logs a NETRESULT line: the time from the heal until every input fed
// before it was read back read_committed (the recovery), and for the
// latency runs throughput and p50.
//
// Where they run: on a real cluster (the cluster pass of `make test`),
// short versions; with -net-long (or -soak, the soak's flag) the longer
// versions of the issue (a 30 s blackhole, 5 minutes of resets, 60 s of total outage).
// Under the consumer protocol only TestNetGroupCoordinatorCut runs (the
// others do not depend on the group protocol; the classic pass has run
// them). On kfake only with -kfake-net-faults: the embedded pass is the
// quick one, and the faults here are timeouts, not kfake behaviours.
var kfakeNetFaults = flag.Bool("kfake-net-faults", false, "run the network-fault tests (TestNet*) on kfake too (by default: real cluster only)")

var netLongFlag = flag.Bool("net-long", false, "run the long versions of the network-fault tests (TestNet*); -soak implies it")

// netLong reports whether the long versions run (-net-long, or -soak set).
func netLong() bool { return *netLongFlag || *soakFor > 0 }

// netHere skips t where the network-fault tests do not run (see above).
func netHere(t *testing.T, groupProtocolMatters bool) {
	t.Helper()
	if !kafkatest.Real() && !*kfakeNetFaults {
		t.Skip("network faults run on a real cluster (the cluster pass of `make test`); on kfake with -kfake-net-faults")
	}
	if kafkatest.Consumer848() && !groupProtocolMatters {
		t.Skip("does not depend on the group protocol: runs in the classic pass only")
	}
}

// netBrokers returns every address a client of c may dial: the bootstrap
// addresses and every broker's advertised one.
func netBrokers(t testing.TB, c *kafkatest.Cluster) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bs, err := c.Admin.ListBrokers(ctx)
	if err != nil {
		t.Fatalf("listing brokers: %v", err)
	}
	addrs := slices.Clone(c.Brokers)
	for _, b := range bs {
		if a := net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))); !slices.Contains(addrs, a) {
			addrs = append(addrs, a)
		}
	}
	return addrs
}

// netConfig is the suite's default configuration with every worker behind
// its proxies.
func netConfig() config {
	cfg := defaultConfig()
	cfg.net = true
	cfg.settle = 2 * time.Minute
	return cfg
}

// caughtUp waits until every input below n has been read back
// read_committed and returns how long after from that was; false after
// bound.
func (e *env) caughtUp(n int, from time.Time, bound time.Duration) (time.Duration, bool) {
	deadline := time.Now().Add(bound)
	next := time.Now().Add(2 * time.Second)
	for {
		miss := e.track.missing(n, 1000)
		if len(miss) == 0 {
			return max(0, time.Since(from)), true
		}
		if time.Now().After(deadline) {
			return time.Since(from), false
		}
		if time.Now().After(next) {
			// Which input partitions wait, for the timeline.
			parts := map[int32]int{}
			for _, id := range miss {
				parts[e.feed.loc(id).partition]++
			}
			e.fleet.eventf("waiting for inputs below %d: %d+ missing (first %d), by input partition %v", n, len(miss), miss[0], parts)
			next = time.Now().Add(2 * time.Second)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// recovery waits for caughtUp after a heal at from, logs it and returns it.
func (e *env) recovery(what string, n int, from time.Time) time.Duration {
	d, ok := e.caughtUp(n, from, e.cfg.settle)
	if !ok {
		e.fleet.eventf("%s: inputs fed before the heal not all read back %v after it", what, d.Round(time.Millisecond))
		e.t.Logf("NETRESULT %s: NOT caught up %v after the heal (finish judges)", what, d.Round(time.Millisecond))
		return d
	}
	e.fleet.eventf("%s: caught up %v after the heal", what, d.Round(time.Millisecond))
	e.t.Logf("NETRESULT %s: recovered (every input fed before the heal read back) %v after the heal", what, d.Round(time.Millisecond))
	return d
}

// awaitMembers waits (at most within) until the group has n members.
func (e *env) awaitMembers(n int, within time.Duration) {
	e.awaitGroup(within, fmt.Sprintf("reach %d members", n), func(m int) bool { return m >= n })
}

// awaitGroup waits (at most within) until reached holds for the group's
// member count; what says what it waits for, in the failure.
func (e *env) awaitGroup(within time.Duration, what string, reached func(members int) bool) {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if ms, ok := e.describeMembers(); ok && reached(len(ms)) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.t.Fatalf("the group did not %s within %v", what, within)
}

// latencies returns the read_committed latencies of inputs [from, to) seen.
func (tr *tracker) latencies(from, to int) []time.Duration {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var ls []time.Duration
	for id := from; id < to && id < len(tr.seen); id++ {
		if tr.seen[id] > 0 {
			ls = append(ls, tr.lat[id])
		}
	}
	slices.Sort(ls)
	return ls
}

// longestGap returns the longest time between two consecutive first
// sightings of inputs [from, to) (only those for which keep, if not nil,
// returns true) in the order they were seen: the longest stretch without
// new output.
func (tr *tracker) longestGap(from, to int, keep func(id int) bool) time.Duration {
	var ats []int64
	tr.mu.Lock()
	for id := from; id < to && id < len(tr.firstAt); id++ {
		if at := tr.firstAt[id]; at > 0 && (keep == nil || keep(id)) {
			ats = append(ats, at)
		}
	}
	tr.mu.Unlock()
	slices.Sort(ats)
	var gap int64
	for i := 1; i < len(ats); i++ {
		gap = max(gap, ats[i]-ats[i-1])
	}
	return time.Duration(gap)
}

func pct(ls []time.Duration, p float64) time.Duration {
	if len(ls) == 0 {
		return 0
	}
	return ls[min(len(ls)-1, int(float64(len(ls))*p))]
}

// brokerOf returns the address (as the Net proxies it) and node ID of a
// broker drawn with rng, or of node when node >= 0.
func (e *env) brokerOf(ctx context.Context, node int32, rng *rand.Rand) (string, int32) {
	bs, err := e.c.Admin.ListBrokers(ctx)
	if err != nil || len(bs) == 0 {
		e.t.Fatalf("listing brokers: %v", err)
	}
	b := bs[0]
	if node < 0 {
		b = bs[rng.IntN(len(bs))]
	} else {
		found := false
		for _, x := range bs {
			if x.NodeID == node {
				b, found = x, true
			}
		}
		if !found {
			e.t.Fatalf("no broker with node ID %d in %v", node, bs)
		}
	}
	return net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))), b.NodeID
}

// leaderOfMost returns the node leading the most input partitions
// assigned to instance (-1 if the group does not say), and those
// partitions.
func (e *env) leaderOfMost(ctx context.Context, instance string) (int32, []int32) {
	_, members, err := e.c.DescribeGroup(ctx, e.group)
	if err != nil {
		return -1, nil
	}
	var parts []int32
	for _, m := range members {
		if m.InstanceID == instance {
			parts = m.Assigned[e.in]
		}
	}
	tds, err := e.c.Admin.ListTopics(ctx, e.in)
	if err != nil || len(parts) == 0 {
		return -1, parts
	}
	led := map[int32]int{}
	for _, p := range parts {
		if pd, ok := tds[e.in].Partitions[p]; ok {
			led[pd.Leader]++
		}
	}
	best := int32(-1)
	for n, c := range led {
		if best < 0 || c > led[best] || (c == led[best] && n < best) {
			best = n
		}
	}
	slices.Sort(parts)
	return best, parts
}

// TestNetLatency: +0 (the clean run beside which the others are read),
// +50 ms and +200 ms on every round trip of every worker to every broker,
// from the start. Once the group runs and has caught up, a paced window
// at 800 inputs/s gives p50 and p99 of the time from an input's
// production to its output being read read_committed; then a burst of
// inputs, produced at once, gives the throughput: the burst over the time
// from its start until its last input is read back.
func TestNetLatency(t *testing.T) {
	netHere(t, false)
	burst, paced := 20000, 5*time.Second
	if netLong() {
		burst, paced = 100000, 30*time.Second
	}
	for _, lat := range []time.Duration{0, 50 * time.Millisecond, 200 * time.Millisecond} {
		t.Run(fmt.Sprintf("plus%s", lat), func(t *testing.T) {
			cfg := netConfig()
			cfg.netLatency = lat
			e := newEnv(t, cfg)
			e.sleep(warmUp)
			// Wait until the group has formed and what was fed
			// meanwhile is read back, then open the paced window.
			e.awaitMembers(cfg.instances, cfg.settle)
			if _, ok := e.caughtUp(e.feed.count(), time.Now(), cfg.settle); !ok {
				t.Fatalf("the inputs of the warm-up were not read back within %v", cfg.settle)
			}
			n0 := e.feed.count()
			e.sleep(paced)
			n1 := e.feed.count()
			if _, ok := e.caughtUp(n1, time.Now(), cfg.settle); !ok {
				t.Fatalf("the paced inputs were not read back within %v", cfg.settle)
			}
			ls := e.track.latencies(n0, n1)
			start := time.Now()
			target := e.feed.burst(burst)
			drained, ok := e.caughtUp(target, start, cfg.settle)
			if !ok {
				t.Fatalf("a burst of %d was not read back within %v", burst, cfg.settle)
			}
			o := e.finish()
			t.Logf("NETRESULT latency +%v: paced 800/s: %d inputs, p50 %v, p99 %v; burst of %d read back in %v: %.0f rec/s; %s",
				lat, len(ls), pct(ls, 0.5).Round(time.Millisecond), pct(ls, 0.99).Round(time.Millisecond),
				burst, drained.Round(time.Millisecond), float64(burst)/drained.Seconds(), o.report)
		})
	}
}

// TestNetBlackholeBroker: one broker (the leader of the most of w1's input
// partitions) blackholed from one instance (w1): its connections hang, new
// ones hang, nothing is answered, for 10 s (30 s with -net-long), longer than the session and the
// transaction timeouts; the other instances reach every broker. Then the
// link heals and what it held is delivered late.
func TestNetBlackholeBroker(t *testing.T) {
	netHere(t, false)
	down := 10 * time.Second
	if netLong() {
		down = 30 * time.Second
	}
	e := newEnv(t, netConfig())
	e.sleep(3 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	leader, parts := e.leaderOfMost(ctx, "w1")
	addr, node := e.brokerOf(ctx, leader, e.rng)
	link := e.net.End("w1").Link(addr)
	e.fleet.eventf("blackhole w1 (input partitions %v) -> node %d (%s; %s) for %v", parts, node, addr, e.roles(ctx, node), down)
	link.Blackhole()
	e.sleep(down)
	n, healAt := e.feed.count(), time.Now()
	link.Heal()
	e.fleet.eventf("healed w1 -> node %d", node)
	rec := e.recovery(fmt.Sprintf("blackhole of node %d from w1 for %v", node, down), n, healAt)
	e.sleep(2 * time.Second)
	o := e.finish()
	inW1 := func(id int) bool { return slices.Contains(parts, e.feed.loc(uint64(id)).partition) }
	t.Logf("NETRESULT blackhole node %d from w1 %v: recovery %v, longest output gap of w1's input partitions %v (of all %v); %s",
		node, down, rec.Round(time.Millisecond), e.track.longestGap(0, o.inputs, inW1).Round(time.Millisecond),
		e.track.longestGap(0, o.inputs, nil).Round(time.Millisecond), o.report)
	e.fleet.logTimeline(t, 40)
}

// TestNetEndTxnCut: w1's transaction coordinator is cut off while a
// commit's EndTxn is in flight, so w1 cannot know the outcome: once with
// the EndTxn delivered (the coordinator commits; the answer is held, then
// every connection of the link reset) and once with it dropped (the
// transaction stays open until w1 resolves it or the coordinator's
// transaction timeout aborts it). The link hangs for 3 s each (and, with
// -net-long, once more each for 9 s, past the 6 s transaction timeout).
// Exactly-once read back says whether w1 resolved the outcome or guessed
// (a guessed commit loses the records of an aborted transaction, a guessed
// abort duplicates those of a committed one).
func TestNetEndTxnCut(t *testing.T) {
	netHere(t, false)
	type cut struct {
		forward bool
		hold    time.Duration
	}
	cuts := []cut{{true, 3 * time.Second}, {false, 3 * time.Second}}
	if netLong() {
		cuts = append(cuts, cut{true, 9 * time.Second}, cut{false, 9 * time.Second})
	}
	e := newEnv(t, netConfig())
	e.sleep(3 * time.Second)
	isCommit := func(r kmsg.Request) bool { return r.(*kmsg.EndTxnRequest).Commit }
	var recs []string
	for _, c := range cuts {
		what := "dropped"
		if c.forward {
			what = "delivered"
		}
		tr := e.net.End("w1").ArmOnRequest(int16(kmsg.EndTxn), isCommit, c.forward, c.hold)
		select {
		case <-tr.Fired():
		case <-time.After(20 * time.Second):
			for _, l := range e.net.End("w1").Links() {
				l.Disarm()
			}
			e.fleet.logTimeline(t, 100)
			t.Fatalf("w1 sent no commit's EndTxn within 20s")
		}
		n := e.feed.count()
		e.fleet.eventf("w1's EndTxn (commit) %s, link %s hangs for %v", what, tr.Link(), c.hold)
		<-tr.Healed()
		_, healAt := tr.At()
		e.fleet.eventf("link %s reset and healed", tr.Link())
		rec := e.recovery(fmt.Sprintf("EndTxn %s, coordinator link held %v", what, c.hold), n, healAt)
		recs = append(recs, fmt.Sprintf("%s/%v on %s: %v", what, c.hold, tr.Link().Broker(), rec.Round(time.Millisecond)))
		e.sleep(2 * time.Second)
	}
	o := e.finish()
	t.Logf("NETRESULT EndTxn cuts (recovery after each heal): %v; %s", recs, o.report)
	e.fleet.logTimeline(t, 40)
}

// TestNetGroupCoordinatorCut: w1 cut off from its group coordinator
// (blackholed) past the session timeout: the coordinator expels it (the
// test watches the group), its partitions move to the others, whose
// commits fence what w1 had open; when the link heals, w1's held requests
// arrive with a stale generation and must commit nothing, and w1 must
// rejoin (finish: a member again). 3 s + 3 s (20 s with -net-long).
// Runs under both group protocols.
func TestNetGroupCoordinatorCut(t *testing.T) {
	netHere(t, true)
	cfg := netConfig()
	down := cfg.worker.sessionTimeout + 3*time.Second
	if netLong() {
		down = 20 * time.Second
	}
	e := newEnv(t, cfg)
	e.sleep(3 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	gc := e.c.Admin.FindGroupCoordinators(ctx, e.group)[e.group]
	if gc.Err != nil {
		t.Fatalf("finding the group coordinator: %v", gc.Err)
	}
	addr, node := e.brokerOf(ctx, gc.NodeID, nil)
	link := e.net.End("w1").Link(addr)
	e.fleet.eventf("blackhole w1 -> group coordinator node %d (%s; %s) for %v", node, addr, e.roles(ctx, node), down)
	cutAt := time.Now()
	link.Blackhole()
	var expelled time.Duration
	for time.Since(cutAt) < down {
		if expelled == 0 {
			if ms, ok := e.describeMembers(); ok && !ms["w1"] {
				expelled = time.Since(cutAt)
				e.fleet.eventf("w1 out of the group %v into the cut (members %v)", expelled.Round(time.Millisecond), keys(ms))
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	n, healAt := e.feed.count(), time.Now()
	link.Heal()
	e.fleet.eventf("healed w1 -> node %d", node)
	// The recovery (the others' work read back) and w1's rejoin, each
	// timed from the heal.
	recC := make(chan time.Duration, 1)
	go func() { recC <- e.recovery(fmt.Sprintf("w1 cut from its group coordinator for %v", down), n, healAt) }()
	var rejoined time.Duration
	for time.Since(healAt) < e.membershipGrace() {
		if ms, ok := e.describeMembers(); ok && ms["w1"] {
			rejoined = time.Since(healAt)
			e.fleet.eventf("w1 a member again %v after the heal", rejoined.Round(time.Millisecond))
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	rec := <-recC
	e.sleep(2 * time.Second)
	o := e.finish()
	if expelled == 0 {
		t.Errorf("w1 was never out of the group during a %v cut from its coordinator (session timeout %v)", down, cfg.worker.sessionTimeout)
	}
	t.Logf("NETRESULT group coordinator cut %v: w1 expelled %v into it, member again %v after the heal, recovery %v; %s",
		down, expelled.Round(time.Millisecond), rejoined.Round(time.Millisecond), rec.Round(time.Millisecond), o.report)
	e.fleet.logTimeline(t, 40)
}

// TestNetResets: for 12 s (5 minutes with -net-long), every 100-500 ms one
// open connection of a random instance, to any broker, is reset (RST both
// ways), in-flight requests included.
func TestNetResets(t *testing.T) {
	netHere(t, false)
	d := 12 * time.Second
	if netLong() {
		d = 5 * time.Minute
	}
	e := newEnv(t, netConfig())
	e.sleep(3 * time.Second)
	resets := 0
	e.faults(d, 100*time.Millisecond, 500*time.Millisecond, func() {
		ends := e.net.Ends()
		if b := ends[e.rng.IntN(len(ends))].ResetRandom(e.rng); b != "" {
			resets++
		}
	})
	e.fleet.eventf("%d connections reset", resets)
	o := e.finish()
	if resets == 0 {
		t.Error("no connection was reset")
	}
	t.Logf("NETRESULT %d resets in %v: longest output gap %v; %s", resets, d, e.track.longestGap(0, o.inputs, nil).Round(time.Millisecond), o.report)
}

// TestNetAllDown: every broker unreachable from every instance (every link
// blackholed) for 12 s (with -net-long: 60 s blackholed, later 60 s cut:
// resets and refused connections), past the session and transaction
// timeouts, while input keeps coming; then back. The job must resume
// without a restart (no worker may end by itself) and lose nothing.
func TestNetAllDown(t *testing.T) {
	netHere(t, false)
	type outage struct {
		cut  bool
		down time.Duration
	}
	outages := []outage{{false, 12 * time.Second}}
	if netLong() {
		outages = []outage{{false, 60 * time.Second}, {true, 60 * time.Second}}
	}
	e := newEnv(t, netConfig())
	e.sleep(3 * time.Second)
	var recs []string
	for _, out := range outages {
		how := "blackholed"
		if out.cut {
			how = "cut"
		}
		e.fleet.eventf("every broker %s from every instance for %v", how, out.down)
		for _, end := range e.net.Ends() {
			if out.cut {
				end.Cut()
			} else {
				end.Blackhole()
			}
		}
		e.sleep(out.down)
		n, healAt := e.feed.count(), time.Now()
		for _, end := range e.net.Ends() {
			end.Heal()
		}
		e.fleet.eventf("healed")
		rec := e.recovery(fmt.Sprintf("every broker %s for %v", how, out.down), n, healAt)
		recs = append(recs, fmt.Sprintf("%s %v: %v", how, out.down, rec.Round(time.Millisecond)))
		e.sleep(3 * time.Second)
	}
	o := e.finish()
	t.Logf("NETRESULT total outage (recovery after the heal): %v; longest output gap %v; %s",
		recs, e.track.longestGap(0, o.inputs, nil).Round(time.Millisecond), o.report)
	e.fleet.logTimeline(t, 40)
}
