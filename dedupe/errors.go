package dedupe

import (
	"errors"
	"fmt"
)

// Sentinel errors. Check them with errors.Is; the typed errors below match
// the sentinel they refine.
var (
	// ErrInvalidOptions is returned by Open and Options.Validate for
	// options that Open cannot use.
	ErrInvalidOptions = errors.New("dedupe: invalid options")

	// ErrClosed is returned by operations on a closed Store.
	ErrClosed = errors.New("dedupe: store closed")

	// ErrEmptyID is returned when an event ID is empty. An empty ID is almost
	// always a missing field upstream; deduplicating on it would silently drop
	// every such event after the first.
	ErrEmptyID = errors.New("dedupe: empty event ID")

	// ErrIDTooLong is returned when an event ID is longer than
	// Options.MaxIDLen. The concrete error is an *IDTooLongError.
	ErrIDTooLong = errors.New("dedupe: event ID too long")

	// ErrCorrupt is returned when the store directory exists but cannot be
	// trusted: pebble files without a dedupe format marker, a MANIFEST or
	// sstable that is missing or fails its checksum. The concrete error is a
	// *CorruptError. A corrupt store is never reinitialised silently, since
	// that would forget every mark and re-run every side effect.
	ErrCorrupt = errors.New("dedupe: store corrupt")

	// ErrIncompatible is returned when the store was written in a format this
	// version does not understand. The concrete error is a *FormatError.
	ErrIncompatible = errors.New("dedupe: incompatible store format")
)

// IDTooLongError reports an event ID longer than Options.MaxIDLen.
type IDTooLongError struct {
	Len, Max int
}

func (e *IDTooLongError) Error() string {
	return fmt.Sprintf("dedupe: event ID is %d bytes, max %d", e.Len, e.Max)
}

// Is makes errors.Is(err, ErrIDTooLong) hold.
func (e *IDTooLongError) Is(target error) bool { return target == ErrIDTooLong }

// CorruptError reports a store that exists but cannot be opened or read
// safely.
type CorruptError struct {
	Dir    string
	Reason string
	Err    error // underlying pebble error, if any
}

func (e *CorruptError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("dedupe: store %q corrupt: %s: %v", e.Dir, e.Reason, e.Err)
	}
	return fmt.Sprintf("dedupe: store %q corrupt: %s", e.Dir, e.Reason)
}

// Is makes errors.Is(err, ErrCorrupt) hold.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

func (e *CorruptError) Unwrap() error { return e.Err }

// FormatError reports a format marker this version cannot read.
type FormatError struct {
	Dir     string
	Found   string // marker value as stored
	Version uint32 // version this package writes
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("dedupe: store %q has format %q, this version supports %s/%d",
		e.Dir, e.Found, formatMagic, e.Version)
}

// Is makes errors.Is(err, ErrIncompatible) hold.
func (e *FormatError) Is(target error) bool { return target == ErrIncompatible }
