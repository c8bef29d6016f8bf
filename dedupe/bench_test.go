package dedupe

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Benchmarks run on a real temporary directory with Sync=false, so they
// measure pebble and this package, not fsync latency.

// idGen produces distinct 16-byte IDs (the size of a binary UUID).
type idGen struct{ r *rand.Rand }

func newIDGen(seed uint64) idGen { return idGen{rand.New(rand.NewPCG(seed, 0x5eed))} }

func (g idGen) next(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint64(dst[:0], g.r.Uint64())
	return binary.BigEndian.AppendUint64(dst, g.r.Uint64())
}

func benchStore(b *testing.B, clock Clock) *Store {
	b.Helper()
	s, err := Open(b.TempDir(), &Options{Clock: clock, Logger: discard()})
	require.NoError(b, err)
	b.Cleanup(func() { _ = s.Close() })
	return s
}

func reportIDs(b *testing.B, n int) {
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "ids/s")
}

func BenchmarkClaim(b *testing.B) {
	b.Run("unbatched", func(b *testing.B) {
		s := benchStore(b, nil)
		g := newIDGen(1)
		var id []byte
		b.ResetTimer()
		for range b.N {
			id = g.next(id)
			if first, err := s.Claim(id); err != nil || !first {
				b.Fatal(first, err)
			}
		}
		reportIDs(b, b.N)
	})
	// Concurrent unbatched Claims share pebble's commit pipeline.
	b.Run("unbatched-parallel", func(b *testing.B) {
		s := benchStore(b, nil)
		var seed atomic.Uint64
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			g := newIDGen(100 + seed.Add(1))
			var id []byte
			for pb.Next() {
				id = g.next(id)
				if first, err := s.Claim(id); err != nil || !first {
					b.Fatal(first, err)
				}
			}
		})
		reportIDs(b, b.N)
	})
	// More goroutines than cores, as a processor with many partitions
	// has: their Claims are committed in groups.
	b.Run("unbatched-parallel8", func(b *testing.B) {
		s := benchStore(b, nil)
		var seed atomic.Uint64
		b.SetParallelism(8 / max(1, runtime.GOMAXPROCS(0)))
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			g := newIDGen(200 + seed.Add(1))
			var id []byte
			for pb.Next() {
				id = g.next(id)
				if first, err := s.Claim(id); err != nil || !first {
					b.Fatal(first, err)
				}
			}
		})
		reportIDs(b, b.N)
	})
	for _, drain := range []bool{false, true} {
		name := "batch1000"
		if drain {
			// Includes indexing what is still staged and flushing the
			// memtable, which the plain run leaves to Close.
			name += "-drained"
		}
		b.Run(name, func(b *testing.B) {
			s := benchStore(b, nil)
			g := newIDGen(2)
			ids := make([][]byte, 1000)
			b.ResetTimer()
			for range b.N {
				for i := range ids {
					ids[i] = g.next(ids[i])
				}
				if _, err := s.ClaimBatch(ids); err != nil {
					b.Fatal(err)
				}
			}
			if drain {
				require.NoError(b, s.indexRound())
				require.NoError(b, s.db.Flush())
			}
			reportIDs(b, b.N*len(ids))
		})
	}
}

// BenchmarkMark is the blind-write path (no lookup), for comparison.
func BenchmarkMark(b *testing.B) {
	b.Run("batch1000", func(b *testing.B) {
		s := benchStore(b, nil)
		g := newIDGen(3)
		ids := make([][]byte, 1000)
		b.ResetTimer()
		for range b.N {
			for i := range ids {
				ids[i] = g.next(ids[i])
			}
			if err := s.Mark(ids...); err != nil {
				b.Fatal(err)
			}
		}
		reportIDs(b, b.N*len(ids))
	})
}

const seenPrefill = 1_000_000

// prefilled returns a store holding seenPrefill IDs from idGen(seed),
// indexed and flushed so lookups go through sstables and bloom filters.
func prefilled(b *testing.B, seed uint64) *Store {
	s := benchStore(b, nil)
	g := newIDGen(seed)
	ids := make([][]byte, 1000)
	for range seenPrefill / len(ids) {
		for i := range ids {
			ids[i] = g.next(ids[i])
		}
		require.NoError(b, s.Mark(ids...))
	}
	require.NoError(b, s.indexRound())
	require.NoError(b, s.db.Flush())
	return s
}

func BenchmarkSeen(b *testing.B) {
	s := prefilled(b, 4)
	b.Run("present", func(b *testing.B) {
		g := newIDGen(4)
		var id []byte
		b.ResetTimer()
		for i := range b.N {
			if i%seenPrefill == 0 {
				g = newIDGen(4)
			}
			id = g.next(id)
			if seen, err := s.Seen(id); err != nil || !seen {
				b.Fatal(seen, err)
			}
		}
		reportIDs(b, b.N)
	})
	b.Run("absent", func(b *testing.B) {
		g := newIDGen(5)
		var id []byte
		b.ResetTimer()
		for range b.N {
			id = g.next(id)
			if seen, err := s.Seen(id); err != nil || seen {
				b.Fatal(seen, err)
			}
		}
		reportIDs(b, b.N)
	})
	b.Run("batch1000-present", func(b *testing.B) {
		ids := make([][]byte, 1000)
		g := newIDGen(4)
		b.ResetTimer()
		for n := range b.N {
			if n%(seenPrefill/len(ids)) == 0 {
				g = newIDGen(4)
			}
			for i := range ids {
				ids[i] = g.next(ids[i])
			}
			got, err := s.SeenBatch(ids)
			if err != nil || !got[0] {
				b.Fatal(err)
			}
		}
		reportIDs(b, b.N*len(ids))
	})
}

// mapTTL is the in-memory baseline: a mutex-guarded map with per-entry
// expiry. It is what "keep recent IDs in memory" tools do; it loses
// everything on restart.
type mapTTL struct {
	mu  sync.Mutex
	ttl time.Duration
	m   map[string]time.Time
}

func (c *mapTTL) claim(id []byte, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if at, ok := c.m[string(id)]; ok && now.Sub(at) < c.ttl {
		return false
	}
	c.m[string(id)] = now
	return true
}

func (c *mapTTL) seen(id []byte, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.m[string(id)]
	return ok && now.Sub(at) < c.ttl
}

func BenchmarkMapTTLBaseline(b *testing.B) {
	now := time.Now()
	b.Run("claim", func(b *testing.B) {
		c := &mapTTL{ttl: time.Hour, m: map[string]time.Time{}}
		g := newIDGen(6)
		var id []byte
		for range b.N {
			id = g.next(id)
			if !c.claim(id, now) {
				b.Fatal("dup")
			}
		}
		reportIDs(b, b.N)
	})
	b.Run("seen-present", func(b *testing.B) {
		c := &mapTTL{ttl: time.Hour, m: map[string]time.Time{}}
		g := newIDGen(6)
		var id []byte
		for range seenPrefill {
			id = g.next(id)
			c.claim(id, now)
		}
		b.ResetTimer()
		for i := range b.N {
			if i%seenPrefill == 0 {
				g = newIDGen(6)
			}
			id = g.next(id)
			if !c.seen(id, now) {
				b.Fatal("missing")
			}
		}
		reportIDs(b, b.N)
	})
}

// BenchmarkExpireDuringLookups fills one bucket with a million IDs, moves
// the clock past its window and measures Seen latency while ExpireNow
// deletes it, against the latency before expiry.
func BenchmarkExpireDuringLookups(b *testing.B) {
	for range b.N {
		clock := newFakeClock()
		s, err := Open(b.TempDir(), &Options{
			Clock: clock, Logger: discard(), DisableAutoExpiry: true,
			TTL: 10 * time.Hour, BucketWidth: time.Hour,
		})
		require.NoError(b, err)
		g := newIDGen(7)
		ids := make([][]byte, 1000)
		for range seenPrefill / len(ids) {
			for i := range ids {
				ids[i] = g.next(ids[i])
			}
			require.NoError(b, s.Mark(ids...))
		}
		clock.Advance(2 * time.Hour) // live bucket for the probed IDs
		live := make([][]byte, 10_000)
		lg := newIDGen(8)
		for i := range live {
			live[i] = lg.next(nil)
		}
		require.NoError(b, s.Mark(live...))
		require.NoError(b, s.indexRound())
		require.NoError(b, s.db.Flush())

		probe := func(stop <-chan struct{}, max int) []time.Duration {
			var lat []time.Duration
			for i := 0; ; i++ {
				select {
				case <-stop:
					return lat
				default:
				}
				if max > 0 && i >= max {
					return lat
				}
				t0 := time.Now()
				seen, err := s.Seen(live[i%len(live)])
				lat = append(lat, time.Since(t0))
				if err != nil || !seen {
					b.Fatal(seen, err)
				}
			}
		}
		before := probe(nil, 200_000)

		clock.Advance(9*time.Hour + 1) // first bucket is now past TTL+width
		b.ResetTimer()
		stop := make(chan struct{})
		var during []time.Duration
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); during = probe(stop, 0) }()
		t0 := time.Now()
		st, err := s.ExpireNow(context.Background())
		expireDur := time.Since(t0)
		close(stop)
		wg.Wait()
		b.StopTimer()
		require.NoError(b, err)
		require.Equal(b, seenPrefill, st.Deleted)

		b.ReportMetric(expireDur.Seconds(), "expire-s")
		b.ReportMetric(float64(st.Deleted)/expireDur.Seconds(), "expired-ids/s")
		b.ReportMetric(pct(before, 50), "before-p50-µs")
		b.ReportMetric(pct(before, 99), "before-p99-µs")
		b.ReportMetric(pct(during, 50), "during-p50-µs")
		b.ReportMetric(pct(during, 99), "during-p99-µs")
		b.ReportMetric(pct(during, 100), "during-max-µs")
		b.ReportMetric(float64(len(during)), "lookups-during")
		require.NoError(b, s.Close())
	}
}

func pct(d []time.Duration, p int) float64 {
	if len(d) == 0 {
		return 0
	}
	d = slices.Clone(d)
	slices.Sort(d)
	i := min(len(d)-1, len(d)*p/100)
	return float64(d[i].Nanoseconds()) / 1e3
}
