package dedupe

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"os"
	"strings"
	"syscall"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/onceflow/onceflow/internal/diskguard"
)

// The format marker is written, synced, when a store is created and is
// required on every later open. It distinguishes "new directory" from "a
// store whose contents were lost", which must never be treated alike.
//
// Version 2 writes index keys in indexing rounds (see index.go). Version 1
// wrote them with each mark; a version 1 store is upgraded on Open by
// recording that its whole log is indexed. A version 1 binary refuses a
// version 2 store, whose newest marks may exist only in the log.
const (
	formatMagic   = "onceflow-dedupe"
	formatVersion = 2
)

var (
	formatValue   = fmt.Appendf(nil, "%s/%d", formatMagic, formatVersion)
	formatValueV1 = fmt.Appendf(nil, "%s/%d", formatMagic, 1)
)

// Open opens the store in dir, creating it if dir is missing or empty.
// opts may be nil; invalid options (see Options.Validate) fail with an
// error matching ErrInvalidOptions. An existing directory that holds pebble files but is not
// a valid dedupe store fails with an error matching ErrCorrupt (or
// ErrIncompatible for an unknown format version); it is never reinitialised.
func Open(dir string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	fresh, err := isFresh(o.FS, dir)
	if err != nil {
		return nil, fmt.Errorf("dedupe: inspect %q: %w", dir, err)
	}
	guard := diskguard.Wrap(o.FS)
	po := pebbleOptions(&o)
	po.FS = guard
	// Pebble's own checks back ours up: a directory we consider fresh must
	// not already hold a database, and an existing one must.
	po.ErrorIfExists = fresh
	po.ErrorIfNotExists = !fresh
	var db *pebble.DB
	err = guard.Do(func() (err error) {
		db, err = pebble.Open(dir, po)
		return err
	})
	if err != nil {
		// A failed write says the disk refuses writes (read-only, full,
		// failing), not that the store is corrupt: deleting it would
		// forget every mark.
		if !fresh && guard.Err() == nil && !isEnvError(err) {
			return nil, &CorruptError{Dir: dir, Reason: "cannot open database", Err: err}
		}
		return nil, fmt.Errorf("dedupe: open %q: %w", dir, err)
	}
	var v1 bool
	err = guard.Do(func() (err error) {
		v1, err = checkFormat(db, dir, fresh, o.Logger)
		return err
	})
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	s := &Store{
		opts:     o,
		dir:      dir,
		db:       db,
		guard:    guard,
		log:      o.Logger,
		win:      window{ttl: o.TTL, width: o.BucketWidth},
		seed:     maphash.MakeSeed(),
		expireCh: make(chan struct{}, 1),
	}
	var run uint64
	err = guard.Do(func() (err error) {
		run, err = nextRun(db)
		return err
	})
	if err != nil {
		_ = db.Close()
		return nil, readErr(dir, err)
	}
	s.seq.Store(run << seqRunShift)
	if v1 {
		if err := guard.Do(func() error { return upgradeV1(db, run) }); err != nil {
			_ = db.Close()
			return nil, readErr(dir, err)
		}
	}
	s.wo = pebble.NoSync
	if o.Sync {
		s.wo = pebble.Sync
	}
	s.once.init()
	s.stage = newStage(o.stageLimit)
	if !o.DisableFilter {
		s.filter = newFilterSet(s.win, o.filterMinIDs)
		if err := s.initFilter(); err != nil {
			_ = db.Close()
			return nil, err
		}
	}
	if err := s.recoverIndex(); err != nil {
		_ = db.Close()
		return nil, err
	}
	s.bgCtx, s.bgCancel = context.WithCancel(context.Background())
	s.bg.Add(1)
	go s.indexLoop(s.bgCtx)
	if s.filter != nil {
		s.bg.Add(1)
		go s.filterLoop(s.bgCtx)
	}
	if !o.DisableAutoExpiry {
		s.bg.Add(1)
		go s.expireLoop(s.bgCtx)
		s.expireCh <- struct{}{} // catch up on buckets that expired while closed
	}
	return s, nil
}

// isFresh reports whether dir is missing or empty.
func isFresh(fs vfs.FS, dir string) (bool, error) {
	names, err := fs.List(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return true, nil
		}
		return false, err
	}
	return len(names) == 0, nil
}

// isEnvError reports errors that say nothing about the store's contents:
// permissions, a lock held by another process, resource limits. Any other
// failure to open an existing store (missing MANIFEST or sstables, size or
// checksum mismatches, a foreign comparer) means it cannot be trusted.
func isEnvError(err error) bool {
	for _, e := range []error{os.ErrPermission, syscall.EAGAIN, syscall.EACCES, syscall.EROFS,
		syscall.EMFILE, syscall.ENFILE, syscall.ENOSPC, syscall.EDQUOT, syscall.EIO} {
		if errors.Is(err, e) {
			return true
		}
	}
	// Pebble's in-process double-open check has no sentinel.
	return strings.Contains(err.Error(), "lock held by current process")
}

// checkFormat verifies the marker of an existing store or writes the marker
// of a new one. It reports whether the store has format version 1.
func checkFormat(db *pebble.DB, dir string, fresh bool, log *slog.Logger) (v1 bool, err error) {
	v, closer, err := db.Get(formatKey)
	switch {
	case err == nil:
		found := string(v)
		_ = closer.Close()
		switch found {
		case string(formatValue):
			return false, nil
		case string(formatValueV1):
			return true, nil
		}
		return false, &FormatError{Dir: dir, Found: found, Version: formatVersion}
	case !errors.Is(err, pebble.ErrNotFound):
		return false, readErr(dir, err)
	}
	if !fresh {
		// A database without a marker is either not ours or lost keys. The
		// one exception is a database with no keys at all: that is a
		// creation torn before its marker was synced, and nothing can be
		// lost by finishing it.
		empty, err := isEmpty(db)
		if err != nil {
			return false, readErr(dir, err)
		}
		if !empty {
			return false, &CorruptError{Dir: dir, Reason: "format marker missing"}
		}
		log.Warn("dedupe: finishing interrupted store creation", "dir", dir)
	}
	if err := db.Set(formatKey, formatValue, pebble.Sync); err != nil {
		return false, fmt.Errorf("dedupe: write format marker: %w", err)
	}
	return false, nil
}

// upgradeV1 records that every log entry of a version 1 store, all written
// before this run, is indexed, and marks the store as version 2.
func upgradeV1(db *pebble.DB, run uint64) error {
	b := db.NewBatch()
	defer b.Close()
	_ = b.Set(indexedKey, binary.BigEndian.AppendUint64(nil, run<<seqRunShift), nil)
	_ = b.Set(formatKey, formatValue, nil)
	return b.Commit(pebble.Sync)
}

// nextRun bumps and returns the persisted run counter that keeps
// expiry-log sequence numbers unique across restarts. It is synced: a run
// number reused after a crash could overwrite another run's log entries.
func nextRun(db *pebble.DB) (uint64, error) {
	var run uint64
	v, closer, err := db.Get(runKey)
	switch {
	case err == nil:
		if len(v) != 8 {
			_ = closer.Close()
			return 0, pebble.ErrCorruption
		}
		run = binary.BigEndian.Uint64(v)
		_ = closer.Close()
	case !errors.Is(err, pebble.ErrNotFound):
		return 0, err
	}
	run++
	if err := db.Set(runKey, binary.BigEndian.AppendUint64(nil, run), pebble.Sync); err != nil {
		return 0, err
	}
	return run, nil
}

func isEmpty(db *pebble.DB) (bool, error) {
	it, err := db.NewIter(nil)
	if err != nil {
		return false, err
	}
	has := it.First()
	if err := it.Close(); err != nil {
		return false, err
	}
	return !has, nil
}

// readErr classifies a pebble read error: checksum failures and missing
// files mean the store is corrupt.
func readErr(dir string, err error) error {
	if pebble.IsCorruptionError(err) {
		return &CorruptError{Dir: dir, Reason: "read failed", Err: err}
	}
	return fmt.Errorf("dedupe: reading %q: %w", dir, err)
}

func pebbleOptions(o *Options) *pebble.Options {
	po := &pebble.Options{
		FS:                 o.FS,
		Comparer:           comparer,
		CacheSize:          o.CacheSize,
		MemTableSize:       o.MemTableSize,
		FormatMajorVersion: pebble.FormatNewest,
		Logger:             pebbleLogger{o.Logger},
		EventListener: &pebble.EventListener{
			// Pebble's default is Fatalf. The failing read already returns
			// the error (as ErrCorrupt), so log it and let the caller decide.
			DataCorruption: func(info pebble.DataCorruptionInfo) {
				o.Logger.Error("dedupe: data corruption", "info", info.String())
			},
			BackgroundError: func(err error) {
				o.Logger.Error("dedupe: pebble background error", "err", err)
			},
		},
	}
	// Most lookups are misses (new event IDs), so every level gets a bloom
	// filter on the ID prefix; lookups also opt into L6 filters.
	for i := range po.Levels {
		po.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	return po
}

// pebbleLogger routes pebble's logging to slog. Pebble's Info messages are
// routine (WAL recovery, compactions) and go to Debug.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	if !p.l.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	p.l.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
}

// Fatalf is called on unrecoverable internal errors; pebble expects it not
// to return.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.l.Error(msg, "component", "pebble")
	panic(msg)
}
