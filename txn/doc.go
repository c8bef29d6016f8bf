// Package txn is onceflow's transaction layer, for users who write their
// own consume-transform-produce loop: a fenced, KIP-447 transactional group
// session with stable transactional IDs, and an error taxonomy that says
// what to do after each failure.
//
// # txn or processor
//
// Package processor is built on txn and is what most jobs want: it runs a
// handler per record with per-session ordering and parallelism, retries,
// dead-letter records, gap-aware commits, state, deduplication, metrics and
// tracing, and recovers from every error class below by itself. Use txn
// when you need the loop in your hands: batch-at-a-time processing, your
// own scheduling, records produced from something other than a handler, or
// a framework of your own. Then you own what processor does for you: which
// records a commit covers (Commit commits the offsets after everything
// polled), rewinding your own state after an abort, and the recovery
// below. The Example shows a complete loop.
//
// # Identity
//
// A transactional ID is derived from the application (the group) and a
// stable instance ID (see ID; the ring's other producers add "#k", see
// RingID), and the same instance ID is the static group member ID
// (group.instance.id). A restarted instance therefore reclaims its
// partitions without a rebalance, and its InitProducerIDs (Session.Claim
// initializes every producer of the ring, and fences the ring IDs above
// its size) bump the epochs, which aborts the predecessor's open
// transactions at once and fences the predecessor if it is still alive (a
// zombie). Options.Incarnation lets a process tell a newer holder of its
// instance ID from an older one that came back. Close keeps the static
// membership for such a restart; CloseAndLeave, for a stop after which
// the instance does not come back (a scale-down), leaves the group, so
// that the other members take its partitions at once.
//
// Under the consumer protocol (KIP-848) a restarted process may have to
// wait for its own instance ID, and a paused one may come back to find it
// taken. Package processor orders such processes (claims checked against
// the transaction coordinator, an expired member yielding to a newer
// one); a Session alone does not, and its loop must not run two processes
// with one instance ID at once.
//
// # Errors
//
// Every error returned by a Session's methods is a *Error with a Class
// (ClassOf reads it):
//
//   - ClassAbortable: abort, rewind to the last committed offsets, go on.
//   - ClassReset: the client is fenced or timed out for a reason other than a
//     newer holder of the identity (transaction timeout, a rebalance race);
//     drop the client, build a new one, rejoin, go on. Never reuse it.
//   - ClassFenced: a newer instance holds this identity; stop. Errors of this
//     class match ErrFenced.
//   - ClassOutcomeUnknown: EndTxn failed and the transaction may or may not
//     have committed; build a new client and re-read the committed offsets
//     (which block until the broker finishes the transaction) before going
//     on. Never assume either outcome. Errors match ErrOutcomeUnknown.
//
// A Commit that returns (false, nil) was aborted for a retriable reason
// (a rebalance, a refused offset commit): drop the work since the last
// commit and go on with the same Session.
package txn
