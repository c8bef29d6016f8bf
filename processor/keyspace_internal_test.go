package processor

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// recKeyspace is a keyspace that records when the loop calls it and
// writes one changelog record per finished record, as session state does.
type recKeyspace struct {
	calls    []string
	produced []int64 // offsets of records produced, in order
	applied  []int64 // offsets applied after their transaction committed
}

type recPart struct {
	ks  *recKeyspace
	txn []int64 // offsets in the open transaction
}

func (k *recKeyspace) part(p *partition) keyspacePart {
	k.calls = append(k.calls, "part")
	return &recPart{ks: k}
}

func (k *recKeyspace) clientOpts() []kgo.Opt { return nil }

func (k *recKeyspace) planned(*transaction, map[tp]*partition, map[tp]commitPlan) {
	k.calls = append(k.calls, "planned")
}

func (k *recKeyspace) apply(_ *transaction, parts map[tp]*partition) error {
	k.calls = append(k.calls, "apply")
	for _, p := range parts {
		rp := partOf[*recPart](p)
		k.applied = append(k.applied, rp.txn...)
		rp.txn = rp.txn[:0]
	}
	return nil
}

func (rp *recPart) restore() (restoreSpec, bool) { return restoreSpec{}, false }

func (rp *recPart) screen(its []*item) error {
	rp.ks.calls = append(rp.ks.calls, fmt.Sprintf("screen %d", len(its)))
	return nil
}

func (rp *recPart) produce(t *transaction, it *item, stuck bool) {
	t.produceChangelog("g-in-rec", it.rec.Partition, it.rec.Key, it.rec.Value)
	rp.txn = append(rp.txn, it.rec.Offset)
	rp.ks.produced = append(rp.ks.produced, it.rec.Offset)
}

func (rp *recPart) rewound() keyspacePart {
	rp.ks.calls = append(rp.ks.calls, "rewound")
	return &recPart{ks: rp.ks}
}

// TestKeyspaceFollowsTheTransaction: a partition's keyspace parts screen
// its records before dispatch and produce what finished records
// contribute; only a committed transaction's writes are applied, and an
// abort replaces the parts by their rewound ones, the aborted writes gone.
func TestKeyspaceFollowsTheTransaction(t *testing.T) {
	h := newLoopHarness(t, copyToOutput)
	ks := &recKeyspace{}
	h.l.ps.keyspaces = []keyspace{ks}
	require.False(t, h.l.canOverlap(), "with a keyspace, the loop waits for a commit to end")

	h.intake(records(0, 4, 2)...)
	h.settle(h.idle)
	require.Equal(t, []string{"part", "screen 4"}, ks.calls)
	require.ElementsMatch(t, []int64{0, 1, 2, 3}, ks.produced)
	h.commit()
	require.Equal(t, []string{"part", "screen 4", "planned", "apply"}, ks.calls)
	require.ElementsMatch(t, []int64{0, 1, 2, 3}, ks.applied)

	ks.calls, ks.applied = nil, nil
	h.intake(records(4, 8, 2)...)
	h.settle(h.idle)
	first := h.part().keyspaces[0]
	h.c.abortNext = true
	h.commit()
	require.Equal(t, []string{"screen 4", "planned", "rewound"}, ks.calls, "an aborted transaction is not applied")
	require.Empty(t, ks.applied)
	require.NotSame(t, first, h.part().keyspaces[0], "the rewind replaces the part")

	ks.calls = nil
	h.intake(records(4, 8, 2)...)
	h.settle(h.idle)
	h.commit()
	require.Equal(t, []string{"screen 4", "planned", "apply"}, ks.calls)
	require.ElementsMatch(t, []int64{4, 5, 6, 7}, ks.applied, "the redone records' writes, once")
}
