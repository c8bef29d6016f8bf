package dedupe

import (
	"bytes"
	"encoding/binary"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Key layout. Every key starts with a one-byte tag:
//
//	m<name>                       metadata (format marker, run counter)
//	i<uvarint len(id)><id><^b>    index: id was marked in bucket b
//	j                             indexing watermark (see index.go)
//	x<b><seq>                     expiry log: value lists the IDs of one
//	                              write batch marked in bucket b
//
// b is the bucket number as 8 big-endian bytes; ^b is its bitwise complement,
// so the newest bucket of an id sorts first under its prefix. The index prefix
// (everything before ^b) is what pebble's Split returns, so bloom filters are
// built on the ID and Seen is a single bloom-filtered SeekPrefixGE. The
// length prefix keeps index prefixes prefix-free, which lets plain
// bytes.Compare order keys consistently with Split.
//
// The expiry log is ordered by bucket, so expiry reads exactly the expired
// buckets and drops them with one DeleteRange. It holds one entry per write
// batch rather than per ID, appended at the end of its bucket's range: seq
// increases within a process run. seq is run<<seqRunShift | counter, with
// run persisted and bumped on every Open, so entries never collide across
// restarts and sequence numbers grow across them, which is what the
// indexing watermark (index.go) relies on.
const (
	tagMeta  = 'm'
	tagIndex = 'i'
	tagLog   = 'x'

	suffixLen = 8
)

var (
	formatKey = []byte("mformat")
	runKey    = []byte("mrun")
)

// seqRunShift leaves 2^40 log entries per run.
const seqRunShift = 40

// comparerName is persisted by pebble; opening a store with another comparer
// fails.
const comparerName = "onceflow.dedupe.v1"

// comparer orders keys bytewise; its only job beyond pebble's default is
// Split, which strips the bucket suffix from index keys.
var comparer = &pebble.Comparer{
	Compare:        compareKeys,
	Equal:          bytes.Equal,
	AbbreviatedKey: pebble.DefaultComparer.AbbreviatedKey,
	FormatKey:      pebble.DefaultComparer.FormatKey,
	// Trivial separators: shortened keys would not be valid index keys, and
	// the extra index-block bytes are negligible.
	Separator: func(dst, a, _ []byte) []byte { return append(dst, a...) },
	Successor: func(dst, a []byte) []byte { return append(dst, a...) },
	ImmediateSuccessor: func(dst, a []byte) []byte {
		return append(append(dst, a...), 0)
	},
	Split:                split,
	ComparePointSuffixes: bytes.Compare,
	CompareRangeSuffixes: bytes.Compare,
	Name:                 comparerName,
}

// compareKeys is bytes.Compare with a fast path: index keys share their
// first two bytes and almost always differ within the next six, so most
// comparisons (the bulk of a memtable insert) end after one 8-byte load.
func compareKeys(a, b []byte) int {
	if len(a) >= 8 && len(b) >= 8 {
		x, y := binary.BigEndian.Uint64(a), binary.BigEndian.Uint64(b)
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return bytes.Compare(a, b)
}

// split returns the length of the index prefix of an index key and the full
// length of any other key. It must accept a bare prefix (returning its
// length) and never exceed len(k).
func split(k []byte) int {
	if len(k) < 2 || k[0] != tagIndex {
		return len(k)
	}
	n, w := binary.Uvarint(k[1:])
	if w <= 0 || n > maxIDLenLimit {
		return len(k)
	}
	p := 1 + w + int(n)
	if p > len(k) {
		return len(k)
	}
	return p
}

// appendIndexPrefix appends the index prefix of id to dst.
func appendIndexPrefix(dst, id []byte) []byte {
	dst = append(dst, tagIndex)
	dst = binary.AppendUvarint(dst, uint64(len(id)))
	return append(dst, id...)
}

// appendIndexKey appends the index key of id marked in bucket b.
func appendIndexKey(dst, id []byte, b uint64) []byte {
	dst = appendIndexPrefix(dst, id)
	return binary.BigEndian.AppendUint64(dst, ^b)
}

// appendLogKey appends the expiry-log key of entry seq in bucket b.
func appendLogKey(dst []byte, b, seq uint64) []byte {
	dst = append(dst, tagLog)
	dst = binary.BigEndian.AppendUint64(dst, b)
	return binary.BigEndian.AppendUint64(dst, seq)
}

// logBound returns a key below every log key of bucket b and above every
// log key of older buckets.
func logBound(b uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{tagLog}, b)
}

// decodeLogKey returns the bucket of an expiry-log key.
func decodeLogKey(k []byte) (b uint64, ok bool) {
	if len(k) != 1+2*suffixLen || k[0] != tagLog {
		return 0, false
	}
	return binary.BigEndian.Uint64(k[1:]), true
}

// appendLogID appends one ID to an expiry-log value.
func appendLogID(dst, id []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(id)))
	return append(dst, id...)
}

// decodeLogValue calls fn for each ID in an expiry-log value.
func decodeLogValue(v []byte, fn func(id []byte)) bool {
	for len(v) > 0 {
		n, w := binary.Uvarint(v)
		if w <= 0 || n == 0 || n > uint64(len(v)-w) {
			return false
		}
		fn(v[w : w+int(n)])
		v = v[w+int(n):]
	}
	return true
}

// indexBucket decodes the bucket of an index key whose prefix has length p.
func indexBucket(k []byte, p int) (uint64, bool) {
	if len(k) != p+suffixLen {
		return 0, false
	}
	return ^binary.BigEndian.Uint64(k[p:]), true
}

// window converts times to bucket numbers. Bucket b covers
// [b*width, (b+1)*width) nanoseconds since the Unix epoch.
type window struct {
	ttl, width time.Duration
}

// bucket returns the bucket containing t. Times before the epoch map to 0.
func (w window) bucket(t time.Time) uint64 {
	n := t.UnixNano()
	if n < 0 {
		return 0
	}
	return uint64(n / int64(w.width))
}

// minLive returns the oldest bucket still inside the retention window at
// now. Bucket b is live while (b+1)*width+ttl > now, i.e. while
// b >= floor((now-ttl)/width), so a mark stays visible for at least ttl and
// at most ttl+width.
func (w window) minLive(now time.Time) uint64 {
	return w.bucket(now.Add(-w.ttl))
}
