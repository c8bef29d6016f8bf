package processor

import (
	"context"
	"time"

	"github.com/onceflow/onceflow/txn"
)

// claimRecheck is how long a member that holds the instance ID but runs
// no transaction goes between checks of its claim. A busy member needs
// none: a newer process's claim fences its producer, and its next
// transaction fails. An idle one (no partitions, or no input) would
// otherwise hold the ID from a newer process that waits for it, for good.
const claimRecheck = 5 * time.Second

// claimCheck is what the loop keeps about its lifetime's claim of the
// transactional ID (txn/claim.go).
type claimCheck struct {
	s      *txn.Session
	member string    // the member ID of the last check; "" before the first join
	losses int64     // the member's losses (groupEvents.losses) at the last check
	at     time.Time // the last check, or the last loop step in a transaction
}

// claimID initializes the session's transactional producers before the
// member joins (aborting what a predecessor left open, fencing it), and,
// under the consumer protocol, arms the checks of that claim
// (recheckClaim): the group gives a free instance ID to whichever waiting
// process asks first, the transaction coordinator orders their claims.
// Neither step stops the lifetime when the brokers cannot answer: the
// producers then initialize at their first transactions, and the
// processes are left unordered.
func (l *lifetime) claimID(ctx context.Context, s *txn.Session) {
	cctx, cancel := context.WithTimeout(ctx, l.cfg.txnTimeout)
	err := s.Claim(cctx)
	cancel()
	if err != nil {
		l.cfg.logger.Warn("could not initialize the transactional producers before joining; processes with this instance ID are not ordered",
			"group", l.cfg.group, "instance", l.cfg.instanceID, "brokers", l.cfg.brokers, "err", err)
		return
	}
	if l.cfg.groupProtocol == GroupProtocolConsumer {
		l.claim = &claimCheck{s: s}
	}
}

// recheckClaim yields the instance ID (a ClassReset error) when a newer
// process claimed the transactional ID after this lifetime. It asks the
// coordinator at the first join, after each loss of the member (franz-go
// then rejoins: a process the group expelled while it was paused or cut
// off would otherwise keep the ID it took back from a newer process
// still waiting for it), and every claimRecheck while no transaction is
// open.
func (l *lifetime) recheckClaim(ctx context.Context) error {
	c := l.claim
	if c == nil {
		return nil
	}
	every := claimRecheck
	if d := l.p.hooks.claimRecheck; d > 0 {
		every = d
	}
	member, epoch := c.s.Client().GroupMetadata()
	losses := l.group.losses.Load()
	same := member == c.member && losses == c.losses // no join since the last check
	switch {
	case epoch <= 0:
		return nil
	case same && l.c.inTxn():
		c.at = l.now
		return nil
	case same && l.now.Sub(c.at) < every:
		return nil
	}
	c.member, c.losses, c.at = member, losses, l.now
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if e := c.s.CheckClaim(ctx); e != nil {
		l.cfg.logger.Warn("a newer process with this instance ID is waiting for it; yielding", "err", e)
		return e
	}
	return nil
}
