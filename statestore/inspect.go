package statestore

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"

	"github.com/cockroachdb/pebble/v2"
)

// Summary is one partition's part of a store, as Inspect reports it.
type Summary struct {
	Partition Partition
	// Keys and Bytes count the partition's state entries and the bytes
	// of their keys and values.
	Keys, Bytes int64
	// FirstKey and LastKey are its lowest and highest state keys (nil
	// when it has none).
	FirstKey, LastKey []byte
	// Checkpoint is how far its changelog is applied; HasCheckpoint is
	// false when it has none (the next restore replays the whole
	// changelog), and CheckpointErr is set when it cannot be read.
	Checkpoint    Checkpoint
	HasCheckpoint bool
	CheckpointErr error
}

// Inspect reads a stopped processor's store without changing it (Pebble's
// read-only mode: no format marker written to a new directory, no flush,
// no compaction) and summarizes every partition it holds, by topic and partition. A
// directory without a store fails with an error matching os.ErrNotExist;
// one that is not a statestore, or whose keys cannot be read, with
// ErrCorrupt. A store another process has open fails: Pebble locks it.
func Inspect(dir string, opts *Options) (format string, parts []Summary, err error) {
	if err := opts.Validate(); err != nil {
		return "", nil, err
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	o.EnsureDefaults()
	names, err := o.FS.List(dir)
	if err != nil || len(names) == 0 {
		if err == nil {
			err = os.ErrNotExist
		}
		return "", nil, fmt.Errorf("statestore: no store in %s: %w", dir, err)
	}
	po := &pebble.Options{FS: o.FS, ReadOnly: true, ErrorIfNotExists: true, Logger: pebbleLogger{o.Logger, dir}}
	db, err := pebble.Open(dir, po)
	if err != nil {
		// Another process holds the directory's lock (flock: EAGAIN),
		// or this one does (Pebble says so in words).
		if errors.Is(err, syscall.EAGAIN) || strings.Contains(err.Error(), "lock held") {
			return "", nil, fmt.Errorf("%w: %s: %v", ErrInUse, dir, err)
		}
		return "", nil, fmt.Errorf("%w: opening %s read-only: %v", ErrCorrupt, dir, err)
	}
	defer db.Close()
	v, closer, err := db.Get([]byte(formatKey))
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		return "", nil, corrupt("format marker missing")
	case err != nil:
		return "", nil, fmt.Errorf("%w: reading the format marker: %v", ErrCorrupt, err)
	}
	format = string(v)
	closer.Close()
	if format != formatValue {
		return format, nil, corrupt("unknown format %q", format)
	}
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixCheckpoint}, UpperBound: []byte{prefixData + 1}})
	if err != nil {
		return format, nil, err
	}
	defer it.Close()
	byNS := map[Partition]int{}
	for valid := it.First(); valid; valid = it.Next() {
		k := it.Key()
		p, rest, ok := decodeNS(k[1:])
		if !ok {
			return format, parts, corrupt("key %q has no partition namespace", k)
		}
		i, seen := byNS[p]
		if !seen {
			i = len(parts)
			byNS[p] = i
			parts = append(parts, Summary{Partition: p})
		}
		s := &parts[i]
		val, err := it.ValueAndErr()
		if err != nil {
			return format, parts, fmt.Errorf("%w: reading %q: %v", ErrCorrupt, k, err)
		}
		switch k[0] {
		case prefixCheckpoint:
			if len(rest) != 0 {
				return format, parts, corrupt("checkpoint key %q has trailing bytes", k)
			}
			s.HasCheckpoint = true
			s.Checkpoint, s.CheckpointErr = decodeCheckpoint(val)
		case prefixData:
			s.Keys++
			s.Bytes += int64(len(rest) + len(val))
			if s.FirstKey == nil {
				s.FirstKey = bytes.Clone(rest)
			}
			s.LastKey = bytes.Clone(rest)
		}
	}
	if err := it.Error(); err != nil {
		return format, parts, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	slices.SortFunc(parts, func(a, b Summary) int {
		return cmp.Or(cmp.Compare(a.Partition.Topic, b.Partition.Topic), cmp.Compare(a.Partition.Partition, b.Partition.Partition))
	})
	return format, parts, nil
}

// decodeNS reads a partition namespace (see Partition.ns) off b.
func decodeNS(b []byte) (Partition, []byte, bool) {
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)-w) || len(b)-w-int(n) < 4 {
		return Partition{}, nil, false
	}
	b = b[w:]
	p := Partition{Topic: string(b[:n]), Partition: int32(binary.BigEndian.Uint32(b[n:]))}
	return p, b[n+4:], true
}
