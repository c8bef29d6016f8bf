package txncore

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestHolderIsNewer(t *testing.T) {
	meta := func(inc int64) []byte { return append([]byte("consumer metadata"), incarnationTrailer(inc)...) }
	for _, tc := range []struct {
		name   string
		ours   int64
		holder []byte
		want   bool
	}{
		{"holder started later", 100, meta(200), true},
		{"holder started earlier: a zombie that came back", 200, meta(100), false},
		{"same incarnation", 100, meta(100), true},
		{"our incarnation unknown", 0, meta(100), true},
		{"no trailer (user balancers)", 200, []byte("consumer metadata"), true},
		{"no metadata", 200, nil, true},
		{"trailer without incarnation", 200, incarnationMagic, true},
		{"negative incarnation", 200, meta(-5), true},
		{"zero incarnation", 200, meta(0), true},
	} {
		if got := holderIsNewer(tc.ours, tc.holder); got != tc.want {
			t.Errorf("%s: holderIsNewer(%d, %q) = %v, want %v", tc.name, tc.ours, tc.holder, got, tc.want)
		}
	}
}

// TestIncarnationBalancerMetadata: the trailer survives in the metadata and
// does not disturb parsing it as consumer metadata (what the group leader
// and kadm do).
func TestIncarnationBalancerMetadata(t *testing.T) {
	const inc = 1796001294251362325
	b := incarnationBalancer{kgo.CooperativeStickyBalancer(), incarnationTrailer(inc)}
	raw := b.JoinGroupMetadata([]string{"in"}, map[string][]int32{"in": {1, 0}}, 7)
	if got := parseIncarnation(raw); got != inc {
		t.Fatalf("parsed incarnation %d, want %d", got, inc)
	}
	var m kmsg.ConsumerMemberMetadata
	if err := m.ReadFrom(raw); err != nil {
		t.Fatal(err)
	}
	if len(m.Topics) != 1 || m.Topics[0] != "in" || m.Generation != 7 || len(m.OwnedPartitions) != 1 {
		t.Fatalf("consumer metadata with trailer parsed as %+v", m)
	}
	if b.ProtocolName() != kgo.CooperativeStickyBalancer().ProtocolName() {
		t.Fatalf("protocol name %q", b.ProtocolName())
	}
}
