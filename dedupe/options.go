package dedupe

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Defaults applied by Options.EnsureDefaults.
const (
	DefaultTTL          = 7 * 24 * time.Hour
	DefaultBucketWidth  = time.Hour
	DefaultMaxIDLen     = 256
	DefaultCacheSize    = 64 << 20
	DefaultMemTableSize = 16 << 20

	// maxIDLenLimit bounds Options.MaxIDLen so that keys stay well below
	// pebble's practical key sizes.
	maxIDLenLimit = 64 << 10
)

// Clock supplies the current time. Tests inject a fake clock to drive
// retention and expiry deterministically. A processor.Clock is a Clock.
type Clock interface {
	Now() time.Time
}

// ClockFunc adapts a function to the Clock interface.
type ClockFunc func() time.Time

// Now implements Clock.
func (f ClockFunc) Now() time.Time { return f() }

// Options configures a Store. The zero value is usable: Open calls
// EnsureDefaults on a copy.
type Options struct {
	// FS is the filesystem the store lives on. Default vfs.Default. Tests use
	// vfs.NewMem or vfs.NewCrashableMem.
	FS vfs.FS

	// TTL is the retention window: an ID is reported as seen for at least TTL
	// after its latest mark. Default DefaultTTL (7 days).
	TTL time.Duration

	// BucketWidth is the granularity of expiry. Marks are grouped by the
	// bucket of their mark time and a bucket is dropped as a whole once all of
	// it is older than TTL, so an ID is reported as seen for at most
	// TTL+BucketWidth. Smaller buckets mean tighter retention and more, smaller
	// expiry runs; the width does not affect lookup cost. Default
	// DefaultBucketWidth (1 hour).
	BucketWidth time.Duration

	// Sync selects durability. If true, every write (Mark, Claim that marks,
	// Once's mark, ApplyMarks, Forget) fsyncs the write-ahead log before it
	// returns, so a returned mark survives a process or machine crash. If
	// false (the default), writes reach the WAL buffer and are written out
	// asynchronously: a crash can lose the most recent marks (a few
	// milliseconds' worth), never older ones, and never corrupts the store.
	// Callers that batch (ClaimBatch, Mark with many IDs) pay one fsync per
	// call.
	Sync bool

	// SyncOnce fsyncs the marks of Once even when Sync is false, so that a
	// returned Once survives a crash while other writes stay cheap: for a
	// store whose bulk marks can be replayed from elsewhere (a processor's
	// changelog) but whose effect marks cannot.
	SyncOnce bool

	// MaxIDLen is the largest accepted event ID in bytes; longer IDs fail
	// with an *IDTooLongError. Default DefaultMaxIDLen (256). At most 65536.
	MaxIDLen int

	// Clock supplies mark and expiry times. Default: the system clock.
	// processor.WithDedupe sets it to the processor's clock
	// (processor.WithClock), and rejects options that set it.
	Clock Clock

	// Logger receives store and pebble diagnostics. Pebble's informational
	// messages are logged at Debug level. Default slog.Default().
	Logger *slog.Logger

	// CacheSize is the pebble block cache size in bytes. Memtables are
	// reserved out of it, so it should be well above 2*MemTableSize.
	// Default DefaultCacheSize (64 MiB).
	CacheSize int64

	// MemTableSize is the pebble memtable size in bytes. Larger memtables
	// absorb more writes before flushing; smaller ones keep the in-memory
	// skiplist cache-friendly. Index batches of more than half of it are
	// committed without skiplist inserts, which the default indexing round
	// size assumes. Default DefaultMemTableSize (16 MiB).
	MemTableSize uint64

	// DisableFilter turns off the in-memory filter that answers most
	// lookups of unmarked IDs without reading pebble. The filter takes 2 to
	// 4 bytes per ID inside the retention window (plus up to one eighth of
	// the window that has just expired); it is built from the expiry log in
	// the background after Open, and lookups read pebble until it is ready.
	// Without it, a Claim of a new ID costs a pebble seek.
	DisableFilter bool

	// DisableAutoExpiry turns off the background expiry run that starts when
	// a write notices that a bucket boundary has passed. ExpireNow still
	// works. Expired IDs are reported as unseen either way; expiry only
	// reclaims space.
	DisableAutoExpiry bool

	// stageLimit and filterMinIDs override the generation size of staged
	// marks and the smallest filter; tests lower them to exercise indexing
	// rounds and filter rebuilds.
	stageLimit, filterMinIDs int
}

// EnsureDefaults fills in zero fields with their defaults and returns o.
func (o *Options) EnsureDefaults() *Options {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.TTL <= 0 {
		o.TTL = DefaultTTL
	}
	if o.BucketWidth <= 0 {
		o.BucketWidth = DefaultBucketWidth
	}
	if o.MaxIDLen <= 0 {
		o.MaxIDLen = DefaultMaxIDLen
	}
	if o.Clock == nil {
		o.Clock = ClockFunc(time.Now)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.CacheSize <= 0 {
		o.CacheSize = DefaultCacheSize
	}
	if o.MemTableSize == 0 {
		o.MemTableSize = DefaultMemTableSize
	}
	if o.stageLimit <= 0 {
		o.stageLimit = stageLimit
	}
	if o.filterMinIDs <= 0 {
		o.filterMinIDs = filterMinIDs
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
	d := *o
	d.EnsureDefaults()
	if d.MaxIDLen > maxIDLenLimit {
		return fmt.Errorf("%w: MaxIDLen %d exceeds limit %d", ErrInvalidOptions, d.MaxIDLen, maxIDLenLimit)
	}
	if d.BucketWidth > d.TTL {
		return fmt.Errorf("%w: BucketWidth %v exceeds TTL %v", ErrInvalidOptions, d.BucketWidth, d.TTL)
	}
	return nil
}
