package dedupe

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// model is the specification: the latest mark time of each ID. The store
// must report an ID as seen if its latest mark is younger than TTL, and as
// unseen if it is at least TTL+BucketWidth old; in between either answer is
// allowed.
type model struct {
	ttl, width time.Duration
	last       map[string]time.Time
}

type verdict int

const (
	mustSee verdict = iota
	mayEither
	mustNotSee
)

func (m *model) verdict(id string, now time.Time) verdict {
	at, ok := m.last[id]
	switch age := now.Sub(at); {
	case !ok || age >= m.ttl+m.width:
		return mustNotSee
	case age < m.ttl:
		return mustSee
	default:
		return mayEither
	}
}

func (m *model) mark(id string, at time.Time) {
	if prev, ok := m.last[id]; !ok || at.After(prev) {
		m.last[id] = at
	}
}

// TestStoreMatchesModel runs random operation sequences against the store
// and the model, including clock jumps, expiry and reopening.
func TestStoreMatchesModel(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runModel(t, seed, 1500) })
	}
}

// TestStoreMatchesModelSmallStage repeats the model test with tiny stage
// generations and filters, so indexing rounds and filter rebuilds run in
// the background throughout, and once without the filter.
func TestStoreMatchesModelSmallStage(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			runModelWith(t, seed, 1500, func(o *Options) {
				o.stageLimit, o.filterMinIDs = 1+int(seed), 4
				o.DisableFilter = seed == 7
			})
		})
	}
}

func runModel(t *testing.T, seed uint64, steps int) { runModelWith(t, seed, steps, nil) }

func runModelWith(t *testing.T, seed uint64, steps int, tweak func(*Options)) {
	rng := rand.New(rand.NewPCG(seed, 99))
	fs, clock := vfs.NewMem(), newFakeClock()
	o := testOptions(fs, clock)
	o.DisableAutoExpiry = seed%2 == 0 // half the runs expire in the background too
	if tweak != nil {
		tweak(o)
	}
	s := mustOpen(t, "db", o)
	defer func() { _ = s.Close() }()
	m := &model{ttl: o.TTL, width: o.BucketWidth, last: map[string]time.Time{}}
	id := func() string { return fmt.Sprintf("id-%d", rng.IntN(150)) }
	ids := func() ([]string, [][]byte) {
		var str []string
		var raw [][]byte
		for range 1 + rng.IntN(20) {
			str = append(str, id())
			raw = append(raw, []byte(str[len(str)-1]))
		}
		return str, raw
	}
	check := func(op, id string, got bool) {
		switch m.verdict(id, clock.Now()) {
		case mustSee:
			require.True(t, got, "%s(%s): inside window but unseen", op, id)
		case mustNotSee:
			require.False(t, got, "%s(%s): seen but never marked or long expired", op, id)
		}
	}
	for step := range steps {
		now := clock.Now()
		switch op := rng.IntN(100); {
		case op < 20:
			str, raw := ids()
			require.NoError(t, s.Mark(raw...))
			for _, id := range str {
				m.mark(id, now)
			}
		case op < 40:
			id := id()
			first, err := s.Claim([]byte(id))
			require.NoError(t, err)
			check("Claim", id, !first)
			if first {
				m.mark(id, now)
			}
		case op < 50:
			str, raw := ids()
			first, err := s.ClaimBatch(raw)
			require.NoError(t, err)
			claimed := map[string]bool{}
			for i, id := range str {
				if claimed[id] {
					require.False(t, first[i], "duplicate in batch claimed twice")
					continue
				}
				check("ClaimBatch", id, !first[i])
				if first[i] {
					claimed[id] = true
					m.mark(id, now)
				}
			}
		case op < 70:
			id := id()
			seen, err := s.Seen([]byte(id))
			require.NoError(t, err)
			check("Seen", id, seen)
		case op < 75:
			str, raw := ids()
			got, err := s.SeenBatch(raw)
			require.NoError(t, err)
			for i, id := range str {
				check("SeenBatch", id, got[i])
			}
		case op < 80:
			str, raw := ids()
			at := now.Add(-time.Duration(rng.Int64N(int64(o.TTL + 2*o.BucketWidth))))
			require.NoError(t, s.ApplyMarks(raw, at))
			for _, id := range str {
				m.mark(id, at)
			}
		case op < 83:
			id := id()
			require.NoError(t, s.Forget([]byte(id)))
			delete(m.last, id)
		case op < 93:
			clock.Advance(time.Duration(rng.Int64N(int64(3 * time.Hour))))
		case op < 98:
			_, err := s.ExpireNow(context.Background())
			require.NoError(t, err)
			// Physically gone once past TTL+width.
			for id := range m.last {
				if m.verdict(id, clock.Now()) == mustNotSee {
					require.False(t, hasIndex(t, s, []byte(id)), "step %d: %s not expired", step, id)
				}
			}
		default:
			require.NoError(t, s.Close())
			s = mustOpen(t, "db", o)
		}
	}
}
