package txn

import (
	"strconv"
	"strings"
)

// Incarnations tell two live processes with one instance ID apart. Static
// membership lets the latest joiner hold an instance ID, so when a newer
// process is expelled and the zombie it replaced wakes and rejoins, the
// group alone cannot say which of the two is the newer one
// (docs/reliability.md finding 8). Each process therefore puts its start
// time in its client ID, which the group reports per member
// (DescribeGroups).
//
// Clock skew between hosts matters only in that race (an older process
// that came back while the newer one was expelled): a newer process whose
// clock is behind the zombie's by more than their start-time gap would
// take itself for the older one, stop judging itself fenced and rejoin,
// and the zombie would judge itself the newer one; each rejoin fences the
// other until a session lapses. Exactly-once is not at stake (each
// rejoin bumps the transactional epoch), only which of the two goes on.

// clientIDPrefix starts the client IDs that carry an incarnation.
const clientIDPrefix = "onceflow/"

// ClientID is the client ID of a session of instanceID started at
// incarnation: "onceflow/<instanceID>/<incarnation>", the incarnation in
// decimal nanoseconds since the Unix epoch. Instance IDs may contain '/':
// the incarnation is after the last one.
func ClientID(instanceID string, incarnation int64) string {
	return clientIDPrefix + instanceID + "/" + strconv.FormatInt(incarnation, 10)
}

// parseIncarnation returns the incarnation in clientID if it is a ClientID
// of instanceID, else 0 (unknown: a client ID set by the user, or another
// client).
func parseIncarnation(clientID, instanceID string) int64 {
	rest, ok := strings.CutPrefix(clientID, clientIDPrefix)
	if !ok {
		return 0
	}
	i := strings.LastIndexByte(rest, '/')
	if i < 0 || rest[:i] != instanceID {
		return 0
	}
	n, err := strconv.ParseInt(rest[i+1:], 10, 64)
	if err != nil || n <= 0 {
		return 0
	}
	return n
}

// holderIsNewer decides, for a member holding our instance ID under
// another member ID, whether it is a newer process (we were replaced:
// stop) or an older one that came back after we were expelled (rejoin:
// static membership then replaces it, and it finds itself fenced). Unknown
// incarnations, ours or the holder's, and equal ones count as newer, as
// before incarnations existed: stopping is the safe side, rejoining
// against a newer process would fence it.
func holderIsNewer(ours int64, instanceID, holderClientID string) bool {
	theirs := parseIncarnation(holderClientID, instanceID)
	return ours <= 0 || theirs <= 0 || theirs >= ours
}
