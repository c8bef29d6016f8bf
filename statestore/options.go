package statestore

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Options configures a Store: pass them to Open, or to
// processor.WithStateStore for a processor's store. A nil *Options and the
// zero value are usable: Open fills in every unset field with its default.
type Options struct {
	// FS is the file system; vfs.NewMem() for tests. Default vfs.Default,
	// the operating system's.
	FS vfs.FS
	// CacheSize is Pebble's block cache in bytes; Kafka Streams gives each
	// RocksDB store a 50 MiB one, changed through rocksdb.config.setter.
	// Zero: the default, DefaultCacheSize; negative is invalid.
	CacheSize int64
	// Sync makes every batch durable before Batch.Commit returns. The
	// store only ever holds committed data and is replayed from the
	// changelog after a crash, so losing the last unsynced batches costs a
	// longer restore, never correctness (Kafka Streams writes RocksDB
	// without its write-ahead log for the same reason). Default false.
	Sync bool
	// Logger receives Pebble's errors. Default: discard.
	Logger *slog.Logger
}

// DefaultCacheSize is Options.CacheSize's default, 64 MiB.
const DefaultCacheSize = 64 << 20

// EnsureDefaults fills in zero fields with their defaults and returns o.
func (o *Options) EnsureDefaults() *Options {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.CacheSize == 0 {
		o.CacheSize = DefaultCacheSize
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return o
}

// Validate reports whether Open accepts o, with an error matching
// ErrInvalidOptions if it does not. Zero fields count as their defaults; o
// is not changed. A nil o is valid (Open's defaults).
func (o *Options) Validate() error {
	if o == nil {
		return nil
	}
	if o.CacheSize < 0 {
		return fmt.Errorf("%w: CacheSize %d is negative", ErrInvalidOptions, o.CacheSize)
	}
	return nil
}
