package statestore

import (
	"bytes"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// FuzzDecodeCheckpoint: a stored checkpoint is read back exactly, and any
// other bytes are ErrCorrupt, never a panic or an invented offset.
func FuzzDecodeCheckpoint(f *testing.F) {
	f.Fuzz(func(t *testing.T, v []byte) {
		c, err := decodeCheckpoint(v)
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			return
		}
		require.GreaterOrEqual(t, c.Next, int64(0))
		require.Equal(t, v, appendCheckpoint(nil, c), "only what SetCheckpoint writes may decode")
	})
}

// FuzzStoredValues plants arbitrary bytes where the store keeps its format
// marker and a checkpoint, as a damaged disk would, and reopens it: Open
// and Checkpoint fail with ErrCorrupt or read what was planted, and never
// panic.
func FuzzStoredValues(f *testing.F) {
	f.Fuzz(func(t *testing.T, marker, checkpoint, data []byte) {
		fs := vfs.NewMem()
		s, err := Open("db", &Options{FS: fs})
		require.NoError(t, err)
		p := Partition{Topic: "in", Partition: 3}
		require.NoError(t, s.db.Set(p.ns([]byte{prefixCheckpoint}), checkpoint, pebble.NoSync))
		require.NoError(t, s.db.Set(p.dataKey([]byte("k")), data, pebble.NoSync))
		require.NoError(t, s.db.Set([]byte(formatKey), marker, pebble.NoSync))
		require.NoError(t, s.Close())

		s, err = Open("db", &Options{FS: fs})
		if !bytes.Equal(marker, []byte(formatValue)) {
			require.ErrorIs(t, err, ErrCorrupt)
			return
		}
		require.NoError(t, err)
		defer s.Close()
		c, ok, err := s.Checkpoint(p)
		want, werr := decodeCheckpoint(checkpoint)
		if werr != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			require.False(t, ok)
		} else {
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, want, c)
		}
		v, ok, err := s.Get(p, []byte("k"))
		require.NoError(t, err)
		require.True(t, ok)
		require.True(t, bytes.Equal(data, v), "a value is returned as stored")
	})
}
