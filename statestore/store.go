package statestore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"

	"github.com/onceflow/onceflow/internal/diskguard"
)

// Key layout. Data: 'd' | ns | user key. Checkpoint: 'c' | ns. The
// namespace ns is uvarint(len(topic)) | topic | partition (4 bytes), so one
// partition's keys are one contiguous range.
const (
	prefixData       = 'd'
	prefixCheckpoint = 'c'
	formatKey        = "\x00format"
	formatValue      = "onceflow-statestore/1"
)

// Partition names an input partition.
type Partition struct {
	Topic     string
	Partition int32
}

func (p Partition) ns(dst []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(p.Topic)))
	dst = append(dst, p.Topic...)
	return binary.BigEndian.AppendUint32(dst, uint32(p.Partition))
}

func (p Partition) dataKey(key []byte) []byte {
	return append(p.ns([]byte{prefixData}), key...)
}

// dataRange returns the bounds of the partition's data keys with prefix.
func (p Partition) dataRange(prefix []byte) (lo, hi []byte) {
	lo = append(p.ns([]byte{prefixData}), prefix...)
	return lo, prefixEnd(lo)
}

func prefixEnd(b []byte) []byte {
	end := bytes.Clone(b)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i]++; end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil // all 0xff: no upper bound
}

// Checkpoint says how far the changelog has been applied for a partition.
type Checkpoint struct {
	TopicID [16]byte // the changelog topic's ID: a recreated topic does not match
	Next    int64    // the next changelog offset to apply
}

// Write is one change: Value nil with Delete set removes the key.
type Write struct {
	Key, Value []byte
	Delete     bool
}

// Store is a Pebble database holding every partition's state. It is safe
// for concurrent use, except that Close must not overlap other calls. A
// processor's store (processor.WithStateStore) is the processor's while it
// runs; open it yourself only when no processor has it open, to inspect
// it, say.
type Store struct {
	db     *pebble.DB
	dir    string
	guard  *diskguard.FS // the first failed write, which stops all writes
	sync   *pebble.WriteOptions
	closed atomic.Bool
	// writeMu makes the guard's check and the commit after it one step:
	// Pebble's fatal paths are met by the commit after a failed write,
	// never by one that checked first.
	writeMu sync.Mutex
	// ahead is the sync requested after the last unsynced batch, not yet
	// waited for (under writeMu): see Batch.Commit.
	ahead diskguard.SyncAhead
}

// Open opens or creates the store in dir. A directory that holds files but
// not a statestore fails with ErrCorrupt.
func Open(dir string, opts *Options) (*Store, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	o.EnsureDefaults()
	guard := diskguard.Wrap(o.FS)
	names, err := o.FS.List(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("statestore: listing %s: %w", dir, err)
	}
	fresh := len(names) == 0
	po := &pebble.Options{
		FS:               guard,
		Cache:            pebble.NewCache(o.CacheSize),
		ErrorIfNotExists: !fresh,
		Logger:           pebbleLogger{o.Logger, dir},
	}
	defer po.Cache.Unref()
	for i := range po.Levels {
		po.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	s := &Store{dir: dir, guard: guard, sync: pebble.NoSync}
	if o.Sync {
		s.sync = pebble.Sync
	}
	err = s.guarded(func() (err error) {
		s.db, err = pebble.Open(dir, po)
		return err
	})
	if err != nil {
		// A disk that refuses writes (read-only, full, failing) says
		// nothing about the store's contents: calling it corrupt would
		// tell the operator to delete a good store.
		if !fresh && guard.Err() == nil && !isEnvError(err) {
			return nil, fmt.Errorf("%w: opening %s: %v", ErrCorrupt, dir, err)
		}
		return nil, fmt.Errorf("statestore: opening %s: %w", dir, err)
	}
	if err := s.checkFormat(fresh); err != nil {
		_ = s.db.Close()
		return nil, err
	}
	return s, nil
}

// guarded runs write, a Pebble call that may write, under writeMu and the
// guard (diskguard.FS.Do).
func (s *Store) guarded(write func() error) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	return s.guard.Do(write)
}

// isEnvError reports errors of the environment, not of the store's
// contents: permissions, a read-only or full disk, I/O errors, a lock
// held, resource limits.
func isEnvError(err error) bool {
	for _, e := range []error{os.ErrPermission, syscall.EROFS, syscall.ENOSPC, syscall.EDQUOT, syscall.EIO,
		syscall.EAGAIN, syscall.EACCES, syscall.EMFILE, syscall.ENFILE} {
		if errors.Is(err, e) {
			return true
		}
	}
	// Pebble's in-process double-open check has no sentinel.
	return strings.Contains(err.Error(), "lock held by current process")
}

func (s *Store) checkFormat(fresh bool) error {
	v, closer, err := s.db.Get([]byte(formatKey))
	switch {
	case errors.Is(err, pebble.ErrNotFound) && fresh:
		if err := s.guarded(func() error { return s.db.Set([]byte(formatKey), []byte(formatValue), pebble.Sync) }); err != nil {
			return fmt.Errorf("statestore: writing the format marker to %s: %w", s.dir, err)
		}
		return nil
	case errors.Is(err, pebble.ErrNotFound):
		return corrupt("format marker missing")
	case err != nil && !pebble.IsCorruptionError(err):
		return fmt.Errorf("statestore: reading the format marker in %s: %w", s.dir, err)
	case err != nil:
		return fmt.Errorf("%w: reading format marker: %v", ErrCorrupt, err)
	}
	defer closer.Close()
	if string(v) != formatValue {
		return corrupt("unknown format %q", v)
	}
	return nil
}

// Close closes the store. Later calls, Close included, return ErrClosed.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return ErrClosed
	}
	s.writeMu.Lock()
	_ = s.ahead.Wait() // its batch must not outlive the database; a failure is the guard's
	s.writeMu.Unlock()
	return s.db.Close()
}

// Get returns a copy of key's committed value in the partition.
func (s *Store) Get(p Partition, key []byte) ([]byte, bool, error) {
	if s.closed.Load() {
		return nil, false, ErrClosed
	}
	v, closer, err := s.db.Get(p.dataKey(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, s.readErr("reading", err)
	}
	defer closer.Close()
	return bytes.Clone(v), true, nil
}

// Scan calls fn for each committed key with the prefix, in key order,
// until fn returns false.
func (s *Store) Scan(p Partition, prefix []byte, fn func(key, value []byte) bool) error {
	if s.closed.Load() {
		return ErrClosed
	}
	lo, hi := p.dataRange(prefix)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return s.readErr("scanning", err)
	}
	nsLen := len(lo) - len(prefix)
	for valid := it.First(); valid; valid = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return s.readErr("scanning", err)
		}
		if !fn(it.Key()[nsLen:], v) {
			break
		}
	}
	// A read that failed ends the iteration early, and only Close (or
	// Error) tells: unchecked, a failed scan would look like a short one.
	if err := it.Close(); err != nil {
		return s.readErr("scanning", err)
	}
	return nil
}

// Checkpoint returns how far the partition's changelog has been applied.
func (s *Store) Checkpoint(p Partition) (Checkpoint, bool, error) {
	if s.closed.Load() {
		return Checkpoint{}, false, ErrClosed
	}
	v, closer, err := s.db.Get(p.ns([]byte{prefixCheckpoint}))
	if errors.Is(err, pebble.ErrNotFound) {
		return Checkpoint{}, false, nil
	}
	if err != nil {
		return Checkpoint{}, false, s.readErr("reading the checkpoint of "+p.Topic+"/"+strconv.Itoa(int(p.Partition))+" in", err)
	}
	defer closer.Close()
	c, err := decodeCheckpoint(v)
	if err != nil {
		return Checkpoint{}, false, fmt.Errorf("checkpoint of %s/%d: %w", p.Topic, p.Partition, err)
	}
	return c, true, nil
}

// checkpointLen is the encoded size: topic ID, then Next big-endian.
const checkpointLen = 16 + 8

func appendCheckpoint(dst []byte, c Checkpoint) []byte {
	dst = append(dst, c.TopicID[:]...)
	return binary.BigEndian.AppendUint64(dst, uint64(c.Next))
}

// decodeCheckpoint reads a stored checkpoint; bytes it cannot have written
// (another length, a negative offset) are ErrCorrupt.
func decodeCheckpoint(v []byte) (Checkpoint, error) {
	if len(v) != checkpointLen {
		return Checkpoint{}, corrupt("checkpoint has %d bytes", len(v))
	}
	var c Checkpoint
	copy(c.TopicID[:], v)
	c.Next = int64(binary.BigEndian.Uint64(v[16:]))
	if c.Next < 0 {
		return Checkpoint{}, corrupt("checkpoint offset %d", c.Next)
	}
	return c, nil
}

// Batch collects writes and checkpoints to apply atomically.
type Batch struct {
	b *pebble.Batch
	s *Store
}

// NewBatch starts a batch.
func (s *Store) NewBatch() *Batch { return &Batch{b: s.db.NewBatch(), s: s} }

// Write adds writes for a partition.
func (b *Batch) Write(p Partition, ws ...Write) {
	for _, w := range ws {
		k := p.dataKey(w.Key)
		if w.Delete {
			_ = b.b.Delete(k, nil)
		} else {
			_ = b.b.Set(k, w.Value, nil)
		}
	}
}

// SetCheckpoint records how far the partition's changelog is applied.
func (b *Batch) SetCheckpoint(p Partition, c Checkpoint) {
	_ = b.b.Set(p.ns([]byte{prefixCheckpoint}), appendCheckpoint(nil, c), nil)
}

// Reset drops every key and the checkpoint of a partition, before a
// rebuild from the start of its changelog.
func (b *Batch) Reset(p Partition) {
	lo, hi := p.dataRange(nil)
	_ = b.b.DeleteRange(lo, hi, nil)
	_ = b.b.Delete(p.ns([]byte{prefixCheckpoint}), nil)
}

// Commit applies the batch atomically. A batch is committed once.
//
// After a write of the store failed (a full, read-only or failing disk),
// Commit and every later one return an error naming the directory and
// the failed write, and the store takes no more writes: Pebble cannot go
// on after a failed write of its log, and its data on disk is left as it
// was before the failure, which a restart recovers.
func (b *Batch) Commit() error {
	s := b.s
	if s.closed.Load() {
		b.b.Close()
		return ErrClosed
	}
	var started, finished bool
	err := s.guarded(func() error {
		// An unsynced batch requests a sync that the next one waits
		// for (diskguard.SyncAhead): a failed disk stops the writes
		// before a log rotation meets it.
		if err := s.ahead.Wait(); err != nil {
			return err
		}
		started = true
		err := b.b.Commit(s.sync)
		finished = true
		if err != nil || s.sync.Sync {
			return err
		}
		return s.ahead.Request(s.db)
	})
	if !started || finished { // a batch whose commit panicked may still be Pebble's
		b.b.Close()
	}
	if err != nil {
		return fmt.Errorf("statestore: writing a batch to %s: %w", s.dir, err)
	}
	return nil
}

// readErr names the directory and the read in a failed read's error.
func (s *Store) readErr(op string, err error) error {
	if pebble.IsCorruptionError(err) {
		return fmt.Errorf("%w: %s %s: %v", ErrCorrupt, op, s.dir, err)
	}
	return fmt.Errorf("statestore: %s %s: %w", op, s.dir, err)
}

type pebbleLogger struct {
	l   interface{ Error(string, ...any) }
	dir string
}

func (pebbleLogger) Infof(string, ...any) {}
func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
}

// Fatalf: Pebble must not go on. The panic reaches the commit that met
// the failure (Batch.Commit turns it into an error) or, in Pebble's
// background work, ends the process, naming the store.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...), "component", "pebble", "fatal", true, "dir", p.dir)
	panic(fmt.Sprintf("statestore %s: %s", p.dir, fmt.Sprintf(format, args...)))
}
