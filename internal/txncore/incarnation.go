package txncore

import (
	"bytes"
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Incarnations tell two live processes with one instance ID apart. Static
// membership lets the latest joiner hold an instance ID, so when a newer
// process is expelled and the zombie it replaced wakes and rejoins, the
// group alone cannot say which of the two is the newer one
// (docs/reliability.md finding 8). Each process therefore appends its
// start time to the member metadata of its JoinGroup requests, which the
// group reports per member (DescribeGroups). Not the client ID: Kafka
// (4.2.0) keeps the first joiner's client ID when a static member is
// replaced, while it stores each join's protocol metadata.
//
// The order is only as good as the hosts' clocks: a newer process whose
// clock is behind the zombie's by more than the gap between their starts
// looks older, in any replacement (a zombie waking after an ordinary
// replacement would then rejoin and the newer process stop, the outcome
// of finding 6). Exactly-once is not at stake (each rejoin bumps the
// transactional epoch), only which of the two goes on.

// incarnationMagic ends the metadata trailer: incarnation (8 bytes, big
// endian, Unix nanoseconds), then this. Consumer protocol metadata
// (ConsumerMemberMetadata v0-v3, not flexible) is read field by field:
// franz-go ignores trailing bytes, and Kafka 4.2.0 and kfake accept them
// (TestExpelledNewerOutlivesReturningZombie). Java members would read the
// same schema; a mixed group was not tried.
var incarnationMagic = []byte("\x00onceflow.incarnation.v1")

// incarnationTrailer is what JoinGroup metadata gets appended.
func incarnationTrailer(incarnation int64) []byte {
	return append(binary.BigEndian.AppendUint64(nil, uint64(incarnation)), incarnationMagic...)
}

// parseIncarnation returns the incarnation at the end of a member's
// JoinGroup metadata, or 0 (unknown: no trailer, e.g. the user chose the
// balancers).
func parseIncarnation(meta []byte) int64 {
	rest, ok := bytes.CutSuffix(meta, incarnationMagic)
	if !ok || len(rest) < 8 {
		return 0
	}
	n := int64(binary.BigEndian.Uint64(rest[len(rest)-8:]))
	return max(n, 0)
}

// incarnationBalancer appends the trailer to its balancer's metadata;
// everything else, the protocol name included, is the balancer's.
type incarnationBalancer struct {
	kgo.GroupBalancer
	trailer []byte
}

func (b incarnationBalancer) JoinGroupMetadata(interests []string, current map[string][]int32, generation int32) []byte {
	return append(b.GroupBalancer.JoinGroupMetadata(interests, current, generation), b.trailer...)
}

// holderByIncarnation judges, by its incarnation, a member holding our
// instance ID under a member ID we do not know: holderOlder, a process
// that started before ours and came back after we were expelled (rejoin:
// static membership then replaces it, and it finds itself fenced);
// holderOurs, one of this process's own earlier members, since every
// Session of a process carries the same incarnation; otherwise
// holderNewer (we were replaced: stop). Unknown incarnations, ours or the
// holder's, count as newer, as before incarnations existed: stopping is
// the safe side, rejoining against a newer process would fence it.
//
// An earlier member of ours outlives the Session that joined under it: a
// group coordinator that cannot write the group (its
// __consumer_offsets partition below min.insync.replicas) reverts a
// static member's replacement when the write fails, so the group names
// the member of the client this process closed while its new client is
// refused with FENCED_INSTANCE_ID. Taken for newer, a worker stopped
// during a lost quorum with nobody else under its instance ID
// (TestClusterQuorumLost in CI, 2026-12-07).
func holderByIncarnation(ours int64, holderMeta []byte) holder {
	theirs := parseIncarnation(holderMeta)
	switch {
	case ours <= 0 || theirs <= 0 || theirs > ours:
		return holderNewer
	case theirs == ours:
		return holderOurs
	default:
		return holderOlder
	}
}
