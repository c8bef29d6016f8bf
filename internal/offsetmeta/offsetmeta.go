// Package offsetmeta encodes which records above a committed offset are
// already done, in the metadata string of the same transactional offset
// commit, so that a restarted or new owner of the partition skips exactly
// those records and nothing else.
//
// Format: "of1:" followed by unpadded base64url of
//
//	version byte (1) | uvarint pairs (pending, done)...
//
// Starting at the committed offset, each pair says how many offsets are not
// done and then how many are done. Offsets past the last pair are not done.
// Offsets that hold no record (transaction markers, compacted records) may
// be counted in either kind of run; the encoder puts them in done runs,
// which keeps runs long.
package offsetmeta

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// Prefix marks onceflow's commit metadata; other metadata is foreign.
const Prefix = "of1:"

const version = 1

// maxRanges bounds what a decoder accepts, so hostile metadata cannot make
// it allocate without limit (4 KiB of metadata holds far fewer).
const maxRanges = 1 << 16

// ErrForeign means the metadata was not written by onceflow (for example the
// member ID that franz-go writes by default, or another tool's data).
var ErrForeign = errors.New("offsetmeta: metadata not written by onceflow")

// ErrCorrupt means the metadata carries onceflow's prefix but cannot be read.
var ErrCorrupt = errors.New("offsetmeta: corrupt onceflow commit metadata")

// Range is a half-open range [Start, End) of offsets that are done.
type Range struct{ Start, End int64 }

// Encode returns the metadata for done ranges above base. Ranges must be
// sorted, non-overlapping, non-empty and at or above base. An empty list
// encodes to "" (nothing above base is done).
func Encode(base int64, done []Range) string {
	if len(done) == 0 {
		return ""
	}
	return Prefix + base64.RawURLEncoding.EncodeToString(AppendBinary(nil, base, done))
}

// EncodedLen returns len(Encode(base, done)) without building the string.
func EncodedLen(base int64, done []Range) int {
	if len(done) == 0 {
		return 0
	}
	return EncodedLenOf(BinaryLen(base, done))
}

// BinaryLen returns len(AppendBinary(nil, base, done)).
func BinaryLen(base int64, done []Range) int {
	n := 1
	at := base
	for _, r := range done {
		n += UvarintLen(uint64(r.Start-at)) + UvarintLen(uint64(r.End-r.Start))
		at = r.End
	}
	return n
}

// EncodedLenOf returns the metadata length of a binary form of n bytes.
func EncodedLenOf(n int) int { return len(Prefix) + base64.RawURLEncoding.EncodedLen(n) }

// AppendBinary appends the binary form (before base64) to dst.
func AppendBinary(dst []byte, base int64, done []Range) []byte {
	dst = append(dst, version)
	at := base
	for _, r := range done {
		dst = binary.AppendUvarint(dst, uint64(r.Start-at))
		dst = binary.AppendUvarint(dst, uint64(r.End-r.Start))
		at = r.End
	}
	return dst
}

// Decode parses metadata committed at base. Empty metadata means nothing
// above base is done. Metadata without onceflow's prefix returns ErrForeign;
// malformed onceflow metadata returns an error wrapping ErrCorrupt.
func Decode(base int64, meta string) ([]Range, error) {
	if meta == "" {
		return nil, nil
	}
	rest, ok := strings.CutPrefix(meta, Prefix)
	if !ok {
		return nil, ErrForeign
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return DecodeBinary(base, b)
}

// DecodeBinary parses the binary form.
func DecodeBinary(base int64, b []byte) ([]Range, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: empty", ErrCorrupt)
	}
	if b[0] != version {
		return nil, fmt.Errorf("%w: unknown version %d", ErrCorrupt, b[0])
	}
	b = b[1:]
	var out []Range
	at := base
	for len(b) > 0 {
		if len(out) == maxRanges {
			return nil, fmt.Errorf("%w: more than %d ranges", ErrCorrupt, maxRanges)
		}
		pending, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, fmt.Errorf("%w: bad pending run", ErrCorrupt)
		}
		b = b[n:]
		done, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, fmt.Errorf("%w: bad done run", ErrCorrupt)
		}
		b = b[n:]
		if done == 0 || (len(out) > 0 && pending == 0) {
			return nil, fmt.Errorf("%w: empty run", ErrCorrupt)
		}
		const maxRun = 1 << 62
		if pending > maxRun || done > maxRun || at > maxRun-int64(pending)-int64(done) {
			return nil, fmt.Errorf("%w: offset overflow", ErrCorrupt)
		}
		start := at + int64(pending)
		at = start + int64(done)
		out = append(out, Range{start, at})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no ranges", ErrCorrupt)
	}
	return out, nil
}

// UvarintLen returns the encoded length of v.
func UvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}
