package processor

import (
	"errors"
	"fmt"

	"github.com/onceflow/onceflow/internal/offsetmeta"
	"github.com/onceflow/onceflow/internal/txncore"
	"github.com/twmb/franz-go/pkg/kgo"
)

var (
	// ErrFenced is returned by Run when another process with the same
	// instance ID (and so the same transactional ID) has taken over: a
	// newer instance, or, under the consumer protocol, a live one that
	// held the ID before this process started and kept it for longer than
	// a dead member's session lasts (twice the group's
	// consumer.session.timeout.ms; see WithGroupProtocol).
	ErrFenced = txncore.ErrFenced

	// ErrGroupProtocolUnsupported is returned by Run when the brokers
	// cannot run the protocol WithGroupProtocol asked for.
	ErrGroupProtocolUnsupported = txncore.ErrGroupProtocolUnsupported

	// ErrBrokersUnreachable is wrapped by Run's error when no broker
	// answered within WithStartTimeout; the error names each address with
	// its last dial error.
	ErrBrokersUnreachable = errors.New("processor: no broker answered")

	// ErrTopicNotFound is wrapped by Run's error when an input, output or
	// dead-letter topic does not exist: at start (see WithStartTimeout),
	// or deleted while Run runs. The error names the topics and their
	// options. What was committed stays committed: the next start resumes
	// from it.
	ErrTopicNotFound = errors.New("processor: topic not found")

	// ErrInvalidOption wraps every configuration error returned by New.
	ErrInvalidOption = errors.New("processor: invalid option")

	// ErrCorruptMetadata is returned by Run when a partition's committed
	// offset metadata carries onceflow's marker but cannot be decoded: the
	// records it marks as done cannot be told apart, so rather than guess
	// (and duplicate or lose outputs) the processor stops.
	ErrCorruptMetadata = offsetmeta.ErrCorrupt

	// ErrNoDLQ is returned by Run when a record must go to the dead-letter
	// topic but none is configured. The record is not committed, so it is
	// handled again after a restart.
	ErrNoDLQ = errors.New("processor: record needs a dead-letter topic but none is configured")

	// ErrHandlerPanic is wrapped by every *PanicError: a handler (or
	// other user code the processor calls, see PanicError) panicked. Run
	// returns an error wrapping it, and ErrNoDLQ, when such a record needs
	// the dead-letter topic and none is set; the record is not committed.
	ErrHandlerPanic = errors.New("processor: handler panicked")

	// ErrUnauthenticated is returned by Run when the brokers refuse the
	// client's connection or credentials: a listener that needs TLS or
	// SASL the client was not given (see WithKgoOpts), a wrong password,
	// a certificate the client does not trust. Going on could not help,
	// so Run stops within seconds (a refusal is confirmed once after a
	// pause: see checkAccess) instead of retrying.
	ErrUnauthenticated = errors.New("processor: the brokers refused the connection or its credentials")

	// ErrAlreadyRun is returned by a second call to Run.
	ErrAlreadyRun = errors.New("processor: Run called twice")

	// ErrStore is wrapped by Run's error when the state store
	// (WithStateStore) or the dedupe store (WithDedupe) failed: it could
	// not be opened (a read-only or full disk, say), a read failed, or
	// writing a committed transaction to it failed. The error names the
	// directory and the operation. Nothing the failed operation decided
	// was committed, and the store is never ahead of its changelog: a
	// restart on a healthy disk (the same directory, or an empty one)
	// restores it and goes on.
	ErrStore = errors.New("processor: local store failed")

	// ErrNoDedupe is returned by Once and OnceNamed when ctx is not the
	// context of a handler of a processor with WithDedupe.
	ErrNoDedupe = errors.New("processor: Once needs the handler's context of a processor with WithDedupe")
)

// PermanentError marks a handler error that retrying cannot fix; the record
// goes to the dead-letter topic at once.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return "permanent: " + e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent wraps err so that the processor does not retry it.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// storeError is Run's error for a failed operation of a local store
// (ErrStore); err names the directory.
func storeError(op string, err error) error {
	if err == nil || errors.Is(err, ErrStore) {
		return err
	}
	return fmt.Errorf("%w: %s: %w", ErrStore, op, err)
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidOption, fmt.Sprintf(format, args...))
}

// Dead-letter reasons, in the HeaderReason header.
const (
	reasonPermanent        = "permanent"
	reasonRetriesExhausted = "retries-exhausted"
	reasonStuck            = "stuck"
	reasonEventIDTooLong   = "event-id-too-long" // WithDedupe: longer than MaxIDLen
	reasonPanic            = "panic"             // user code panicked: see PanicError
)

// dlqReasons indexes the per-reason dead-letter counters.
var dlqReasons = [...]string{reasonPermanent, reasonRetriesExhausted, reasonStuck, reasonEventIDTooLong, reasonPanic}

func reasonIndex(reason string) int {
	for i, r := range dlqReasons {
		if r == reason {
			return i
		}
	}
	return 0
}

// Dead-letter headers: where the record came from and why it failed. The
// input's own headers follow them unchanged.
const (
	HeaderSourceTopic     = "onceflow-dlq-source-topic"
	HeaderSourcePartition = "onceflow-dlq-source-partition"
	HeaderSourceOffset    = "onceflow-dlq-source-offset"
	HeaderReason          = "onceflow-dlq-reason"
	HeaderError           = "onceflow-dlq-error"
	HeaderAttempts        = "onceflow-dlq-attempts"
	HeaderFirstFailure    = "onceflow-dlq-first-failure" // RFC 3339, nanoseconds
)

// headerValue is the value of r's first header named key, or "".
func headerValue(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// abortReasons label onceflow_transactions_aborted_total and key
// Stats.AbortsBy (see Stats.Aborts).
var abortReasons = [...]string{"refused", "produce", "revoked", "cascade"}

const (
	abortRefused = iota
	abortProduce
	abortRevoked
	abortCascade
)
