// Package txncore is the transaction layer behind package txn and package
// processor: the Session with its group member and ring of transactional
// producers, the error classes, and the instance ID's ownership that only
// the processor drives (Claim's ordering through CheckClaim, CheckReplaced
// and HolderWait, YieldToSuccessor and YieldOnLost, CheckGroupProtocol).
// Package txn exposes the part a user's own loop needs; the rest stays
// here so that txn's API is not the processor's internals.
package txncore
