package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/txn"
)

// Node faults on a cluster (integration/kafka/broker.sh with KAFKA_NODES=3:
// RF 3, min.insync.replicas 2). Production runs brokers like this, and there
// a broker crash is not the unclean recovery of every replica that
// restartBroker exercises on a single node: the partitions the node led get
// new leaders, and the group and transaction coordinators it held move to
// another node, which loads the group's offsets and the transactions' state
// from the replicas. Each fault SIGKILLs one node, chosen with kadm by the
// role it holds for the run, and restarts it on its own data dir; never two
// nodes at once (a second loss would leave partitions below min ISR, a
// different fault).

// clusterNodes is the node count at which a cluster counts as one: with
// three replicas and min.insync.replicas 2, one node may be lost and every
// write still succeeds.
const clusterNodes = 3

// nodeFault is the role that picks the node a fault kills.
type nodeFault int

const (
	faultLeader     nodeFault = iota // the node leading the most input partitions
	faultGroupCoord                  // the workers' group coordinator
	faultTxnCoord                    // the transaction coordinator of the most running workers
	faultLongOutage                  // any node, down longer than the workers' session timeout
	numNodeFaults
)

var nodeFaultNames = [numNodeFaults]string{"leader", "group-coordinator", "txn-coordinator", "long-outage"}

func (k nodeFault) String() string { return nodeFaultNames[k] }

// nodeRestarts counts node restarts by the fault that chose the node.
type nodeRestarts [numNodeFaults]int

func (n nodeRestarts) String() string {
	parts := make([]string, numNodeFaults)
	for k := range numNodeFaults {
		parts[k] = fmt.Sprintf("%s=%d", k, n[k])
	}
	return strings.Join(parts, " ")
}

// byKind returns the counts as a map for a JSON report.
func (n nodeRestarts) byKind() map[string]int {
	m := make(map[string]int, numNodeFaults)
	for k := range numNodeFaults {
		m[k.String()] = n[k]
	}
	return m
}

// onCluster reports whether node faults can run: a real cluster of at least
// clusterNodes brokers with the control script that kills and restarts one
// node. The broker count comes from the cluster's own metadata, not from
// KAFKA_BROKERS: that list names bootstrap addresses, which may be a single
// address of a larger cluster. When it reports false, why says what is
// missing (for t.Skip).
func onCluster(t testing.TB, c *kafkatest.Cluster) (ok bool, why string) {
	t.Helper()
	if !kafkatest.Real() || brokerScript() == "" {
		return false, fmt.Sprintf("needs a real cluster and its control script: run in the cluster pass of `make test` "+
			"(KAFKA_BROKERS of a KAFKA_NODES=3 integration/kafka/broker.sh cluster and %s=integration/kafka/broker.sh)", EnvBrokerScript)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bs, err := c.Admin.ListBrokers(ctx)
	if err != nil {
		t.Fatalf("listing brokers: %v", err)
	}
	if len(bs) < clusterNodes {
		return false, fmt.Sprintf("kills one node of a cluster: needs %d+ brokers (RF 3, min.insync.replicas 2), this one has %d "+
			"(on a single node a broker kill is TestBrokerRestart)", clusterNodes, len(bs))
	}
	return true, ""
}

// nodeChoice is the node a fault kills and why.
type nodeChoice struct {
	node int32
	why  string
}

// chooseNode asks the cluster which node holds the role of kind. Ties go to
// a node drawn with rng (from the run's seed). broker.sh gives node N the
// node ID N, so a node ID is also the script's node number.
func (e *env) chooseNode(ctx context.Context, kind nodeFault, rng *rand.Rand) (nodeChoice, error) {
	adm := e.c.Admin
	switch kind {
	case faultLeader:
		tds, err := adm.ListTopics(ctx, e.in)
		if err == nil {
			err = tds.Error()
		}
		if err != nil {
			return nodeChoice{}, fmt.Errorf("input topic metadata: %w", err)
		}
		led := make(map[int32][]int32)
		for _, p := range tds[e.in].Partitions.Sorted() {
			if p.Leader >= 0 {
				led[p.Leader] = append(led[p.Leader], p.Partition)
			}
		}
		if len(led) == 0 {
			return nodeChoice{}, fmt.Errorf("no input partition has a leader")
		}
		n := drawNode(rng, busiest(led))
		return nodeChoice{n, fmt.Sprintf("leads input partitions %v (%d of %d; leaders by node %v)",
			led[n], len(led[n]), e.cfg.partitions, led)}, nil
	case faultGroupCoord:
		r, ok := adm.FindGroupCoordinators(ctx, e.group)[e.group]
		if !ok || r.Err != nil {
			return nodeChoice{}, fmt.Errorf("group coordinator of %s: %v (found %v)", e.group, r.Err, ok)
		}
		return nodeChoice{r.NodeID, "group coordinator of " + e.group}, nil
	case faultTxnCoord:
		// Running workers only: a transactional ID nobody uses any more
		// has nothing in flight on its coordinator.
		insts := make(map[string]bool)
		for _, p := range e.fleet.live() {
			insts[p.instance] = true
		}
		if len(insts) == 0 {
			return nodeChoice{}, fmt.Errorf("no running worker")
		}
		ids := make([]string, 0, len(insts))
		for inst := range insts {
			ids = append(ids, txn.ID(e.group, inst))
		}
		slices.Sort(ids)
		coords := make(map[int32][]string)
		for _, r := range adm.FindTxnCoordinators(ctx, ids...).Sorted() {
			if r.Err == nil {
				coords[r.NodeID] = append(coords[r.NodeID], strings.TrimPrefix(r.Name, e.group+"/"))
			}
		}
		if len(coords) == 0 {
			return nodeChoice{}, fmt.Errorf("no transaction coordinator found for %v", ids)
		}
		n := drawNode(rng, busiest(coords))
		return nodeChoice{n, fmt.Sprintf("transaction coordinator of workers %v (%d of %d running instances; by node %v)",
			coords[n], len(coords[n]), len(ids), coords)}, nil
	default: // faultLongOutage
		bs, err := adm.ListBrokers(ctx)
		if err != nil {
			return nodeChoice{}, fmt.Errorf("listing brokers: %w", err)
		}
		n := drawNode(rng, bs.NodeIDs())
		return nodeChoice{n, "drawn at random (any node: what matters is the time it stays down)"}, nil
	}
}

// busiest returns the nodes that hold the most entries of held.
func busiest[T any](held map[int32][]T) []int32 {
	most := 0
	for _, xs := range held {
		most = max(most, len(xs))
	}
	var top []int32
	for n, xs := range held {
		if len(xs) == most {
			top = append(top, n)
		}
	}
	return top
}

// drawNode returns one of nodes, drawn with rng.
func drawNode(rng *rand.Rand, nodes []int32) int32 {
	slices.Sort(nodes)
	return nodes[rng.IntN(len(nodes))]
}

// roles describes what node holds besides the role it was chosen for, so
// the timeline shows when one kill hits several (the group and a
// transaction coordinator often share a node).
func (e *env) roles(ctx context.Context, node int32) string {
	var rs []string
	if tds, err := e.c.Admin.ListTopics(ctx, e.in); err == nil {
		var led []int32
		for _, p := range tds[e.in].Partitions.Sorted() {
			if p.Leader == node {
				led = append(led, p.Partition)
			}
		}
		rs = append(rs, fmt.Sprintf("leads input partitions %v", led))
	}
	if r := e.c.Admin.FindGroupCoordinators(ctx, e.group)[e.group]; r.Err == nil && r.NodeID == node {
		rs = append(rs, "group coordinator")
	}
	var ids []string
	for _, p := range e.fleet.live() {
		ids = append(ids, txn.ID(e.group, p.instance))
	}
	var txns []string
	for _, r := range e.c.Admin.FindTxnCoordinators(ctx, ids...).Sorted() {
		if r.Err == nil && r.NodeID == node {
			txns = append(txns, strings.TrimPrefix(r.Name, e.group+"/"))
		}
	}
	if len(txns) > 0 {
		rs = append(rs, fmt.Sprintf("transaction coordinator of %v", txns))
	}
	return strings.Join(rs, "; ")
}

// nodeDown is how long a fault of kind keeps its node down. A short outage
// (under broker.sh's broker.session.timeout.ms, 4 s) may end before the
// controller fences the node; the long one outlasts both that and the
// workers' session timeout, so every role moves and the members' sessions
// would have expired had their coordinator not moved with them.
func (e *env) nodeDown(kind nodeFault) time.Duration {
	if kind == faultLongOutage {
		return e.cfg.worker.sessionTimeout + e.randDur(3*time.Second, 5*time.Second)
	}
	return e.randDur(500*time.Millisecond, 2*time.Second)
}

// nodeFault chooses a node for kind, SIGKILLs it, keeps it down for down
// and restarts it on its own data dir, then waits until every replica of
// the run's topics and of the internal topics is in sync again, so the next
// fault finds three replicas (one node at a time). It also waits for full
// ISR before the kill: a node restarted by an earlier fault may still be
// catching up. It returns an error instead of failing the test, and draws
// from rng, not e.rng, so the soak can run it in the background.
func (e *env) nodeFault(kind nodeFault, down time.Duration, rng *rand.Rand) error {
	script := brokerScript()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if took, err := e.waitInSync(ctx); err != nil {
		return fmt.Errorf("before the %s fault: %w", kind, err)
	} else if took > time.Second {
		e.fleet.eventf("every replica in sync after %v", took.Round(time.Millisecond))
	}
	ch, err := e.chooseNode(ctx, kind, rng)
	if err != nil {
		return fmt.Errorf("choosing the node for the %s fault: %w", kind, err)
	}
	e.fleet.addNodeRestart(kind)
	e.fleet.eventf("node %d SIGKILL (%s fault: %s; holds: %s), down %v", ch.node, kind, ch.why, e.roles(ctx, ch.node), down.Round(time.Millisecond))
	e.t.Logf("%s fault: node %d, %s", kind, ch.node, ch.why)
	if out, err := exec.Command("bash", script, "kill", fmt.Sprint(ch.node)).CombinedOutput(); err != nil {
		return fmt.Errorf("%s kill %d: %v\n%s", script, ch.node, err, out)
	}
	time.Sleep(down)
	e.fleet.eventf("node %d restart begins", ch.node)
	start := time.Now()
	if out, err := exec.Command("bash", script, "restart", fmt.Sprint(ch.node)).CombinedOutput(); err != nil {
		return fmt.Errorf("%s restart %d: %v\n%s", script, ch.node, err, out)
	}
	e.fleet.eventf("node %d ready again (restart took %v)", ch.node, time.Since(start).Round(time.Millisecond))
	took, err := e.waitInSync(ctx)
	if err != nil {
		return fmt.Errorf("after restarting node %d: %w", ch.node, err)
	}
	e.fleet.eventf("every replica in sync %v after node %d was ready", took.Round(time.Millisecond), ch.node)
	return nil
}

// waitInSync waits until every partition of the run's topics and of the
// internal topics has its whole replica set in sync, and reports how long
// that took.
func (e *env) waitInSync(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	topics := []string{e.in, e.out, e.dlq, "__consumer_offsets", "__transaction_state"}
	var behind []string
	for {
		tds, err := e.c.Admin.ListTopics(ctx, topics...)
		behind = behind[:0]
		if err != nil {
			behind = append(behind, err.Error())
		}
		for _, td := range tds {
			if td.Err != nil {
				if strings.HasPrefix(td.Topic, "__") {
					continue // an internal topic not created yet has no replica to wait for
				}
				behind = append(behind, fmt.Sprintf("%s: %v", td.Topic, td.Err))
				continue
			}
			for _, p := range td.Partitions.Sorted() {
				if p.Err != nil || len(p.ISR) < len(p.Replicas) || p.Leader < 0 {
					behind = append(behind, fmt.Sprintf("%s/%d leader %d replicas %v isr %v err %v", p.Topic, p.Partition, p.Leader, p.Replicas, p.ISR, p.Err))
				}
			}
		}
		if len(behind) == 0 {
			return time.Since(start), nil
		}
		select {
		case <-ctx.Done():
			return time.Since(start), fmt.Errorf("replicas not in sync after %v: %s", time.Since(start).Round(time.Second),
				strings.Join(behind[:min(len(behind), 10)], "; "))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// closedOrNil reports whether ch is nil or closed: no node fault running.
func closedOrNil(ch chan struct{}) bool {
	if ch == nil {
		return true
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
