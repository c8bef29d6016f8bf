package txncore

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Instance is one process's hold on its instance ID across the Sessions
// it runs one after another (a processor's Run rebuilds its Session after
// an error). It owns what outlives a Session: the member IDs the process
// held the ID under, the holder it waits for, the grace a lost member's
// yield began; and the current Session's claim with its rechecks. The
// rules are in claim.go (the order of the processes with one ID under
// the consumer protocol), protocol.go (waiting for and yielding the ID)
// and incarnation.go (the order under classic). Its methods are for one
// loop goroutine, except Held and YieldOnLost, which the client's
// callbacks call.
type Instance struct {
	opts InstanceOptions

	members memberIDs
	lost    lostGrace
	grace   time.Duration // SuccessorGrace, or a test's

	s       *Session   // the current Session (NewSession)
	waiting holderWait // the holder this process, never a holder, waits for
	check   claimCheck // the current Session's claim
}

// InstanceOptions configure an Instance.
type InstanceOptions struct {
	// Options name the instance and reach the group between Sessions
	// (Brokers, Group, InstanceID, GroupProtocol, ClientOpts: connection
	// options only); Incarnation is stamped on every Session.
	Options
	// Clock is the loop's: its Now and After time the waits.
	Clock interface {
		Now() time.Time
		After(time.Duration) <-chan time.Time
	}
	// Recheck is how long a member that holds the instance ID but runs no
	// transaction goes between checks of its claim (default ClaimRecheck).
	Recheck time.Duration
	// OnClaimRetry, if set, is told of each failed claim that Claim
	// retries, and when.
	OnClaimRetry func(err error, retryIn time.Duration)
}

// ClaimRecheck is InstanceOptions.Recheck's default. A busy member needs
// no recheck: a newer process's claim fences its producer, and its next
// transaction fails. An idle one (no partitions, or no input) would
// otherwise hold the ID from a newer process that waits for it, for good.
const ClaimRecheck = 5 * time.Second

// Claim's backoff between attempts.
const (
	claimBackoff    = 500 * time.Millisecond
	maxClaimBackoff = 10 * time.Second
)

// NewInstance returns the Instance of a process (one per processor Run).
func NewInstance(o InstanceOptions) *Instance {
	if o.Recheck <= 0 {
		o.Recheck = ClaimRecheck
	}
	return &Instance{opts: o, grace: SuccessorGrace}
}

// NewSession builds the Instance's next Session (see NewSession), with
// the Instance's incarnation.
func (in *Instance) NewSession(o Options) (*Session, error) {
	o.Incarnation = in.opts.Incarnation
	s, err := NewSession(o)
	if err != nil {
		return nil, err
	}
	in.s, in.check = s, claimCheck{}
	return s, nil
}

// Held records a member ID that this process held the instance ID under:
// a holder among them is this process's own, not a newer process.
func (in *Instance) Held(member string) { in.members.add(member) }

// Claim claims the transactional ID for the current Session before its
// member joins (Session.Claim). Under the consumer protocol a claim that
// fails is retried, with backoff, until it succeeds, fails for good (an
// error the brokers call final, not authorized say) or ctx ends: a member
// that joined unclaimed would be unordered for its whole Session and could
// take the ID from a newer process that waits for it (a soak's w56#122,
// docs/reliability-log.md), and without its transaction coordinator the
// process could not run a transaction anyway. An error leaves the Session
// unordered, its producers initializing at their first transactions.
func (in *Instance) Claim(ctx context.Context) error {
	wait := claimBackoff
	for {
		actx, cancel := context.WithTimeout(ctx, in.s.cfg.TransactionTimeout)
		err := in.s.Claim(actx)
		cancel()
		if err == nil {
			in.check = claimCheck{claimed: in.s.claimed}
			return nil
		}
		if in.opts.GroupProtocol != GroupProtocolConsumer || !claimRetriable(err) || ctx.Err() != nil {
			return err
		}
		if in.opts.OnClaimRetry != nil {
			in.opts.OnClaimRetry(err, wait)
		}
		select {
		case <-ctx.Done():
			return err
		case <-in.opts.Clock.After(wait):
		}
		wait = min(2*wait, maxClaimBackoff)
	}
}

// claimRetriable: a timeout, an unreachable broker or a coordinator that
// is moving, not a refusal the brokers call final.
func claimRetriable(err error) bool {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Retriable
	}
	return !errors.Is(err, kgo.ErrClientClosed)
}

// claimCheck is what the loop keeps about its Session's claim.
type claimCheck struct {
	claimed bool      // the claim orders this Session (consumer protocol)
	member  string    // the member ID of the last check; "" before the first join
	losses  int64     // the member's losses at the last check
	at      time.Time // the last check, or the last loop step in a transaction
}

// Recheck yields the instance ID (a ClassReset *Error) when a newer
// process claimed the transactional ID after the current Session. It asks
// the coordinator at the first join, after each loss of the member
// (losses counts them: franz-go then rejoins, and a process the group
// expelled while it was paused or cut off would otherwise keep the ID it
// took back from a newer process still waiting for it), and every Recheck
// while no transaction is open (inTxn). Without a claim it does nothing.
func (in *Instance) Recheck(ctx context.Context, now time.Time, inTxn bool, losses int64) *Error {
	c := &in.check
	if !c.claimed {
		return nil
	}
	member, epoch := in.s.Client().GroupMetadata()
	same := member == c.member && losses == c.losses // no join since the last check
	switch {
	case epoch <= 0:
		return nil
	case same && inTxn:
		c.at = now
		return nil
	case same && now.Sub(c.at) < in.opts.Recheck:
		return nil
	}
	c.member, c.losses, c.at = member, losses, now
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return in.s.checkClaim(ctx)
}

// Replaced judges UNRELEASED_INSTANCE_ID, which a KIP-848 member of the
// current Session gets when it joins while another member holds its
// instance ID: nil to keep polling (the client retries the join),
// ClassFenced to stop. See replaced for the rules.
func (in *Instance) Replaced(ctx context.Context, now time.Time, op string, err error) *Error {
	if in.s == nil || !errors.Is(err, kerr.UnreleasedInstanceID) {
		return nil
	}
	return in.s.checkReplaced(ctx, now, op, err, in.members.list(), &in.waiting)
}

// YieldToSuccessor runs between a Session that failed and the next one:
// under the consumer protocol a process whose member expired waits for a
// newer process to take the instance ID (see yieldToSuccessor), and gets
// a ClassFenced *Error if one does. When a lost member's yield
// (YieldOnLost) was cut short by the Session's end, it gives only what is
// left of that grace.
func (in *Instance) YieldToSuccessor(ctx context.Context) *Error {
	ours := in.members.list()
	if in.opts.GroupProtocol != GroupProtocolConsumer || len(ours) == 0 {
		return nil
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(in.opts.Brokers...)}, in.opts.ClientOpts...)...)
	if err != nil {
		return nil // NewSession reports bad options
	}
	defer cl.Close()
	grace := in.lost.left(in.opts.Clock.Now(), in.grace)
	return yieldToSuccessor(ctx, cl, in.opts.Options, ours, "", grace, in.opts.Clock.After)
}

// YieldOnLost is YieldToSuccessor for a client whose group member was
// expelled while the process ran: call it from kgo.OnPartitionsLost with
// the callback's client and context (cbCtx). franz-go rejoins as soon as
// that callback returns, so a process that wakes from a pause longer than
// its session would otherwise take the free instance ID from a newer
// process that has been waiting for it. The callback holds the client's
// group management (and its polls) while this waits; it ends with
// sessionCtx (the Session's life: its polls wait for it, and the client's
// Close for the callback) or cbCtx, whichever ends first. A member the
// group kept (the client lost its partitions to failed heartbeats, a
// network blip shorter than the session, or to a fenced member epoch) is
// the client's own, not one a closed client left behind: it returns nil
// at once, and franz-go rejoins (Kafka 4.4.0 refuses a static member's
// rejoin under the same member ID until that member expires).
func (in *Instance) YieldOnLost(sessionCtx, cbCtx context.Context, cl *kgo.Client) *Error {
	if in.opts.GroupProtocol != GroupProtocolConsumer {
		return nil
	}
	ctx, cancel := context.WithCancel(sessionCtx)
	defer cancel()
	defer context.AfterFunc(cbCtx, cancel)()
	// The callback runs before franz-go forgets the member. One that
	// joined (epoch > 0) since its last assignment, which records member
	// IDs, is this process's, not another's.
	live, epoch := cl.GroupMetadata()
	if epoch > 0 {
		in.Held(live)
	}
	ours := in.members.list()
	if len(ours) == 0 {
		return nil
	}
	in.lost.begin(in.opts.Clock.Now())
	e := yieldToSuccessor(ctx, cl, in.opts.Options, ours, live, in.grace, in.opts.Clock.After)
	if ctx.Err() == nil {
		// Over by itself: franz-go rejoins now, and the member that
		// joins holds the ID, so a later rebuild owes a whole grace.
		in.lost.end()
	}
	return e
}

// lostGrace is the grace that a lost member's yield (YieldOnLost) began
// and its Session's end cut short. The instance ID has been free, or a
// newer process's, all along: the rebuild that follows owes a newer
// process only the rest of that grace, and a second whole one would keep
// a woken process that nobody replaced out of its group for two.
type lostGrace struct {
	mu    sync.Mutex
	began time.Time // zero: no yield cut short
}

func (g *lostGrace) begin(now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.began = now
}

// begun reports whether a yield's grace is under way or was cut short.
func (g *lostGrace) begun() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return !g.began.IsZero()
}

func (g *lostGrace) end() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.began = time.Time{}
}

// left is the grace a rebuild at now gives: all of grace, or the rest of
// the one a lost member's yield began. It ends that one.
func (g *lostGrace) left(now time.Time, grace time.Duration) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.began.IsZero() {
		return grace
	}
	rest := grace - now.Sub(g.began)
	g.began = time.Time{}
	return max(rest, 0)
}

// memberIDs is a set of group member IDs, safe for the client's callbacks.
type memberIDs struct {
	mu  sync.Mutex
	ids []string
}

func (m *memberIDs) add(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if id != "" && !slices.Contains(m.ids, id) {
		m.ids = append(m.ids, id)
	}
}

func (m *memberIDs) list() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.ids)
}
