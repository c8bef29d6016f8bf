package txncore

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Class says how to recover from a transaction error (see the package
// documentation). The zero Class is no class: not a *Error.
type Class int

const (
	// ClassAbortable: abort the transaction (Session.Abort rewinds the
	// consumer to the last committed offsets) and go on with the Session.
	ClassAbortable Class = iota + 1
	// ClassReset: close the Session and build a new one, which resumes
	// from the committed offsets.
	ClassReset
	// ClassFenced: a newer instance holds this transactional identity;
	// stop. Matches ErrFenced.
	ClassFenced
	// ClassOutcomeUnknown: the commit may or may not have happened; close
	// the Session and build a new one, whose committed offsets say which.
	// Matches ErrOutcomeUnknown.
	ClassOutcomeUnknown
)

func (c Class) String() string {
	switch c {
	case ClassAbortable:
		return "abortable"
	case ClassReset:
		return "reset"
	case ClassFenced:
		return "fenced"
	case ClassOutcomeUnknown:
		return "outcome-unknown"
	}
	return fmt.Sprintf("class(%d)", int(c))
}

var (
	// ErrFenced means a newer instance holds this transactional identity.
	ErrFenced = errors.New("txn: fenced by a newer instance with the same transactional ID")
	// ErrOutcomeUnknown means a commit may or may not have happened.
	ErrOutcomeUnknown = errors.New("txn: transaction outcome unknown")
	// ErrInvalidOptions is returned by NewSession for a Options it cannot
	// use. It has no Class: nothing was contacted.
	ErrInvalidOptions = errors.New("txn: invalid options")
	// ErrGroupProtocolUnsupported means the brokers cannot run the
	// GroupProtocol a Options asked for (see Session.CheckGroupProtocol).
	ErrGroupProtocolUnsupported = errors.New("txn: group protocol not supported by the brokers")
)

// Error is a transaction failure with its recovery class.
type Error struct {
	Class Class
	Op    string // what failed: "begin", "produce", "flush", "commit", "poll", or CheckFenced's op
	Err   error
}

func (e *Error) Error() string { return fmt.Sprintf("txn %s (%s): %v", e.Op, e.Class, e.Err) }
func (e *Error) Unwrap() error { return e.Err }

// Is lets errors.Is match the class sentinels.
func (e *Error) Is(target error) bool {
	return (target == ErrFenced && e.Class == ClassFenced) ||
		(target == ErrOutcomeUnknown && e.Class == ClassOutcomeUnknown)
}

// ClassOf returns the recovery class of err, or 0 if err is not a *Error.
func ClassOf(err error) Class {
	var e *Error
	if errors.As(err, &e) {
		return e.Class
	}
	return 0
}

// isFencing reports errors after which the producer is unusable because its
// epoch is no longer current: another producer with the same ID, or the
// coordinator aborting a timed-out transaction (KIP-890 part 2 reports both
// as fencing).
func isFencing(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) ||
		errors.Is(err, kerr.InvalidProducerEpoch) ||
		errors.Is(err, kerr.InvalidProducerIDMapping) ||
		errors.Is(err, kerr.InvalidTxnState) ||
		errors.Is(err, kerr.FencedInstanceID) ||
		errors.Is(err, kerr.TransactionCoordinatorFenced)
}

// classifyProduceErr classifies an error seen before EndTxn: the transaction
// was not committed.
func classifyProduceErr(op string, err error) *Error {
	switch {
	case isFencing(err):
		return &Error{ClassReset, op, err}
	case errors.Is(err, kgo.ErrClientClosed), errors.Is(err, context.Canceled):
		return &Error{ClassReset, op, err}
	}
	return &Error{ClassAbortable, op, err}
}
