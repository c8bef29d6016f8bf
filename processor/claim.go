package processor

import (
	"context"
	"log/slog"
	"time"

	"github.com/onceflow/onceflow/internal/txncore"
)

// claimRecheck is how long a member that holds the instance ID but runs
// no transaction goes between checks of its claim. A busy member needs
// none: a newer process's claim fences its producer, and its next
// transaction fails. An idle one (no partitions, or no input) would
// otherwise hold the ID from a newer process that waits for it, for good.
const claimRecheck = 5 * time.Second

// claimCheck is what the loop keeps about its lifetime's claim of the
// transactional ID (internal/txncore/claim.go).
type claimCheck struct {
	s      *txncore.Session
	log    *slog.Logger
	every  time.Duration // claimRecheck, or a test's
	member string        // the member ID of the last check; "" before the first join
	losses int64         // the member's losses (groupEvents.losses) at the last check
	at     time.Time     // the last check, or the last loop step in a transaction
}

// claimID initializes the session's transactional producers before the
// member joins (aborting what a predecessor left open, fencing it), and,
// under the consumer protocol, returns the checks of that claim (recheck):
// the group gives a free instance ID to whichever waiting process asks
// first, the transaction coordinator orders their claims. Neither step
// stops the lifetime when the brokers cannot answer: the producers then
// initialize at their first transactions, and the processes are left
// unordered (nil).
func claimID(ctx context.Context, s *txncore.Session, cfg *config, every time.Duration) *claimCheck {
	cctx, cancel := context.WithTimeout(ctx, cfg.txnTimeout)
	err := s.Claim(cctx)
	cancel()
	if err != nil {
		cfg.logger.Warn("could not initialize the transactional producers before joining; processes with this instance ID are not ordered",
			"group", cfg.group, "instance", cfg.instanceID, "brokers", cfg.brokers, "err", err)
		return nil
	}
	if cfg.groupProtocol != GroupProtocolConsumer {
		return nil
	}
	if every <= 0 {
		every = claimRecheck
	}
	return &claimCheck{s: s, log: cfg.logger, every: every}
}

// recheck yields the instance ID (a ClassReset error) when a newer process
// claimed the transactional ID after this lifetime. It asks the
// coordinator at the first join, after each loss of the member (losses:
// franz-go then rejoins, and a process the group expelled while it was
// paused or cut off would otherwise keep the ID it took back from a newer
// process still waiting for it), and every claimRecheck while no
// transaction is open (inTxn). A nil check does nothing.
func (c *claimCheck) recheck(ctx context.Context, now time.Time, inTxn bool, losses int64) error {
	if c == nil {
		return nil
	}
	member, epoch := c.s.Client().GroupMetadata()
	same := member == c.member && losses == c.losses // no join since the last check
	switch {
	case epoch <= 0:
		return nil
	case same && inTxn:
		c.at = now
		return nil
	case same && now.Sub(c.at) < c.every:
		return nil
	}
	c.member, c.losses, c.at = member, losses, now
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if e := c.s.CheckClaim(ctx); e != nil {
		c.log.Warn("a newer process with this instance ID is waiting for it; yielding", "err", e)
		return e
	}
	return nil
}
