package statestore

import (
	"io"
	"log/slog"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Options configures a Store. The zero value is usable: EnsureDefaults
// fills in what is unset.
type Options struct {
	// FS is the file system; vfs.NewMem() for tests. Default vfs.Default.
	FS vfs.FS
	// CacheSize is Pebble's block cache in bytes. Default 64 MiB.
	CacheSize int64
	// Sync makes every applied batch durable before Apply returns.
	// The store only ever holds committed data and is replayed from the
	// changelog after a crash, so losing the last unsynced batches costs
	// a longer restore, never correctness. Default false.
	Sync bool
	// Logger receives Pebble's errors. Default: discard.
	Logger *slog.Logger
}

// EnsureDefaults fills unset fields with their defaults and returns o.
func (o *Options) EnsureDefaults() *Options {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.CacheSize == 0 {
		o.CacheSize = 64 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return o
}
