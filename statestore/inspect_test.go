package statestore_test

import (
	"crypto/sha256"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/onceflow/onceflow/statestore"
)

// dirDigest hashes every file's name and content under dir.
func dirDigest(t *testing.T, dir string) [32]byte {
	t.Helper()
	h := sha256.New()
	require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		h.Write([]byte(path))
		h.Write(b)
		return err
	}))
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}

// TestInspect: Inspect summarizes each partition (keys, bytes, key range,
// checkpoint) and leaves the directory byte for byte as it was; an empty
// or missing directory is reported, not created.
func TestInspect(t *testing.T) {
	dir := t.TempDir()
	s, err := statestore.Open(dir, nil)
	require.NoError(t, err)
	a := statestore.Partition{Topic: "in", Partition: 1}
	b := statestore.Partition{Topic: "in", Partition: 0}
	batch := s.NewBatch()
	batch.Write(a, statestore.Write{Key: []byte("k1"), Value: []byte("v1")}, statestore.Write{Key: []byte("k3"), Value: []byte("v33")})
	batch.SetCheckpoint(a, statestore.Checkpoint{TopicID: [16]byte{1}, Next: 42})
	batch.Write(b, statestore.Write{Key: []byte("x"), Value: []byte("y")})
	require.NoError(t, batch.Commit())
	require.NoError(t, s.Close())

	before := dirDigest(t, dir)
	format, parts, err := statestore.Inspect(dir, nil)
	require.NoError(t, err)
	require.Equal(t, before, dirDigest(t, dir), "Inspect changed the store's files")
	require.Equal(t, "onceflow-statestore/1", format)
	require.Len(t, parts, 2)
	require.Equal(t, b, parts[0].Partition)
	require.Equal(t, int64(1), parts[0].Keys)
	require.False(t, parts[0].HasCheckpoint)
	require.Equal(t, a, parts[1].Partition)
	require.Equal(t, int64(2), parts[1].Keys)
	require.Equal(t, int64(2+2+2+3), parts[1].Bytes)
	require.Equal(t, "k1", string(parts[1].FirstKey))
	require.Equal(t, "k3", string(parts[1].LastKey))
	require.True(t, parts[1].HasCheckpoint)
	require.NoError(t, parts[1].CheckpointErr)
	require.Equal(t, int64(42), parts[1].Checkpoint.Next)

	empty := t.TempDir()
	_, _, err = statestore.Inspect(empty, nil)
	require.ErrorIs(t, err, os.ErrNotExist)
	names, _ := os.ReadDir(empty)
	require.Empty(t, names, "Inspect created files in an empty directory")
	_, _, err = statestore.Inspect(filepath.Join(empty, "missing"), nil)
	require.ErrorIs(t, err, os.ErrNotExist)
}

// TestInspectNotAStore: a directory of other files is corrupt for
// Inspect, never initialized.
func TestInspectNotAStore(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("hello"), 0o600))
	_, _, err := statestore.Inspect(dir, nil)
	require.ErrorIs(t, err, statestore.ErrCorrupt)
}

// TestInspectInUse: a store a processor has open is refused (Pebble's
// lock), and said to be in use, not corrupt.
func TestInspectInUse(t *testing.T) {
	dir := t.TempDir()
	s, err := statestore.Open(dir, nil)
	require.NoError(t, err)
	defer s.Close()
	_, _, err = statestore.Inspect(dir, nil)
	t.Log(err)
	require.ErrorIs(t, err, statestore.ErrInUse)
	require.NotErrorIs(t, err, statestore.ErrCorrupt)
}
