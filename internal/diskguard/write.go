package diskguard

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Do runs write, a Pebble call that may write through fs, unless a write
// already failed, and turns Pebble's panic on a failed write into the
// error that caused it. Callers serialize Do with their other writes, so
// that the check and the write after it are one step.
func (fs *FS) Do(write func() error) (err error) {
	if err := fs.Err(); err != nil {
		return err
	}
	defer func() {
		if r := recover(); r != nil {
			if err = fs.Err(); err == nil {
				err = fmt.Errorf("pebble: %v", r)
			}
		}
	}()
	if err := write(); err != nil {
		// The guard's error names the file and the operation; Pebble's
		// (from a sync it waited for, say) is the bare errno.
		if g := fs.Err(); g != nil {
			return g
		}
		return err
	}
	return nil
}

// SyncAhead is a log sync requested without waiting for it. Without Sync,
// Pebble writes its log only as blocks fill, so a disk that failed
// meanwhile would be met first by the log rotation of a later commit,
// which Pebble cannot survive (it ends the process). So a store requests a
// sync after each unsynced batch and waits for it before the next (long
// done at a processor's pace): a failure stops the writes before a
// rotation meets it. The zero value has nothing pending; its methods are
// called under the store's write lock.
type SyncAhead struct {
	pending *pebble.Batch
}

// Request asks Pebble to write and sync its log in the background,
// through a batch that holds nothing but a log record: the caller's batch
// stays the caller's.
func (s *SyncAhead) Request(db *pebble.DB) error {
	b := db.NewBatch()
	_ = b.LogData(nil, nil)
	if err := db.ApplyNoSyncWait(b, pebble.Sync); err != nil {
		_ = b.Close()
		return err
	}
	s.pending = b
	return nil
}

// Wait waits for the last requested sync, if any.
func (s *SyncAhead) Wait() error {
	b := s.pending
	if b == nil {
		return nil
	}
	s.pending = nil
	err := b.SyncWait()
	_ = b.Close()
	return err
}
