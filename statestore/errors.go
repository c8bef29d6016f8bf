package statestore

import (
	"errors"
	"fmt"
)

// ErrCorrupt means the store's files or a value in it cannot be read as
// written. The store is never emptied or rebuilt silently: remove the
// directory to rebuild it from the changelog.
var ErrCorrupt = errors.New("statestore: corrupt store")

// ErrInUse is returned by Inspect for a store that a process has open.
var ErrInUse = errors.New("statestore: store in use by another process (stop the instance first)")

// ErrInvalidOptions is returned by Open and Options.Validate for Options
// the store cannot use.
var ErrInvalidOptions = errors.New("statestore: invalid options")

// ErrClosed is returned by calls on a closed store.
var ErrClosed = errors.New("statestore: closed")

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}
