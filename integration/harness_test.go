package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/internal/verify"
)

// EnvBrokerScript names the broker control script (integration/kafka/broker.sh)
// that the real-broker pass of `make test` sets; the broker-restart fault
// needs it.
const EnvBrokerScript = "KAFKA_BROKER_SCRIPT"

// EnvRequireNodeFaults, when set (the Makefile's cluster pass sets it when
// the real pass is mandatory, CI=true), turns TestClusterNodeFaults' skip
// into a failure: in CI a cluster pass that lost KAFKA_BROKER_SCRIPT or its
// third node must not pass without its node faults.
const EnvRequireNodeFaults = "ONCEFLOW_REQUIRE_NODE_FAULTS"

// workerConfig is the processor configuration every worker of a run gets.
type workerConfig struct {
	commitInterval   time.Duration
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	txnTimeout       time.Duration
	drainTimeout     time.Duration
	handlerLatency   time.Duration
	poisonEvery      int
	stateful         bool // -state-dir: per-session counts in a state store (see faults_stateful_test.go)
	positionGuard    bool // -position-guard
}

// config is one run's pipeline and load.
type config struct {
	partitions int32 // input and output partitions (equal: a session keeps its partition number)
	sessions   int   // distinct keys; input ID i belongs to session i % sessions
	rate       int   // inputs per second
	valueSize  int
	instances  int // workers at the start
	worker     workerConfig
	settle     time.Duration // bound on the wait for every input after feeding stops
	// net puts every worker behind its own fault-injecting proxies
	// (kafkatest.Net, see netfaults_test.go): env.net.
	net bool
	// netLatency is added to every worker's round trips from the start
	// (with net).
	netLatency time.Duration
}

func defaultConfig() config {
	return config{
		partitions: 6,
		sessions:   200,
		rate:       800,
		valueSize:  64,
		instances:  3,
		worker: workerConfig{
			commitInterval:   100 * time.Millisecond,
			sessionTimeout:   3 * time.Second,
			rebalanceTimeout: 10 * time.Second,
			txnTimeout:       6 * time.Second,
			drainTimeout:     2 * time.Second,
			handlerLatency:   200 * time.Microsecond,
		},
		settle: 60 * time.Second,
	}
}

// env is one run: cluster, topics, input feeder, output tracker, workers.
type env struct {
	t     *testing.T
	cfg   config
	c     *kafkatest.Cluster
	in    string
	out   string
	dlq   string
	group string
	seed  uint64
	rng   *rand.Rand
	t0    time.Time
	fleet *fleet
	net   *kafkatest.Net // with cfg.net: every worker's network path, by instance
	feed  *feeder
	track *tracker
	next  int // next new instance number

	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup // feeder
	faultWG sync.WaitGroup // background fault steps (bg)
}

func newEnv(t *testing.T, cfg config) *env {
	t.Helper()
	bin := worker(t)
	e := &env{t: t, cfg: cfg, c: kafkatest.New(t), t0: time.Now()}
	e.seed = *seedFlag
	if e.seed == 0 {
		e.seed = uint64(time.Now().UnixNano())
	}
	e.rng = rand.New(rand.NewPCG(e.seed, e.seed^0x9e3779b97f4a7c15))
	e.in = e.c.CreateTopic(t, "in", cfg.partitions, nil)
	e.out = e.c.CreateTopic(t, "out", cfg.partitions, nil)
	e.dlq = e.c.CreateTopic(t, "dlq", 2, nil)
	e.group = kafkatest.Name(t, "app")
	w := cfg.worker
	e.c.ConsumerGroupTimeouts(t, e.group, w.sessionTimeout, min(w.sessionTimeout/3, time.Second))
	t.Logf("cluster %s %v; seed %d; group %s", e.c.Mode, e.c.Brokers, e.seed, e.group)

	args := []string{
		"-brokers", strings.Join(e.c.Brokers, ","),
		"-group", e.group,
		"-in", e.in, "-out", e.out, "-dlq", e.dlq,
		"-commit-interval", w.commitInterval.String(),
		"-session-timeout", w.sessionTimeout.String(),
		"-rebalance-timeout", w.rebalanceTimeout.String(),
		"-txn-timeout", w.txnTimeout.String(),
		"-drain-timeout", w.drainTimeout.String(),
		"-handler-latency", w.handlerLatency.String(),
		"-poison-every", fmt.Sprint(w.poisonEvery),
		"-log-level", *wLevel,
		"-kgo-log-level", *kgoLevel,
		"-max-kafka-version", *wMaxVer,
		"-group-protocol", kafkatest.GroupProtocol(),
	}
	if w.stateful {
		args = append(args, "-state-dir", t.TempDir())
	}
	if w.positionGuard {
		args = append(args, "-position-guard")
	}
	e.fleet = newFleet(t, bin, args, e.t0)
	if cfg.net {
		e.net = kafkatest.NewNet(t, netBrokers(t, e.c))
		e.net.SetLatency(cfg.netLatency)
		e.fleet.perInstance = func(instance string) []string {
			return []string{"-dial-map", e.net.End(instance).DialMap()}
		}
	}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	e.track = newTracker(e.ctx, e.c, e.out, e.dlq)
	fopts := []kgo.Opt{kgo.DefaultProduceTopic(e.in)}
	if *feedLog {
		fopts = append(fopts, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelInfo, func() string { return time.Now().Format("15:04:05.000 feeder: ") })))
	}
	e.feed = newFeeder(e.c.Client(t, fopts...), cfg)
	// Cleanups run last-in first-out: workers first, then the clients.
	t.Cleanup(func() {
		e.faultWG.Wait()
		e.fleet.close()
		e.feed.stop()
		e.cancel()
		e.track.close()
		e.wg.Wait()
	})
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		e.feed.run(e.ctx)
	}()
	for range cfg.instances {
		e.startNew()
	}
	return e
}

// startNew starts a worker with a new instance ID.
func (e *env) startNew() *proc {
	e.next++
	return e.fleet.start(fmt.Sprintf("w%d", e.next))
}

// randDur returns a random duration in [lo, hi).
func (e *env) randDur(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(e.rng.Int64N(int64(hi-lo)))
}

// sleep waits d or until the feeder failed; it reports false on failure.
func (e *env) sleep(d time.Duration) bool {
	select {
	case <-time.After(d):
		return true
	case <-e.feed.failed:
		return false
	}
}

// faults calls step repeatedly for d, with pauses in [lo, hi) between.
func (e *env) faults(d, lo, hi time.Duration, step func()) {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if !e.sleep(e.randDur(lo, hi)) {
			return
		}
		step()
	}
}

// bg runs a fault step in the background (see waitFaults).
func (e *env) bg(fn func()) {
	e.faultWG.Add(1)
	go func() {
		defer e.faultWG.Done()
		fn()
	}()
}

// waitFaults waits for the background fault steps.
func (e *env) waitFaults() { e.faultWG.Wait() }

// brokerScript returns the broker control script, or "" on kfake.
func brokerScript() string { return os.Getenv(EnvBrokerScript) }

// singleBroker reports whether the cluster has exactly one broker, the
// only shape in which restartBroker means something: broker.sh's kill and
// restart without a node number act on the single node, and refuse on a
// cluster (KAFKA_NODES=3), where losing one broker is a leader failover, not
// the crash and unclean recovery of every replica these tests exercise.
func singleBroker(t testing.TB, c *kafkatest.Cluster) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bs, err := c.Admin.ListBrokers(ctx)
	if err != nil {
		t.Fatalf("listing brokers: %v", err)
	}
	return len(bs) == 1
}

// restartBroker hard-kills the real broker, waits down, and restarts it on
// the same data dir.
func (e *env) restartBroker(down time.Duration) {
	e.t.Helper()
	script := brokerScript()
	e.fleet.addBrokerRestart()
	e.fleet.eventf("broker SIGKILL")
	if out, err := exec.Command("bash", script, "kill").CombinedOutput(); err != nil {
		e.t.Fatalf("%s kill: %v\n%s", script, err, out)
	}
	time.Sleep(down)
	e.fleet.eventf("broker restart begins")
	start := time.Now()
	if out, err := exec.Command("bash", script, "restart").CombinedOutput(); err != nil {
		e.t.Fatalf("%s restart: %v\n%s", script, err, out)
	}
	e.fleet.eventf("broker ready again (restart took %v)", time.Since(start).Round(time.Millisecond))
}

// ---------------------------------------------------------------- feeder --

// inputLoc is where an input landed.
type inputLoc struct {
	partition int32
	offset    int64
}

// feeder produces inputs continuously at cfg.rate per second: input ID i
// has key sessionKey(i) and Seq i / sessions, so each session's Seq runs
// 0, 1, 2, … in ID order. An input counts as produced once acknowledged;
// a produce that fails leaves IDs of unknown fate, which fails the run
// (the suite tests the processor, not the input producer).
type feeder struct {
	cl   *kgo.Client
	cfg  config
	quit chan struct{}
	done chan struct{}

	failed   chan struct{} // closed on a produce failure
	stopOnce sync.Once

	mu       sync.Mutex
	produced int
	extra    int // inputs asked for by burst, beyond the rate
	locs     []inputLoc
	err      error
}

func newFeeder(cl *kgo.Client, cfg config) *feeder {
	return &feeder{cl: cl, cfg: cfg, quit: make(chan struct{}), done: make(chan struct{}), failed: make(chan struct{})}
}

func sessionKey(id uint64, sessions int) string { return fmt.Sprintf("s%04d", id%uint64(sessions)) }

func (f *feeder) run(ctx context.Context) {
	defer close(f.done)
	start := time.Now()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-f.quit:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		f.mu.Lock()
		from, extra := f.produced, f.extra
		f.mu.Unlock()
		n := extra + int(time.Since(start).Seconds()*float64(f.cfg.rate)) - from
		n = min(n, 2000)
		if n <= 0 {
			continue
		}
		if !f.produce(ctx, n) {
			return
		}
	}
}

// produce produces the next n inputs; false when that failed (the run
// cannot be judged) or ctx ended.
func (f *feeder) produce(ctx context.Context, n int) bool {
	from := f.count()
	rs := make([]*kgo.Record, n)
	for i := range rs {
		id := uint64(from + i)
		v := verify.Append(nil, verify.Payload{ID: id, Seq: id / uint64(f.cfg.sessions), ProducedAt: time.Now()}, f.cfg.valueSize)
		rs[i] = &kgo.Record{Key: []byte(sessionKey(id, f.cfg.sessions)), Value: v}
	}
	if err := f.cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		f.mu.Lock()
		if ctx.Err() == nil {
			f.err = fmt.Errorf("producing inputs %d..%d: %w (their fate is unknown; the run cannot be judged)", from, from+n-1, err)
			close(f.failed)
		}
		f.mu.Unlock()
		return false
	}
	f.mu.Lock()
	for _, r := range rs {
		f.locs = append(f.locs, inputLoc{r.Partition, r.Offset})
	}
	f.produced += n
	f.mu.Unlock()
	return true
}

// burst has n inputs produced at once (2,000 per 20 ms tick), beyond the
// rate, and returns the count the feeder reaches once they are (a
// throughput measure: how fast the workers drain them).
func (f *feeder) burst(n int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.extra += n
	return f.produced + n
}

// stop ends feeding and returns the number of inputs produced.
func (f *feeder) stop() int {
	f.stopOnce.Do(func() { close(f.quit) })
	<-f.done
	return f.count()
}

func (f *feeder) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.produced
}

func (f *feeder) error() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

func (f *feeder) loc(id uint64) inputLoc {
	f.mu.Lock()
	defer f.mu.Unlock()
	if id < uint64(len(f.locs)) {
		return f.locs[id]
	}
	return inputLoc{-1, -1}
}

// --------------------------------------------------------------- tracker --

// tracker follows the output and dead-letter topics read_committed, live,
// to tell when every input is accounted for. The verdict comes from a
// fresh read-back at the end (verifyRun); the tracker only watches.
type tracker struct {
	cl   *kgo.Client
	done chan struct{}

	mu       sync.Mutex
	seen     []uint8         // per ID: times seen (saturating)
	lat      []time.Duration // per ID: first seen minus ProducedAt (read_committed latency)
	firstAt  []int64         // per ID: unix nanos when first seen
	distinct int
	dups     int
	records  int
	last     atomic.Int64 // unix nanos of the last new record
}

func newTracker(ctx context.Context, c *kafkatest.Cluster, topics ...string) *tracker {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(c.Brokers...),
		kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	)
	tr := &tracker{cl: cl, done: make(chan struct{})}
	if err != nil {
		panic(err) // only bad options fail here
	}
	go tr.run(ctx)
	return tr
}

func (tr *tracker) run(ctx context.Context) {
	defer close(tr.done)
	for ctx.Err() == nil {
		fs := tr.cl.PollFetches(ctx)
		tr.mu.Lock()
		fs.EachRecord(func(r *kgo.Record) {
			tr.records++
			p, err := verify.Decode(r.Value)
			if err != nil {
				return
			}
			for p.ID >= uint64(len(tr.seen)) {
				grow := max(1024, len(tr.seen))
				tr.seen = append(tr.seen, make([]uint8, grow)...)
				tr.lat = append(tr.lat, make([]time.Duration, grow)...)
				tr.firstAt = append(tr.firstAt, make([]int64, grow)...)
			}
			switch tr.seen[p.ID] {
			case 0:
				tr.distinct++
				now := time.Now()
				tr.lat[p.ID], tr.firstAt[p.ID] = now.Sub(p.ProducedAt), now.UnixNano()
			default:
				tr.dups++
			}
			if tr.seen[p.ID] < 255 {
				tr.seen[p.ID]++
			}
		})
		tr.mu.Unlock()
		if !fs.Empty() {
			tr.last.Store(time.Now().UnixNano())
		}
	}
}

// status returns distinct IDs seen, duplicate records seen and all records.
func (tr *tracker) status() (distinct, dups, records int) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.distinct, tr.dups, tr.records
}

// missing returns up to n IDs below produced not seen yet.
func (tr *tracker) missing(produced, n int) []uint64 {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var ids []uint64
	for id := 0; id < produced && len(ids) < n; id++ {
		if id >= len(tr.seen) || tr.seen[id] == 0 {
			ids = append(ids, uint64(id))
		}
	}
	return ids
}

func (tr *tracker) close() {
	<-tr.done
	tr.cl.Close()
}
