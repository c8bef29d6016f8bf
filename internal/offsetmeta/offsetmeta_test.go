package offsetmeta

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func randomRanges(r *rand.Rand, base int64, n int) []Range {
	var out []Range
	at := base
	for range n {
		start := at + 1 + r.Int64N(300)
		end := start + 1 + r.Int64N(300)
		out = append(out, Range{start, end})
		at = end
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		base := r.Int64N(1 << 40)
		in := randomRanges(r, base, i%50)
		meta := Encode(base, in)
		require.Equal(t, len(meta), EncodedLen(base, in))
		out, err := Decode(base, meta)
		require.NoError(t, err)
		if len(in) == 0 {
			require.Empty(t, out)
			continue
		}
		require.Equal(t, in, out)
	}
}

// TestBound shows how many alternating done/pending records fit in the
// broker's default offset.metadata.max.bytes (4096).
func TestBound(t *testing.T) {
	var done []Range
	for i := int64(1); ; i += 2 {
		next := append(done, Range{i, i + 1})
		if EncodedLen(0, next) > 4096 {
			break
		}
		done = next
	}
	require.GreaterOrEqual(t, len(done), 1500, "worst-case alternation must still hold many records")
	require.LessOrEqual(t, len(Encode(0, done)), 4096)
}

func TestDecodeErrors(t *testing.T) {
	_, err := Decode(0, "consumer-1-abc")
	require.ErrorIs(t, err, ErrForeign)
	for _, bad := range []string{Prefix, Prefix + "!!", Prefix + "Ag", Prefix + "AQ", Prefix + "AQAA"} {
		_, err := Decode(0, bad)
		require.True(t, errors.Is(err, ErrCorrupt), "%q: %v", bad, err)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(int64(0), Encode(0, []Range{{1, 2}, {5, 9}}))
	f.Add(int64(100), Encode(100, []Range{{100, 200}}))
	f.Add(int64(7), "member-abc")
	f.Add(int64(0), Prefix+"AQ")
	f.Fuzz(func(t *testing.T, base int64, meta string) {
		if base < 0 {
			base = -base / 2
		}
		rs, err := Decode(base, meta)
		if err != nil {
			return
		}
		// Whatever decodes must be sorted, non-empty ranges at or above
		// base, and must encode back to an equivalent form.
		at := base
		for _, r := range rs {
			require.GreaterOrEqual(t, r.Start, at)
			require.Greater(t, r.End, r.Start)
			at = r.End
		}
		again, err := Decode(base, Encode(base, rs))
		require.NoError(t, err)
		require.Equal(t, rs, again)
	})
}

func BenchmarkEncodeLarge(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	done := randomRanges(r, 0, 1000)
	b.ReportAllocs()
	for b.Loop() {
		_ = Encode(0, done)
	}
}
