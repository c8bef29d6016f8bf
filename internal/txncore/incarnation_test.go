package txncore

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestHolderByIncarnation(t *testing.T) {
	meta := func(inc int64) []byte { return append([]byte("consumer metadata"), incarnationTrailer(inc)...) }
	for _, tc := range []struct {
		name   string
		ours   int64
		holder []byte
		want   holder
	}{
		{"holder started later", 100, meta(200), holderNewer},
		{"holder started earlier: a zombie that came back", 200, meta(100), holderOlder},
		{"same incarnation: an earlier member of this process", 100, meta(100), holderOurs},
		{"our incarnation unknown", 0, meta(100), holderNewer},
		{"both unknown", 0, meta(0), holderNewer},
		{"no trailer (user balancers)", 200, []byte("consumer metadata"), holderNewer},
		{"no metadata", 200, nil, holderNewer},
		{"trailer without incarnation", 200, incarnationMagic, holderNewer},
		{"negative incarnation", 200, meta(-5), holderNewer},
		{"zero incarnation", 200, meta(0), holderNewer},
	} {
		if got := holderByIncarnation(tc.ours, tc.holder); got != tc.want {
			t.Errorf("%s: holderByIncarnation(%d, %q) = %v, want %v", tc.name, tc.ours, tc.holder, got, tc.want)
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
