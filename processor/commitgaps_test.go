package processor_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/processor"
)

// TestRebalanceCommitGaps measures what a rebalance costs the partitions that do
// not move, under the protocol ONCEFLOW_GROUP_PROTOCOL names: two instances
// run while a third joins and leaves again and again, with input flowing
// all the time. A sampler reads the group's committed offsets and owners
// every 20ms. It reports the longest time a partition went without a
// commit while its owner stayed the same, split in two: gaps within a
// second of an owner change anywhere in the group (what rebalances cost)
// and the others (the commit cycle without rebalances, the baseline),
// from after the first two instances' own joins to the end of the input. It
// also reports the records handled more than once per rebalance, the
// throughput and each steady instance's commit cycle; it asserts
// exactly-once. The sampler's gaps carry its own delays (a sample takes
// 5–100 ms on the cluster, more when the machine is loaded), so the same
// gaps are also timed exactly from the steady instances' commit spans,
// which name the partitions each transaction committed: the time between
// two commits of a partition by the same instance, unless the sampler saw
// the partition go to another owner in between. A measurement, not a
// timed assertion: run it with ONCEFLOW_STORM=1 (see docs/benchmarks.md, "A
// rebalance storm", for the figures).
func TestRebalanceCommitGaps(t *testing.T) {
	if os.Getenv("ONCEFLOW_STORM") == "" {
		t.Skip("a measurement: set ONCEFLOW_STORM=1")
	}
	c := kafkatest.New(t)
	const (
		partitions = 6
		rate       = 4000 // records per second
		cycles     = 4
		joinFor    = 4 * time.Second // a joiner stays this long
		settleFor  = 8 * time.Second // session timeout (6s) and margin after it leaves
	)
	// Input flows through every join and leave and a settle after the last.
	inputs := rate * int((cycles*(joinFor+settleFor)+settleFor)/time.Second)
	pl := newPipeline(t, c, partitions, inputs, 600)
	var calls atomic.Int64
	handler := func(ctx context.Context, r *kgo.Record, out processor.Emitter) error {
		calls.Add(1)
		return copyHandler(ctx, r, out)
	}

	feedDone := make(chan struct{})
	go func() {
		defer close(feedDone)
		const batch = rate / 20
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for from := 0; from < inputs; from += batch {
			<-tick.C
			pl.produce(t, from, min(from+batch, inputs))
		}
	}()
	smp := newStormSampler(pl)
	sctx, stopSampling := context.WithCancel(context.Background())
	sampled := make(chan struct{})
	go func() { defer close(sampled); smp.run(sctx) }()

	began := time.Now()
	commitsA, commitsB := newCommitTimes(t), newCommitTimes(t)
	a := start(t, append(pl.opts("a", handler), processor.WithTracerProvider(commitsA.tp))...)
	b := start(t, append(pl.opts("b", handler), processor.WithTracerProvider(commitsB.tp))...)
	// The storm is timed from the middle of the first settle, after a's and
	// b's own joins, to the feed's end, after which commits stop anyway.
	storm := window{from: time.Now().Add(settleFor / 2)}
	var joiners []*running
	for i := range cycles {
		time.Sleep(settleFor)
		j := start(t, pl.opts(fmt.Sprintf("j%d", i), handler)...)
		joiners = append(joiners, j)
		time.Sleep(joinFor)
		require.NoError(t, j.stop(t))
	}
	<-feedDone
	storm.to = time.Now()
	rep := pl.waitDone(t, 2*time.Minute)
	took := time.Since(began)
	stopSampling()
	<-sampled
	require.NoError(t, a.stop(t))
	require.NoError(t, b.stop(t))
	rep = pl.read(t)
	require.True(t, rep.ExactlyOnce(), rep.String())
	require.Equal(t, inputs, rep.Outputs)

	var rebalances, aborts int64
	for _, r := range append([]*running{a, b}, joiners...) {
		s := r.p.Stats()
		rebalances += s.Rebalances
		aborts += s.Aborts
	}
	near, steady := smp.unmovedGaps(storm, time.Second)
	again := calls.Load() - int64(inputs)
	t.Logf("protocol %s, %d joins and leaves: %d inputs in %v (%.0f rec/s, fed at %d); handled again %d (%.0f per join or leave); aborts %d; rebalances seen %d (all instances)",
		kafkatest.GroupProtocol(), cycles, inputs, took.Round(time.Millisecond), float64(inputs)/took.Seconds(), rate,
		again, float64(again)/float64(2*cycles), aborts, rebalances)
	t.Logf("longest time without a commit of a partition whose owner stayed: within 1s of an owner change %v, otherwise %v; owner changes seen %d",
		near.Round(time.Millisecond), steady.Round(time.Millisecond), len(smp.moves))
	for name, ct := range map[string]*commitTimes{"a": commitsA, "b": commitsB} {
		near, steady := ct.gaps(smp, storm, time.Second)
		t.Logf("instance %s, from its commit spans: longest time between two commits of a partition it kept: within 1s of an owner change %v (%v after the start), otherwise %v (%v after the start)",
			name, near.d.Round(time.Millisecond), near.from.Sub(began).Round(time.Millisecond),
			steady.d.Round(time.Millisecond), steady.from.Sub(began).Round(time.Millisecond))
	}
	for name, r := range map[string]*running{"a": a, "b": b} {
		s := r.p.Stats()
		// The round trip's tail bounds the gaps from below whatever the
		// rebalances do: a partition waits out the slowest commit too.
		t.Logf("instance %s: %d commits, one per %v; commit round trip mean %v, median %v, p99 %v, max %v",
			name, s.Commits, (took / time.Duration(max(s.Commits, 1))).Round(time.Millisecond),
			(s.CommitTime / time.Duration(max(s.Commits, 1))).Round(time.Millisecond),
			s.CommitTimeMedian.Round(time.Millisecond), s.CommitTimeP99.Round(time.Millisecond), s.CommitTimeMax.Round(time.Millisecond))
	}
}

// stormSampler follows each input partition's committed offset and owner.
type stormSampler struct {
	pl  *pipeline
	adm *kadm.Client

	mu    sync.Mutex
	parts map[int32]*sampledPartition
	moves []move // owner changes seen
	gaps  []gap  // between commits of a partition whose owner stayed
}

type sampledPartition struct {
	offset     int64
	owner      string
	lastCommit time.Time
	moved      bool // the owner changed since lastCommit
}

type gap struct{ from, to time.Time }

// move is an owner change of a partition, when the sampler saw it.
type move struct {
	at        time.Time
	partition int32
}

func newStormSampler(pl *pipeline) *stormSampler {
	return &stormSampler{pl: pl, adm: pl.c.Admin, parts: make(map[int32]*sampledPartition)}
}

func (s *stormSampler) run(ctx context.Context) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		owners := s.owners(ctx)
		offs, err := s.adm.FetchOffsets(ctx, s.pl.group)
		if err != nil || owners == nil {
			continue
		}
		now := time.Now()
		s.mu.Lock()
		offs.Each(func(o kadm.OffsetResponse) {
			if o.Topic != s.pl.in || o.Err != nil {
				return
			}
			sp := s.parts[o.Partition]
			if sp == nil {
				sp = &sampledPartition{offset: -1}
				s.parts[o.Partition] = sp
			}
			// No owner (a classic group mid-rebalance reports no
			// assignments): the last known one holds.
			if owner, ok := owners[o.Partition]; ok && owner != sp.owner {
				if sp.owner != "" {
					s.moves = append(s.moves, move{now, o.Partition})
				}
				sp.owner, sp.moved = owner, true
			}
			if o.At > sp.offset {
				if !sp.lastCommit.IsZero() && !sp.moved {
					s.gaps = append(s.gaps, gap{sp.lastCommit, now})
				}
				sp.offset, sp.lastCommit, sp.moved = o.At, now, false
			}
		})
		s.mu.Unlock()
	}
}

// owners maps each input partition to the instance ID holding it (nil if
// the group could not be described).
func (s *stormSampler) owners(ctx context.Context) map[int32]string {
	_, members, err := s.pl.c.DescribeGroup(ctx, s.pl.group)
	if err != nil {
		return nil
	}
	out := make(map[int32]string)
	for _, m := range members {
		if m.InstanceID == "" {
			continue
		}
		for _, p := range m.Assigned[s.pl.in] {
			out[p] = m.InstanceID
		}
	}
	return out
}

// nearMove reports whether an owner change was seen within margin of the
// span [from, to].
func (s *stormSampler) nearMove(from, to time.Time, margin time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nearMoveLocked(from, to, margin)
}

func (s *stormSampler) nearMoveLocked(from, to time.Time, margin time.Duration) bool {
	return slices.ContainsFunc(s.moves, func(m move) bool {
		return m.at.After(from.Add(-margin)) && m.at.Before(to.Add(margin))
	})
}

// movedBetween reports whether partition p was seen to change owner
// between from and to.
func (s *stormSampler) movedBetween(p int32, from, to time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.ContainsFunc(s.moves, func(m move) bool {
		return m.partition == p && m.at.After(from) && m.at.Before(to)
	})
}

// commitTimes records when an instance's transactions committed and which
// input partitions each committed, from its "onceflow.commit" spans (no
// other span is sampled).
type commitTimes struct {
	tp      *sdktrace.TracerProvider
	mu      sync.Mutex
	commits []spanCommit
}

type spanCommit struct {
	at    time.Time
	parts []int32
}

func newCommitTimes(t *testing.T) *commitTimes {
	c := &commitTimes{}
	c.tp = sdktrace.NewTracerProvider(sdktrace.WithSampler(commitSpansOnly{}), sdktrace.WithSpanProcessor(c))
	t.Cleanup(func() { _ = c.tp.Shutdown(context.Background()) })
	return c
}

func (c *commitTimes) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (c *commitTimes) Shutdown(context.Context) error                  { return nil }
func (c *commitTimes) ForceFlush(context.Context) error                { return nil }

func (c *commitTimes) OnEnd(s sdktrace.ReadOnlySpan) {
	for _, a := range s.Attributes() {
		if a.Key != "onceflow.committed_partitions" {
			continue
		}
		sc := spanCommit{at: s.EndTime()}
		for _, tp := range a.Value.AsStringSlice() {
			p, err := strconv.Atoi(tp[strings.LastIndexByte(tp, '/')+1:])
			if err == nil {
				sc.parts = append(sc.parts, int32(p))
			}
		}
		c.mu.Lock()
		c.commits = append(c.commits, sc)
		c.mu.Unlock()
	}
}

// gaps returns the longest time between two commits of one partition
// that the sampler did not see change owner in between, within margin of
// an owner change anywhere in the group, and the longest other.
func (c *commitTimes) gaps(smp *stormSampler, w window, margin time.Duration) (near, steady timedGap) {
	c.mu.Lock()
	defer c.mu.Unlock()
	last := make(map[int32]time.Time)
	for _, sc := range c.commits {
		for _, p := range sc.parts {
			from, ok := last[p]
			last[p] = sc.at
			if !ok || !w.holds(from, sc.at) || smp.movedBetween(p, from, sc.at) {
				continue
			}
			g, longest := timedGap{from, sc.at.Sub(from)}, &steady
			if smp.nearMove(from, sc.at, margin) {
				longest = &near
			}
			if g.d > longest.d {
				*longest = g
			}
		}
	}
	return near, steady
}

// window is the part of the run whose gaps count.
type window struct{ from, to time.Time }

func (w window) holds(from, to time.Time) bool { return !from.Before(w.from) && !to.After(w.to) }

// timedGap is a time without a commit and when it began.
type timedGap struct {
	from time.Time
	d    time.Duration
}

type commitSpansOnly struct{}

func (commitSpansOnly) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	if p.Name == "onceflow.commit" {
		return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample}
	}
	return sdktrace.SamplingResult{Decision: sdktrace.Drop}
}

func (commitSpansOnly) Description() string { return "onceflow.commit spans only" }

// unmovedGaps returns the longest gap that began or ended within margin of
// an owner change (or spans one), and the longest other gap.
func (s *stormSampler) unmovedGaps(w window, margin time.Duration) (near, steady time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.gaps {
		if !w.holds(g.from, g.to) {
			continue
		}
		d := g.to.Sub(g.from)
		if s.nearMoveLocked(g.from, g.to, margin) {
			near = max(near, d)
		} else {
			steady = max(steady, d)
		}
	}
	return near, steady
}
