package txn

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/internal/txncore"
)

// Txn is one open transaction of a Session, on one producer of its ring.
// Produce and Flush may be called from any goroutine until Commit or
// Abort, which end it; ending is for one goroutine.
type Txn struct{ t *txncore.Txn }

// TransactionalID is the transactional ID of the producer the transaction
// runs on.
func (t *Txn) TransactionalID() string { return t.t.TransactionalID() }

// Produce sends r in the transaction; promise (which may be nil) gets its
// result. A failed record dooms the transaction: Abort it, and pass the
// error to Session.CheckFenced to learn whether to go on.
func (t *Txn) Produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error)) {
	t.t.Produce(ctx, r, promise)
}

// Flush waits until every record produced in the transaction is
// acknowledged or failed (their promises have run). A failure is
// classified by FlushFailed.
func (t *Txn) Flush(ctx context.Context) error { return t.t.Flush(ctx) }

// FlushFailed classifies the error of a caller's own Flush before Commit
// (nothing was committed): ClassFenced if a newer process holds our
// instance ID, else ClassReset. Commit flushes too: callers that do not
// flush first do not need it.
func (t *Txn) FlushFailed(ctx context.Context, err error) *Error { return t.t.FlushFailed(ctx, err) }

// Commit flushes, commits the offsets after the records Poll returned in
// the transaction, with the group's member ID, generation (member epoch)
// and instance ID (KIP-447: a member that is no longer current cannot
// commit), and ends it. rewrite, if not nil, may change the offset commit
// before it is sent (to add metadata, say); nil commits the polled offsets
// as they are. A transaction that produced nothing commits its offsets as
// the member's plain offset commit, fenced the same way.
//
// With several transactions open (Options.Pipeline), commit them in the
// order they began, each after the one before it returned committed: the
// group keeps the offset commit that reached it last, and a younger
// transaction's offsets and outputs may depend on an older one's.
//
// Commit only the work of partitions the member owns. It returns
// (false, nil) when the transaction was aborted because the offset commit
// was refused for a retriable reason (the group moved on, the coordinator
// was unavailable): call Session.Rewind, drop what was done since the
// last commit and go on. Errors are a *Error: ClassFenced, ClassReset
// (nothing was committed) or ClassOutcomeUnknown.
func (t *Txn) Commit(ctx context.Context, rewrite func(*kmsg.TxnOffsetCommitRequest) error) (bool, error) {
	return t.t.Commit(ctx, rewrite)
}

// Abort drops the records still buffered and aborts the transaction. Call
// Session.Rewind afterwards, before the next Poll.
func (t *Txn) Abort(ctx context.Context) error { return t.t.Abort(ctx) }
