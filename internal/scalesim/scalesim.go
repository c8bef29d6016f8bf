// Package scalesim runs onceflow processors at sizes this machine's real
// brokers cannot hold (up to 10,000 partitions over 100 instances), on an
// in-process kfake cluster, and counts rather than times: requests, bytes
// and partitions named per commit, heap and goroutines per assigned
// partition, and the group's join rounds. kfake has no replication, disk
// or network, so its timings say nothing about a cluster; what a client
// sends, and what it keeps in memory, is the same against any broker.
//
// The processors are built through package processor's public API, as a
// user would: one processor.Processor per instance in one process, each
// with its own instance ID, counted through processor.WithKgoOpts
// (franz-go's HookBrokerWrite and HookBrokerRead) and through kfake's
// control functions, which see each request decoded.
package scalesim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/onceflow/onceflow/processor"
)

// Config is one simulated deployment.
type Config struct {
	Partitions int32 // input partitions (the output topic has as many)
	Instances  int   // processors, each with its own instance ID
	// Touched is how many partitions get input in the touched phase
	// (default 10, at most Partitions), PerTouched records each (default 20).
	Touched, PerTouched int
	// Busy is how many records every partition gets in the busy phase;
	// the heap is read when all are taken and every partition's first is
	// in a handler that waits (0: no busy phase).
	Busy int
	// PreKIP890 pins kfake to Kafka 3.9's versions: before KIP-890 part 2
	// a transaction names its partitions in AddPartitionsToTxn and its
	// group in AddOffsetsToTxn; after it (Kafka 4's transaction.version
	// 2, kfake's default) Produce and TxnOffsetCommit add them implicitly.
	PreKIP890 bool
	// Within bounds each wait (settling, a phase's outputs). Default 5m.
	Within time.Duration
	// IdleFor is how long the idle and busy heaps are watched (the least
	// reading counts) and the idle traffic counted; default 1.5s. The processors'
	// topic watch asks for the job's topics' metadata every 10s: 11s
	// sees one round of it.
	IdleFor time.Duration
	// IdleProfile, if set, gets a heap profile (pprof) taken when the idle
	// heap is read: where an idle partition's bytes are.
	IdleProfile io.Writer
	// Logf, if set, reports progress.
	Logf func(format string, args ...any)
}

// Phase is what one burst of input cost.
type Phase struct {
	Touched int // partitions that got input
	Records int // input records, each with one output
	Counts  Counts
}

// PerCommit returns a request kind's requests, bytes written, bytes read
// and partitions named per committed transaction.
func (p Phase) PerCommit(key int16) (requests, written, read, partitions float64) {
	n := float64(p.Counts.Commits)
	if n == 0 {
		return 0, 0, 0, 0
	}
	t := p.Counts.ByKey[key]
	return float64(t.Requests) / n, float64(t.Written) / n, float64(t.Read) / n, float64(t.Partitions) / n
}

// Result is one run's measurements.
type Result struct {
	Config Config
	// Settle is how long the group took from the first start until every
	// partition was assigned and every instance ready (kfake's time, for
	// orientation only). Generation is the classic group's generation
	// then: the join/assignment rounds it took. JoinGroups and SyncGroups
	// are the requests all instances sent until then.
	Settle                 time.Duration
	Generation             int32
	JoinGroups, SyncGroups int64
	// IdleHeap and BusyHeap are live heap bytes (after GC) above the
	// cluster's with its topics and no processor; the goroutines likewise.
	// Both include kfake's own state for the group, its members and, when
	// busy, its copy of the input records: an upper bound on onceflow's.
	IdleHeap, BusyHeap             int64
	IdleGoroutines, BusyGoroutines int
	// Idle is what all instances sent over Config.IdleFor after settling,
	// with no input: no commit is right (nothing finished, nothing to
	// commit); fetches, heartbeats and metadata are the standing cost.
	Idle    Counts
	Touched Phase // input to Config.Touched partitions
	All     Phase // input to every partition (the busy phase)
}

// PerPartition divides by the partitions assigned.
func (r Result) PerPartition(v int64) float64 { return float64(v) / float64(r.Config.Partitions) }

func (c *Config) defaults() error {
	if c.Partitions <= 0 || c.Instances <= 0 {
		return fmt.Errorf("scalesim: %d partitions over %d instances: both must be positive", c.Partitions, c.Instances)
	}
	if c.Instances > int(c.Partitions) {
		return fmt.Errorf("scalesim: %d instances for %d partitions: some would idle", c.Instances, c.Partitions)
	}
	if c.Touched == 0 {
		c.Touched = 10
	}
	c.Touched = min(c.Touched, int(c.Partitions))
	if c.PerTouched == 0 {
		c.PerTouched = 20
	}
	if c.IdleFor == 0 {
		c.IdleFor = 1500 * time.Millisecond
	}
	if c.Within == 0 {
		c.Within = 5 * time.Minute
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	return nil
}

const (
	inTopic, outTopic, group = "scalesim-in", "scalesim-out", "scalesim"
)

// sim is one run's moving parts.
type sim struct {
	cfg   Config
	fake  *kfake.Cluster
	feed  *kgo.Client
	count *counter
	procs []*processor.Processor
	// gate, when set, holds every handler until it is closed: the busy
	// phase's records stay in flight while the heap is read.
	gate atomic.Pointer[chan struct{}]
	held atomic.Int64 // handlers waiting at the gate
}

// Run runs one simulated deployment and returns what it counted.
func Run(ctx context.Context, cfg Config) (res Result, err error) {
	if err := cfg.defaults(); err != nil {
		return res, err
	}
	res.Config = cfg
	s := &sim{cfg: cfg, count: newCounter()}
	fopts := []kfake.Opt{kfake.NumBrokers(3), kfake.SeedTopics(cfg.Partitions, inTopic, outTopic)}
	if cfg.PreKIP890 {
		fopts = append(fopts, kfake.MaxVersions(kversion.V3_9_0()))
	}
	s.fake, err = kfake.NewCluster(fopts...)
	if err != nil {
		return res, err
	}
	defer s.fake.Close()
	s.feed, err = kgo.NewClient(kgo.SeedBrokers(s.fake.ListenAddrs()...), kgo.DefaultProduceTopic(inTopic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MaxBufferedRecords(1<<20))
	if err != nil {
		return res, err
	}
	defer s.feed.Close()
	// Metadata for the topic before the baseline, so that the feeder's
	// own map of 10,000 partitions is not charged to the processors.
	if err := s.feed.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("warm")}).FirstErr(); err != nil {
		return res, fmt.Errorf("scalesim: feeder: %w", err)
	}
	s.count.watch(s.fake)
	heap0, g0 := quietHeap(1500*time.Millisecond), runtime.NumGoroutine()

	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, cfg.Instances)
	defer func() {
		cancel()
		var errs []error
		for range s.procs {
			if e := <-done; e != nil && !errors.Is(e, context.Canceled) {
				errs = append(errs, e)
			}
		}
		if err == nil {
			err = errors.Join(errs...)
		}
	}()
	start := time.Now()
	for i := range cfg.Instances {
		p, err := s.newProcessor(i)
		if err != nil {
			return res, err
		}
		s.procs = append(s.procs, p)
		go func() { done <- p.Run(ctx) }()
	}
	if err := s.settle(ctx, &res); err != nil {
		return res, err
	}
	res.Settle = time.Since(start)
	c := s.count.snapshot()
	res.JoinGroups = c.ByKey[int16(kmsg.JoinGroup)].Requests
	res.SyncGroups = c.ByKey[int16(kmsg.SyncGroup)].Requests
	cfg.Logf("settled: %d partitions over %d instances in %v, generation %d", cfg.Partitions, cfg.Instances, res.Settle.Round(time.Millisecond), res.Generation)

	// Idle: the heap over a quiet while, and what was sent meanwhile.
	res.IdleHeap, res.IdleGoroutines = quietHeap(cfg.IdleFor)-heap0, runtime.NumGoroutine()-g0
	res.Idle = s.count.snapshot().Sub(c)
	if cfg.IdleProfile != nil {
		if err := pprof.Lookup("heap").WriteTo(cfg.IdleProfile, 0); err != nil {
			return res, err
		}
	}

	// Touched: input to a few partitions, spread over the range.
	var wanted int64 = 1 // the warm-up record
	parts := make([]int32, cfg.Touched)
	for k := range parts {
		parts[k] = int32(int64(k) * int64(cfg.Partitions) / int64(cfg.Touched))
	}
	if res.Touched, err = s.phase(ctx, parts, cfg.PerTouched, &wanted, nil); err != nil {
		return res, err
	}
	cfg.Logf("touched %d: %d commits", cfg.Touched, res.Touched.Counts.Commits)

	if cfg.Busy > 0 {
		all := make([]int32, cfg.Partitions)
		for p := range all {
			all[p] = int32(p)
		}
		busy := func() {
			res.BusyHeap, res.BusyGoroutines = quietHeap(cfg.IdleFor)-heap0, runtime.NumGoroutine()-g0
		}
		if res.All, err = s.phase(ctx, all, cfg.Busy, &wanted, busy); err != nil {
			return res, err
		}
		cfg.Logf("all %d: %d commits", cfg.Partitions, res.All.Counts.Commits)
	}
	// One output per input, each committed once: more would be a
	// duplicate (a count, not a read-back: the real-broker suites verify).
	if got := s.sum(func(st processor.Stats) int64 { return st.Outputs }); got != wanted {
		return res, fmt.Errorf("scalesim: %d outputs committed for %d inputs", got, wanted)
	}
	return res, nil
}

func (s *sim) newProcessor(i int) (*processor.Processor, error) {
	return processor.New(
		processor.WithBrokers(s.fake.ListenAddrs()...),
		processor.WithGroup(group),
		processor.WithInstanceID(fmt.Sprintf("i%03d", i)),
		processor.WithInputTopics(inTopic),
		processor.WithOutputTopic(outTopic),
		processor.WithLogger(slog.New(slog.DiscardHandler)),
		processor.WithKgoOpts(kgo.WithHooks(s.count)),
		processor.WithHandler(func(ctx context.Context, rec *kgo.Record, out processor.Emitter) error {
			if g := s.gate.Load(); g != nil {
				s.held.Add(1)
				defer s.held.Add(-1)
				select {
				case <-*g:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			out.Emit(&kgo.Record{Value: rec.Value})
			return nil
		}),
	)
}

// settle waits until kfake's group is stable with every instance in it
// and every partition assigned, every instance says it is ready with its
// share, and the generation has held for a second (a member that is
// still joining would bump it).
func (s *sim) settle(ctx context.Context, res *Result) error {
	deadline := time.Now().Add(s.cfg.Within)
	var gen int32 = -1
	var since time.Time
	for {
		g := s.fake.GroupInfo(group)
		ok := g != nil && g.State == "Stable" && len(g.Members) == s.cfg.Instances && g.NumAssigned() == int(s.cfg.Partitions)
		if ok {
			assigned := 0
			for _, p := range s.procs {
				h := p.Health()
				ok = ok && h.Ready
				assigned += h.AssignedPartitions
			}
			ok = ok && assigned == int(s.cfg.Partitions)
		}
		switch {
		case !ok:
			gen = -1
		case g.Epoch != gen:
			gen, since = g.Epoch, time.Now()
		case time.Since(since) >= time.Second:
			res.Generation = gen
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("scalesim: not settled within %v: %s", s.cfg.Within, describe(g, s.procs))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stuck says which instances hold unfinished records, and what their
// transactions went through, for a phase that did not finish.
func (s *sim) stuck() string {
	var b strings.Builder
	var aborts, rebuilds, fenced int64
	n := 0
	for i, p := range s.procs {
		st := p.Stats()
		aborts, rebuilds, fenced = aborts+st.Aborts, rebuilds+st.Rebuilds, fenced+st.Fenced
		if h := p.Health(); h.Oldest != nil && n < 5 {
			n++
			fmt.Fprintf(&b, "; i%03d: phase %s, oldest unfinished %s/%d@%d for %v, %d commits, %d aborts %v, reasons %q",
				i, h.Phase, h.Oldest.Topic, h.Oldest.Partition, h.Oldest.Offset, h.Oldest.Age.Round(time.Millisecond),
				st.Commits, st.Aborts, st.AbortsBy, h.Reasons)
		}
	}
	c := s.count.snapshot()
	return fmt.Sprintf("all instances: %d aborts, %d rebuilds, %d fenced; EndTxn %d commit %d abort%s", aborts, rebuilds, fenced, c.Commits, c.Aborts, b.String())
}

func describe(g *kfake.GroupInfo, procs []*processor.Processor) string {
	if g == nil {
		return "no group"
	}
	ready, assigned := 0, 0
	var notReady []string
	for i, p := range procs {
		h := p.Health()
		if h.Ready {
			ready++
		} else if len(notReady) < 3 {
			notReady = append(notReady, fmt.Sprintf("i%03d: phase %s, %d assigned, %q", i, h.Phase, h.AssignedPartitions, h.Reasons))
		}
		assigned += h.AssignedPartitions
	}
	return fmt.Sprintf("group %s, generation %d, %d members, %d assigned; %d of %d instances ready, %d partitions held; not ready: %s",
		g.State, g.Epoch, len(g.Members), g.NumAssigned(), ready, len(procs), assigned, strings.Join(notReady, "; "))
}

// phase feeds n records to each of parts (one key per partition: one
// session each), calls held, if set, once every record is in a handler
// behind a closed gate, and returns what the commits of those records
// cost. wanted is the running count of inputs, each of which yields one
// committed output.
func (s *sim) phase(ctx context.Context, parts []int32, n int, wanted *int64, held func()) (Phase, error) {
	ph := Phase{Touched: len(parts), Records: len(parts) * n}
	// Commits that may still be under way from before end first.
	time.Sleep(200 * time.Millisecond)
	s.count.resetMax()
	before := s.count.snapshot()
	consumed0 := s.sum(func(st processor.Stats) int64 { return st.Consumed })
	var gate chan struct{}
	if held != nil {
		gate = make(chan struct{})
		s.gate.Store(&gate)
	}
	recs := make([]*kgo.Record, 0, ph.Records)
	for _, p := range parts {
		key := []byte("p" + strconv.Itoa(int(p)))
		for range n {
			recs = append(recs, &kgo.Record{Partition: p, Key: key, Value: []byte("v")})
		}
	}
	if err := s.feed.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return ph, fmt.Errorf("scalesim: feeding: %w", err)
	}
	*wanted += int64(ph.Records)
	if held != nil {
		// Every record taken, and every partition's first in a handler
		// (one session per partition: the rest wait behind it).
		err := s.await(ctx, "records in flight", consumed0+int64(ph.Records), func(st processor.Stats) int64 { return st.Consumed })
		if err == nil {
			err = s.waitFor(ctx, "handlers running", int64(len(parts)), s.held.Load)
		}
		if err != nil {
			close(gate)
			return ph, err
		}
		held()
		s.gate.Store(nil)
		close(gate)
	}
	if err := s.await(ctx, "outputs committed", *wanted, func(st processor.Stats) int64 { return st.Outputs }); err != nil {
		return ph, fmt.Errorf("%w; %s", err, s.stuck())
	}
	ph.Counts = s.count.snapshot().Sub(before)
	return ph, nil
}

func (s *sim) sum(f func(processor.Stats) int64) int64 {
	var n int64
	for _, p := range s.procs {
		n += f(p.Stats())
	}
	return n
}

func (s *sim) await(ctx context.Context, what string, want int64, f func(processor.Stats) int64) error {
	return s.waitFor(ctx, what, want, func() int64 { return s.sum(f) })
}

func (s *sim) waitFor(ctx context.Context, what string, want int64, count func() int64) error {
	deadline := time.Now().Add(s.cfg.Within)
	for {
		got := count()
		if got >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("scalesim: %s: %d of %d within %v", what, got, want, s.cfg.Within)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// quietHeap is the least of readings of liveHeap every 500ms over d: a
// client holds a few MiB of buffers for a moment after a produce (seen:
// 9 MiB, gone a second later), and kfake holds each metadata response
// while it writes it; neither is what a partition costs.
func quietHeap(d time.Duration) int64 {
	least := liveHeap()
	for end := time.Now().Add(d); time.Now().Before(end); {
		time.Sleep(500 * time.Millisecond)
		least = min(least, liveHeap())
	}
	return least
}

// liveHeap is the heap after a full collection: what is reachable.
func liveHeap() int64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC() // the second frees what finalizers of the first released
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
