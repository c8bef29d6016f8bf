package dedupe

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// FuzzKeyDecode feeds arbitrary keys, as read back from Pebble, to every
// key decoder: none may panic, each accepts exactly what its encoder
// writes, and Split and the comparer keep the contract pebble relies on.
func FuzzKeyDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, a, b []byte) {
		for _, k := range [][]byte{a, b} {
			p := split(k)
			require.GreaterOrEqual(t, p, 0)
			require.LessOrEqual(t, p, len(k))
			require.Equal(t, p, split(k[:p]), "Split(prefix) == len(prefix)")
			if bk, seq, ok := decodeLogKeySeq(k); ok {
				require.Equal(t, k, appendLogKey(nil, bk, seq))
			} else {
				require.False(t, len(k) == 1+2*suffixLen && k[0] == tagLog)
			}
			if bk, ok := indexBucket(k, p); ok {
				// Keys the store cannot write (an empty ID, a length in a
				// non-minimal varint) may decode: no real ID's prefix
				// reaches them. Every key it can write decodes exactly.
				n, w := binary.Uvarint(k[1:])
				if n > 0 && w == len(binary.AppendUvarint(nil, n)) {
					require.Equal(t, k, appendIndexKey(nil, k[1+w:p], bk), "index key %x", k)
				}
			}
		}
		require.Equal(t, bytes.Compare(a, b), compareKeys(a, b))
		pa, pb := a[:split(a)], b[:split(b)]
		if pc := bytes.Compare(pa, pb); pc != 0 {
			require.Equal(t, pc, compareKeys(a, b), "prefixes order keys: %x %x", a, b)
		} else {
			require.Equal(t, bytes.Compare(a[len(pa):], b[len(pb):]), compareKeys(a, b), "suffixes break ties")
		}
	})
}

// FuzzIndexKeyRoundTrip: every index key the store can write splits at
// its ID prefix and gives its bucket back.
func FuzzIndexKeyRoundTrip(f *testing.F) {
	f.Fuzz(func(t *testing.T, id []byte, bucket uint64) {
		if len(id) == 0 || len(id) > maxIDLenLimit {
			return
		}
		k := appendIndexKey(nil, id, bucket)
		p := split(k)
		require.Equal(t, appendIndexPrefix(nil, id), k[:p])
		got, ok := indexBucket(k, p)
		require.True(t, ok)
		require.Equal(t, bucket, got)
	})
}

// FuzzLogValue: an expiry-log value decodes to IDs that encode back to
// the same bytes, or is rejected; never a panic.
func FuzzLogValue(f *testing.F) {
	f.Fuzz(func(t *testing.T, v []byte) {
		var again []byte
		if !decodeLogValue(v, func(id []byte) {
			require.NotEmpty(t, id)
			again = appendLogID(again, id)
		}) {
			return
		}
		require.True(t, bytes.Equal(v, again), "%x decoded to %x", v, again)
	})
}

// FuzzOpenPlanted plants arbitrary bytes where a store keeps its format
// marker, run counter, indexing watermark and an expiry-log entry, as a
// damaged disk would, and reopens it. Open either refuses with
// ErrCorrupt or ErrIncompatible, or gives a store that works; it never
// panics and never accepts a malformed counter.
func FuzzOpenPlanted(f *testing.F) {
	f.Fuzz(func(t *testing.T, format, run, watermark, logKey, logValue []byte) {
		fs := vfs.NewMem()
		clock := newFakeClock()
		s := mustOpen(t, "db", testOptions(fs, clock))
		require.NoError(t, s.Mark([]byte("a"), []byte("b")))
		require.NoError(t, s.Close())
		withRawDB(t, fs, func(db *pebble.DB) {
			b := db.NewBatch()
			for _, kv := range [][2][]byte{{formatKey, format}, {runKey, run}, {indexedKey, watermark}} {
				if kv[1] != nil {
					require.NoError(t, b.Set(kv[0], kv[1], nil))
				}
			}
			if len(logKey) > 0 {
				require.NoError(t, b.Set(append([]byte{tagLog}, logKey...), logValue, nil))
			}
			require.NoError(t, b.Commit(pebble.Sync))
		})

		clock.Advance(48 * time.Hour) // past the TTL: expiry reads the log
		s, err := Open("db", testOptions(fs, clock))
		if err != nil {
			require.True(t, errors.Is(err, ErrCorrupt) || errors.Is(err, ErrIncompatible), "%v", err)
			return
		}
		defer func() { require.NoError(t, s.Close()) }()
		validFormat := format == nil || bytes.Equal(format, formatValue) || bytes.Equal(format, formatValueV1)
		require.True(t, validFormat, "opened with format marker %q", format)
		require.True(t, run == nil || len(run) == 8, "opened with run counter %x", run)
		require.True(t, watermark == nil || len(watermark) == 8 || bytes.Equal(format, formatValueV1),
			"opened with watermark %x", watermark)
		_, err = s.Seen([]byte("a"))
		require.NoError(t, err)
		if _, err := s.ExpireNow(context.Background()); err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
		}
	})
}
