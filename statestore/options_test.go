package statestore

import (
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

// TestOptionsValidate: Validate accepts nil and zero Options, rejects what
// Open and Inspect reject with ErrInvalidOptions, and does not change its
// receiver; EnsureDefaults fills the zero fields.
func TestOptionsValidate(t *testing.T) {
	require.NoError(t, (*Options)(nil).Validate())
	require.NoError(t, (&Options{}).Validate())
	require.NoError(t, (&Options{CacheSize: 1 << 20}).Validate())

	bad := &Options{FS: vfs.NewMem(), CacheSize: -1}
	require.ErrorIs(t, bad.Validate(), ErrInvalidOptions)
	require.ErrorContains(t, bad.Validate(), "CacheSize")
	require.Equal(t, int64(-1), bad.CacheSize, "Validate changed its receiver")
	s, err := Open("d", bad)
	require.ErrorIs(t, err, ErrInvalidOptions)
	require.Nil(t, s)
	_, _, err = Inspect("d", bad)
	require.True(t, errors.Is(err, ErrInvalidOptions), "Inspect: %v", err)

	o := (&Options{}).EnsureDefaults()
	require.Equal(t, vfs.Default, o.FS)
	require.Equal(t, int64(DefaultCacheSize), o.CacheSize)
	require.NotNil(t, o.Logger)
}
