// Package txn is onceflow's transaction layer: stable transactional IDs,
// a transactional group session whose offset commits carry the group's
// member ID, generation and instance ID (KIP-447), and an error taxonomy
// that tells the processor what to do after each failure.
//
// Identity. A transactional ID is derived from the application (the group)
// and a stable instance ID, and the same instance ID is the static group
// member ID (group.instance.id). A restarted instance therefore reclaims its
// partitions without a rebalance, and its InitProducerID bumps the epoch,
// which aborts the predecessor's open transaction at once and fences the
// predecessor if it is still alive (a zombie).
//
// Errors. Every error returned by Session is a *Error with a Class:
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
package txn
