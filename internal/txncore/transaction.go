package txncore

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Txn is one open transaction of a Session, on one producer of its ring.
// Produce and Flush may be called from any goroutine until Commit or
// Abort, which end it; ending is for one goroutine.
type Txn struct {
	s      *Session
	p      *producer
	member string // the group member ID when it began
	// produced: a record went to the producer. A transaction that produced
	// nothing has no broker-side transaction to end: its offsets are the
	// member's plain commit (see Commit).
	produced atomic.Bool
}

// TransactionalID is the transactional ID of the producer the transaction
// runs on.
func (t *Txn) TransactionalID() string { return t.p.id }

// Produce sends r in the transaction; promise (which may be nil) gets its
// result. A failed record dooms the transaction: Abort it, and pass the
// error to CheckFenced to learn whether to go on.
func (t *Txn) Produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error)) {
	t.produced.Store(true)
	t.p.cl.Produce(ctx, r, promise)
}

// Flush waits until every record produced in the transaction is
// acknowledged or failed (their promises have run). A failure is
// classified by FlushFailed.
func (t *Txn) Flush(ctx context.Context) error { return t.p.cl.Flush(ctx) }

// Commit flushes, commits the offsets after the records Poll returned in
// the transaction, with the group's member ID, generation (member epoch)
// and instance ID (KIP-447: a member that is no longer current cannot
// commit), and ends it. rewrite, if not nil, may change the offset commit
// before it is sent (the processor adds its metadata there); nil commits
// the polled offsets as they are. A transaction that produced nothing
// commits its offsets as the member's plain offset commit, fenced the same
// way.
//
// With several transactions open (Options.Pipeline), commit them in the
// order they began, each after the one before it returned committed: the
// group keeps the offset commit that reached it last, and a younger
// transaction's offsets and outputs may depend on an older one's.
//
// Commit only the work of partitions the member owns: their offsets go
// with it, and KIP-447 refuses the commit of a member that is no longer
// current. It returns (false, nil) when the transaction was aborted
// because the offset commit was refused for a retriable reason (the group
// moved on, the coordinator was unavailable): call Session.Rewind, drop
// what was done since the last commit and go on. Errors are a *Error: ClassFenced,
// ClassReset (nothing was committed) or ClassOutcomeUnknown.
func (t *Txn) Commit(ctx context.Context, rewrite func(*kmsg.TxnOffsetCommitRequest) error) (bool, error) {
	defer t.s.finish(t)
	if err := t.p.cl.Flush(ctx); err != nil {
		return false, t.FlushFailed(ctx, err)
	}
	req := t.s.offsetRequest()
	if rewrite != nil {
		if err := rewrite(req); err != nil {
			return false, t.abortAfter(ctx, "commit", err)
		}
	}
	if !t.produced.Load() {
		// Nothing reached a broker: only the client's transaction state
		// is reset, and the member commits the offsets itself.
		if err := t.p.cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
			return false, classifyProduceErr("commit", err)
		}
		switch err := t.s.offsets.commitPlain(ctx, t.s.cl, req); {
		case err == nil:
			t.s.committed(req)
			return true, nil
		case abortableCommitErr(err):
			return false, nil
		default:
			return false, t.s.commitErr(ctx, t.member, err)
		}
	}
	if err := t.s.offsets.commitTxn(ctx, t.p, req); err != nil {
		if abortableCommitErr(err) {
			return false, t.end(ctx, kgo.TryAbort, nil)
		}
		return false, t.abortAfter(ctx, "commit", err)
	}
	if err := t.end(ctx, kgo.TryCommit, req); err != nil {
		if errors.Is(err, errAbortedInstead) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// Abort drops the records still buffered and aborts the transaction. Call
// Session.Rewind afterwards, before the next Poll.
func (t *Txn) Abort(ctx context.Context) error {
	defer t.s.finish(t)
	if err := t.p.cl.AbortBufferedRecords(ctx); err != nil {
		return &Error{ClassReset, "abort", err}
	}
	return t.end(ctx, kgo.TryAbort, nil)
}

// errAbortedInstead: an EndTxn that was to commit aborted (end).
var errAbortedInstead = errors.New("txn: aborted instead of committed")

// end sends EndTxn. Like franz-go's GroupTransactSession, a commit refused
// in a way that leaves the transaction abortable is retried as an abort
// (errAbortedInstead). committed, when the commit went through, records
// the offsets it committed for Session.Rewind. An error after an EndTxn
// may come after the coordinator took it: never assume either outcome.
func (t *Txn) end(ctx context.Context, how kgo.TransactionEndTry, committed *kmsg.TxnOffsetCommitRequest) error {
	try := how
	var err error
	for range 10 {
		err = t.p.cl.EndTransaction(ctx, try)
		if err == nil || !(errors.Is(err, kerr.OperationNotAttempted) ||
			errors.Is(err, kerr.TransactionAbortable) ||
			errors.Is(err, kerr.UnknownServerError)) {
			break
		}
		// UNKNOWN_SERVER_ERROR leaves the end unconfirmed: retried as an
		// abort, never reported as a commit.
		try = kgo.TryAbort
	}
	switch {
	case err != nil:
		return t.s.commitErr(ctx, t.member, err)
	case how == kgo.TryCommit && try == kgo.TryAbort:
		return errAbortedInstead
	case how == kgo.TryCommit:
		t.s.committed(committed)
	}
	return nil
}

// abortAfter aborts after a failure that was not the transaction's end
// (the offset commit could not be sent: its coordinator's node down, say).
// Nothing was committed: the Session goes on (nil: Commit reports an
// abort) unless the failure says it cannot (fencing), or the abort itself
// fails.
func (t *Txn) abortAfter(ctx context.Context, op string, cause error) error {
	if err := t.end(ctx, kgo.TryAbort, nil); err != nil {
		return err
	}
	if e := t.s.CheckFenced(ctx, op, cause); e.Class != ClassAbortable {
		return e
	}
	return nil
}

// commitErr classifies an error of a transaction's end or offset commit:
// ClassFenced if a newer process holds our instance ID, else
// ClassOutcomeUnknown.
func (s *Session) commitErr(ctx context.Context, member string, err error) *Error {
	if fenced, why := s.endFenced(ctx, member, err); fenced {
		return fencedError("commit", err, why)
	}
	return &Error{ClassOutcomeUnknown, "commit", err}
}

// finish frees t's producer for the ring's next turn.
func (s *Session) finish(t *Txn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t.p.busy = false
}

// abortableCommitErr reports offset commit errors after which the
// transaction aborts and the caller goes on with the Session (franz-go's
// GroupTransactSession's list): the group moved on (a rebalance, an
// expelled or re-epoched member, a vanished group), the coordinator was
// unavailable, or the broker asks for an abort.
func abortableCommitErr(err error) bool {
	for _, e := range []error{
		kerr.IllegalGeneration, kerr.UnknownMemberID, kerr.StaleMemberEpoch, kerr.FencedMemberEpoch,
		kerr.GroupIDNotFound, kerr.RebalanceInProgress, kerr.CoordinatorNotAvailable,
		kerr.CoordinatorLoadInProgress, kerr.NotCoordinator, kerr.ConcurrentTransactions,
		kerr.UnknownServerError, kerr.TransactionAbortable,
	} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
