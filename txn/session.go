package txn

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/txncore"
)

// Session is one transactional client lifetime: a group member that
// consumes read_committed (static membership, rebalances blocked while the
// loop works) and a ring of transactional producers (Options.Pipeline) whose
// transactions commit the member's offsets with its group metadata
// (KIP-447), so that while one transaction ends the next can fill on the
// next producer. After an error of class ClassReset, ClassFenced or
// ClassOutcomeUnknown it must be closed and, if the caller goes on,
// replaced by a new Session with the same Options. Poll, AllowRebalance and
// Begin are called from one goroutine; a Txn may be produced to and ended
// from another.
type Session struct{ s *txncore.Session }

// NewSession builds the clients. Under the classic protocol the member
// joins the group as soon as it has the topics' metadata; under the
// consumer protocol at Claim or the first Poll, whichever comes first. An
// invalid cfg fails with an error matching ErrInvalidOptions.
func NewSession(cfg Options) (*Session, error) {
	s, err := txncore.NewSession(txncore.Options(cfg))
	if err != nil {
		return nil, err
	}
	return &Session{s}, nil
}

// Claim initializes every producer of the ring (InitProducerID) and fences
// the ring IDs above the ring's size up to MaxPipeline, which a
// predecessor with a larger ring may have left with open transactions:
// the predecessor's open transactions abort at once, and a predecessor
// still alive (a zombie) is fenced. Call it once, before the first Poll.
// Without it each producer initializes at its first transaction, and a
// predecessor's transactions on ring IDs this Session does not use wait
// for the transaction timeout. An error leaves the producers to
// initialize at their first transactions.
func (s *Session) Claim(ctx context.Context) error { return s.s.Claim(ctx) }

// Client is the group member's client, for pausing and resuming
// partitions, admin requests and metadata. It produces nothing: records go
// through a Txn. Do not use it to commit offsets.
func (s *Session) Client() *kgo.Client { return s.s.Client() }

// Poll fetches up to maxRecords records (maxRecords <= 0: any number),
// waiting until some arrive or ctx is done. Rebalances are blocked from
// Poll until AllowRebalance, so offsets are committed while the generation
// that fetched them is still current: call AllowRebalance after every
// Poll, once the records it returned are committed or aborted. A fatal
// fetch error (see kgo.Fetches.EachError) goes through CheckFenced.
func (s *Session) Poll(ctx context.Context, maxRecords int) kgo.Fetches {
	return s.s.Poll(ctx, maxRecords)
}

// AllowRebalance lets a pending rebalance run; call it after a commit or
// abort (or after a Poll that returned nothing to process). A transaction
// still open must not commit work of partitions a revoke or loss took
// (its offsets would not go with it): abort it, or commit only what the
// member still owns. A member that is no longer current cannot commit at
// all (KIP-447).
func (s *Session) AllowRebalance() { s.s.AllowRebalance() }

// Pipeline is the number of producers in the ring: how many transactions
// can be open at once (one filling while others end).
func (s *Session) Pipeline() int { return s.s.Pipeline() }

// Begin opens a transaction on the ring's next producer. With a ring of
// n, up to n transactions may be open at once; end them in the order
// they began, each after the one before it committed (see Txn.Commit).
// It returns ErrPipelineFull when that producer is still ending an
// earlier transaction.
func (s *Session) Begin() (*Txn, error) {
	t, err := s.s.Begin()
	if err != nil {
		return nil, err
	}
	return &Txn{t}, nil
}

// CheckFenced turns an error seen outside Commit (a failed produce, a
// fatal poll error) into a classified *Error; op names what failed, as
// Error.Op. ClassAbortable: Abort and go on with this Session; other
// classes as on Error.
func (s *Session) CheckFenced(ctx context.Context, op string, err error) *Error {
	return s.s.CheckFenced(ctx, op, err)
}

// Rewind moves the member's consumption back to the last committed
// offsets, after an abort: the records since are fetched again. Call it
// from the goroutine that polls, between polls: what a poll returns
// afterwards comes from the rewound positions.
func (s *Session) Rewind() { s.s.Rewind() }

// RewindPartitions is Rewind for some partitions only (nil: all).
func (s *Session) RewindPartitions(only map[string][]int32) { s.s.RewindPartitions(only) }

// Close closes the clients. A static member does not leave the group on
// close: a restart with the same instance ID reclaims its partitions
// without a rebalance. For a stop after which the instance does not come
// back, use CloseAndLeave. Transactions still open (not being ended: end
// them first) are aborted, so that they do not hold their partitions'
// last stable offset until the transaction timeout; if the brokers cannot
// be reached, the next Session's Claim or the coordinator's timeout
// aborts them.
func (s *Session) Close() { s.s.Close() }

// CloseAndLeave is Close for a stop after which this instance does not
// come back (a scale-down): after the member's client closed and the open
// transactions were aborted, the member leaves the group for good, so
// that the group hands its partitions to the other members at once
// instead of keeping them for a restart until the session timeout. Call it
// only once the last transaction has committed, and never on the way to a
// new Session after an error. ctx bounds the leave; its error says the
// partitions wait for the session timeout after all.
func (s *Session) CloseAndLeave(ctx context.Context) error { return s.s.CloseAndLeave(ctx) }
