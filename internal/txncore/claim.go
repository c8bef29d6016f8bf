package txncore

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Claims order processes with one instance ID under the consumer
// protocol (KIP-848), where the group cannot: it gives a free instance ID
// to whichever waiting member asks first, so an older process that waited
// for the ID (stopped for a while, say) could win it from a newer one, and
// the newer one would stop (two 20-minute soaks each saw this once). Each
// Session therefore initializes its producer (InitProducerID) when it
// starts, before it holds the instance ID: the transaction coordinator
// bumps the transactional ID's epoch for every such claim, so the Session
// that claimed last is the one whose producer ID and epoch the coordinator
// still reports (its own transactions bump the epoch too, but its client
// follows them). A Session that finds its claim superseded while it holds
// the ID yields it (Instance.Recheck asks when the member joins
// or rejoins, and while it is idle); one that waits for the ID keeps waiting
// while its claim is the newest, however often the holder changes
// (Instance.Replaced). A rebuild claims anew: to the coordinator it is a newer
// process, which is why Instance.YieldToSuccessor gives a waiting process the ID
// before a rebuild. The order is the coordinator's, not the hosts'
// clocks (incarnation.go orders classic groups by those).

// claimState is what the coordinator says of this Session's claim.
type claimState int

const (
	claimUnknown    claimState = iota // no claim, or the coordinator could not be asked
	claimNewest                       // nobody initialized the transactional ID since
	claimSuperseded                   // a later Session, of this process or another, did
)

// Claim initializes every producer of the ring now rather than at its
// first transaction, and fences the ring IDs above the ring's size (see
// fenceAbove). Call it when the Session starts; under the consumer
// protocol the member joins the group only after it (see join), and the
// initialization of the instance's own transactional ID (ring producer 0)
// is the claim that orders processes with one instance ID. Predecessors'
// open transactions are aborted, as by any producer initialization. An
// error leaves producers to initialize at their first transaction, the
// Session unordered (claimUnknown) and its member to join at the first
// Poll (Instance.Claim retries instead).
func (s *Session) Claim(ctx context.Context) error {
	if err := s.initRing(ctx); err != nil {
		return fmt.Errorf("txn: initializing the transactional producers: %w", err)
	}
	s.claimed = s.cfg.GroupProtocol == GroupProtocolConsumer
	s.join()
	return nil
}

// standing asks the transaction coordinator whether this Session's claim
// is still the newest: whether the coordinator's producer ID and epoch
// for the transactional ID are still the client's. The client follows
// its own epoch bumps (with transactions v2 every transaction's end bumps
// it), so only another initialization, or the coordinator aborting a
// transaction that outlived its timeout, moves the coordinator's away.
// Ask between transactions, not while one ends. A client whose producer
// was fenced has been superseded.
func (s *Session) standing(ctx context.Context) claimState {
	if !s.claimed {
		return claimUnknown
	}
	id, epoch, err := s.ring[0].cl.ProducerID(ctx)
	if err != nil {
		if isFencing(err) {
			return claimSuperseded
		}
		return claimUnknown
	}
	txnID := ID(s.cfg.Group, s.cfg.InstanceID)
	described, err := kadm.NewClient(s.cl).DescribeTransactions(ctx, txnID)
	if err != nil {
		return claimUnknown
	}
	d, ok := described[txnID]
	if !ok || d.Err != nil {
		return claimUnknown
	}
	if d.ProducerID == id && d.ProducerEpoch == epoch {
		return claimNewest
	}
	return claimSuperseded
}

// errSuperseded is checkClaim's reason to yield.
var errSuperseded = errors.New("a newer process initialized the transactional ID after this one claimed it: yielding the instance ID")

// checkClaim is for a Session whose group member holds the instance ID,
// between transactions (Instance.Recheck): a ClassReset *Error if another
// Session claimed the transactional ID after this one (a newer process
// that waits for the ID, refused while this one holds it). The caller
// closes the Session and yields (Instance.YieldToSuccessor): the newer
// process takes the ID, or, if none comes, the rebuild claims anew. nil
// under classic, without a claim, or if the coordinator cannot be asked.
func (s *Session) checkClaim(ctx context.Context) *Error {
	if s.standing(ctx) == claimSuperseded {
		return &Error{ClassReset, "claim", errSuperseded}
	}
	return nil
}
