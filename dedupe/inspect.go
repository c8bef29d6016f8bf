package dedupe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// ErrInUse is returned by OpenView for a store that a process has open.
var ErrInUse = errors.New("dedupe: store in use by another process (stop the instance first)")

// View reads a stopped store without changing it, for inspection tools
// (cmd/onceflow's "dedupe inspect"): Pebble's read-only mode writes no
// format marker, run counter or index, and neither flushes nor compacts.
// It sees the marks as they are on disk: those an indexing round wrote to
// the index, and those still only in the expiry log (a store closed
// without its last round, as after a crash), which the next Open indexes.
type View struct {
	db        *pebble.DB
	win       window
	format    string
	runs      uint64
	watermark uint64 // the last log sequence number the index covers
}

// OpenView opens the store in dir read-only. opts gives the TTL and bucket
// width the store was written with (nil: the defaults); nothing else of it
// is used. A directory without a store fails with an error matching
// os.ErrNotExist, a store another process has open with ErrInUse, anything
// else that is not a readable dedupe store with ErrCorrupt or
// ErrIncompatible.
func OpenView(dir string, opts *Options) (*View, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o.EnsureDefaults()
	if fresh, err := isFresh(o.FS, dir); err != nil || fresh {
		if err == nil {
			err = os.ErrNotExist
		}
		return nil, fmt.Errorf("dedupe: no store in %q: %w", dir, err)
	}
	po := pebbleOptions(&o)
	po.ReadOnly, po.ErrorIfNotExists = true, true
	db, err := pebble.Open(dir, po)
	if err != nil {
		// Another process holds the lock (flock: EAGAIN), or this one
		// does (Pebble says so in words).
		if errors.Is(err, syscall.EAGAIN) || strings.Contains(err.Error(), "lock held") {
			return nil, fmt.Errorf("%w: %q: %v", ErrInUse, dir, err)
		}
		return nil, &CorruptError{Dir: dir, Reason: "cannot open database read-only", Err: err}
	}
	v := &View{db: db, win: window{ttl: o.TTL, width: o.BucketWidth}}
	if err := v.load(dir); err != nil {
		_ = db.Close()
		return nil, err
	}
	return v, nil
}

// load reads the format marker, run counter and indexing watermark.
func (v *View) load(dir string) error {
	get := func(k []byte) ([]byte, error) {
		val, closer, err := v.db.Get(k)
		if errors.Is(err, pebble.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, readErr(dir, err)
		}
		defer closer.Close()
		return append([]byte(nil), val...), nil
	}
	f, err := get(formatKey)
	if err != nil {
		return err
	}
	switch v.format = string(f); v.format {
	case string(formatValue):
	case string(formatValueV1):
		v.watermark = ^uint64(0) // version 1 indexed every mark as it wrote it
	case "":
		return &CorruptError{Dir: dir, Reason: "format marker missing"}
	default:
		return &FormatError{Dir: dir, Found: v.format, Version: formatVersion}
	}
	run, err := get(runKey)
	if err != nil {
		return err
	}
	if len(run) == 8 {
		v.runs = binary.BigEndian.Uint64(run)
	}
	w, err := get(indexedKey)
	switch {
	case err != nil:
		return err
	case w == nil:
	case len(w) != 8:
		return &CorruptError{Dir: dir, Reason: "malformed index watermark"}
	default:
		v.watermark = binary.BigEndian.Uint64(w)
	}
	return nil
}

// Format is the store's format marker ("onceflow-dedupe/2").
func (v *View) Format() string { return v.format }

// Opens is how many times the store was opened (its run counter).
func (v *View) Opens() uint64 { return v.runs }

// LiveFrom is the start of the oldest bucket still inside the retention
// window at now: marks made before it are expired, and Seen no longer
// reports them, though expiry may not have deleted them yet.
func (v *View) LiveFrom(now time.Time) time.Time { return v.bucketStart(v.win.minLive(now)) }

func (v *View) bucketStart(b uint64) time.Time {
	return time.Unix(0, int64(b)*int64(v.win.width))
}

// Marks calls fn for each indexed mark, by ID: the start of the bucket it
// was made in (an ID marked in several buckets comes once per bucket,
// newest first). An error from fn stops it and is returned.
func (v *View) Marks(fn func(id []byte, markedIn time.Time) error) error {
	it, err := v.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tagIndex}, UpperBound: indexedKey})
	if err != nil {
		return err
	}
	defer it.Close()
	for valid := it.First(); valid; valid = it.Next() {
		k := it.Key()
		p := split(k)
		b, ok := indexBucket(k, p)
		if !ok || p < 2 {
			return &CorruptError{Reason: fmt.Sprintf("malformed index key %q", k)}
		}
		_, w := binary.Uvarint(k[1:])
		if err := fn(k[1+w:p], v.bucketStart(b)); err != nil {
			return err
		}
	}
	return it.Error()
}

// Unindexed calls fn for each mark still only in the expiry log (written
// after the last indexing round the store finished), with the start of its
// bucket. An ID may come more than once, and may also be indexed.
func (v *View) Unindexed(fn func(id []byte, markedIn time.Time) error) error {
	if v.watermark == ^uint64(0) {
		return nil
	}
	it, err := v.db.NewIter(&pebble.IterOptions{LowerBound: []byte{tagLog}, UpperBound: []byte{tagLog + 1}})
	if err != nil {
		return err
	}
	defer it.Close()
	for valid := it.First(); valid; valid = it.Next() {
		b, seq, ok := decodeLogKeySeq(it.Key())
		if !ok {
			return &CorruptError{Reason: "malformed expiry log key"}
		}
		if seq <= v.watermark {
			continue
		}
		val, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		var ferr error
		if !decodeLogValue(val, func(id []byte) {
			if ferr == nil {
				ferr = fn(id, v.bucketStart(b))
			}
		}) {
			return &CorruptError{Reason: "malformed expiry log entry"}
		}
		if ferr != nil {
			return ferr
		}
	}
	return it.Error()
}

// Metas calls fn for each metadata value written with Batch.SetMeta, by
// key.
func (v *View) Metas(fn func(key, value []byte) error) error {
	lo := metaKey(nil)
	it, err := v.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: []byte{tagMeta, 1}})
	if err != nil {
		return err
	}
	defer it.Close()
	for valid := it.First(); valid; valid = it.Next() {
		val, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		if err := fn(it.Key()[len(lo):], val); err != nil {
			return err
		}
	}
	return it.Error()
}

// Close releases the store.
func (v *View) Close() error { return v.db.Close() }
