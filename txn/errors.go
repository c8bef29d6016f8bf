package txn

import "github.com/onceflow/onceflow/internal/txncore"

// Class says how to recover from a transaction error (see the package
// documentation). The zero Class is no class: not a *Error.
type Class = txncore.Class

const (
	// ClassAbortable: abort the transaction, call Session.Rewind, and go
	// on with the Session.
	ClassAbortable = txncore.ClassAbortable
	// ClassReset: close the Session and build a new one, which resumes
	// from the committed offsets.
	ClassReset = txncore.ClassReset
	// ClassFenced: a newer instance holds this transactional identity;
	// stop. Matches ErrFenced.
	ClassFenced = txncore.ClassFenced
	// ClassOutcomeUnknown: the commit may or may not have happened; close
	// the Session and build a new one, whose committed offsets say which.
	// Matches ErrOutcomeUnknown.
	ClassOutcomeUnknown = txncore.ClassOutcomeUnknown
)

// Error is a transaction failure with its recovery class: its fields are
// Class, Op (what failed: "begin", "produce", "flush", "commit", "abort",
// "poll", or CheckFenced's op) and Err, the cause. errors.Is matches
// ErrFenced and ErrOutcomeUnknown by its Class.
type Error = txncore.Error

// ClassOf returns the recovery class of err, or 0 if err is not a *Error.
func ClassOf(err error) Class { return txncore.ClassOf(err) }

var (
	// ErrFenced means a newer instance holds this transactional identity.
	ErrFenced = txncore.ErrFenced
	// ErrOutcomeUnknown means a commit may or may not have happened.
	ErrOutcomeUnknown = txncore.ErrOutcomeUnknown
	// ErrInvalidOptions is returned by NewSession for Options it cannot
	// use. It has no Class: nothing was contacted.
	ErrInvalidOptions = txncore.ErrInvalidOptions
	// ErrPipelineFull is returned by Session.Begin when the producer the
	// next transaction would take is still ending an earlier one: end it
	// first.
	ErrPipelineFull = txncore.ErrPipelineFull
)
