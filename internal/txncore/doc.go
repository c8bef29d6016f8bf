// Package txncore is the transaction layer behind package txn and package
// processor: the Session with its group member and ring of transactional
// producers, the error classes, and the Instance: a process's hold on its
// instance ID across its Sessions (claims and their rechecks, waiting for
// the ID and yielding it, incarnations), which only the processor drives.
// Package txn exposes the part a user's own loop needs; the rest stays
// here so that txn's API is not the processor's internals.
package txncore
