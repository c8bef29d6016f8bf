package processor

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/offsetmeta"
)

// TestPartitionRunsModel checks that the running metadata bound never
// falls below the exact size, and that the size check agrees with the
// exact size, over random fetches, completions and skips.
func TestPartitionRunsModel(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		p := newPartition("t", 0, 1, 0, nil)
		offset := int64(0)
		for step := range 400 {
			switch op := r.IntN(10); {
			case op < 4 || len(p.pending) == 0:
				offset += 1 + int64(r.IntN(3)) // gaps: markers, compaction
				it := &item{rec: &kgo.Record{Offset: offset}, part: p}
				if len(p.pending) > 0 && r.IntN(5) == 0 {
					p.appendDone(it)
					it.done = true
				} else {
					p.pending = append(p.pending, it)
				}
			default:
				var undone []*item
				for _, it := range p.pending {
					if !it.done {
						undone = append(undone, it)
					}
				}
				it := undone[r.IntN(len(undone))]
				head := p.pending[0] == it
				p.markDone(it)
				if !head && r.IntN(4) == 0 {
					p.unmarkDone(it)
				}
			}
			if len(p.pending) == 0 {
				continue
			}
			base, ranges := p.commitPoint()
			require.GreaterOrEqual(t, p.metaBound, offsetmeta.BinaryLen(base, ranges), "round %d step %d: the bound must hold", round, step)
			for _, max := range []int{16, 64, 256, 4096} {
				exact := offsetmeta.EncodedLen(base, ranges) <= max
				require.Equal(t, exact, p.metadataFits(max), "round %d step %d max %d", round, step, max)
			}
		}
	}
}

// TestCommitPointKeepsUnfetchedSkips: the ranges an earlier transaction
// finished stay in the commit point until they are fetched again. A
// commit right after a rewind (nothing fetched yet), or after a fetch that
// stopped short of them, dropped them: the next owner did those records
// again (TestDedupeAbortLeavesNoMarks counted the duplicates of an aborted
// transaction's rewind twice).
func TestCommitPointKeepsUnfetchedSkips(t *testing.T) {
	done := []offsetmeta.Range{{Start: 12, End: 15}, {Start: 20, End: 22}}
	p := newPartition("t", 0, 1, 10, done)
	base, ranges := p.commitPoint()
	require.Equal(t, int64(10), base)
	require.Equal(t, done, ranges, "nothing fetched yet: the committed point stands")

	recs := []*kgo.Record{{Offset: 10}, {Offset: 11}, {Offset: 12}, {Offset: 13}}
	consumed, skipped := p.track(recs, time.Now(), 0)
	require.Equal(t, int64(4), consumed)
	require.Equal(t, int64(2), skipped)
	base, ranges = p.commitPoint()
	require.Equal(t, int64(10), base)
	require.Equal(t, []offsetmeta.Range{{Start: 12, End: 15}, {Start: 20, End: 22}}, ranges,
		"fetched up to 13: 12-13 are pending and done, 14 and 20-21 still to fetch")

	p.markDone(p.pending[0])
	p.markDone(p.pending[0])
	base, ranges = p.commitPoint()
	require.Equal(t, int64(14), base, "10 and 11 finished, then 12 and 13 finished earlier: the next to fetch")
	require.Equal(t, []offsetmeta.Range{{Start: 14, End: 15}, {Start: 20, End: 22}}, ranges)
	require.True(t, p.metadataFits(64))
}
