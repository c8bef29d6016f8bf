package main

import (
	"crypto/sha256"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/processor"
)

// digest hashes every file's name and content under dir.
func digest(t *testing.T, dir string) [32]byte {
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
	return [32]byte(h.Sum(nil))
}

// TestInspect: after a processor with state and dedupe ran its input,
// "state inspect" and "dedupe inspect" report its stores (keys per input
// partition, key ranges, checkpoints; marks per partition, event ID
// ranges, the TTL horizon) without changing a byte of them; a directory
// without a store is an error, and stays empty.
func TestInspect(t *testing.T) {
	if kafkatest.Real() {
		t.Skip("the stores do not depend on the broker: the embedded pass covers them")
	}
	c := kafkatest.New(t)
	a := newApp(t, c, 2)
	a.produce(t, 0, 100)
	stateDir, dedupeDir := t.TempDir(), t.TempDir()
	a.runBounded(t, "i1", processor.WithStateStore(stateDir, nil), processor.WithDedupe(dedupeDir, nil))
	stateSum, dedupeSum := digest(t, stateDir), digest(t, dedupeDir)

	st, out, errOut := cmd(t, "state", "inspect", "-json", stateDir)
	require.Equal(t, exitOK, st, errOut)
	var sr stateReport
	require.NoError(t, json.Unmarshal([]byte(out), &sr))
	require.Equal(t, "onceflow-statestore/1", sr.Format)
	var keys int64
	for _, p := range sr.Partitions {
		require.Equal(t, a.in, p.Topic)
		require.NotNil(t, p.CheckpointNext, "partition %d has no checkpoint", p.Partition)
		keys += p.Keys
	}
	require.Equal(t, int64(7), keys, "one state key per record key (k0..k6)")

	st, out, errOut = cmd(t, "dedupe", "inspect", "-json", dedupeDir)
	require.Equal(t, exitOK, st, errOut)
	var dr dedupeReport
	require.NoError(t, json.Unmarshal([]byte(out), &dr))
	var marks int64
	for _, p := range dr.Partitions {
		require.Equal(t, a.in, p.Topic)
		require.True(t, p.CheckpointValid)
		require.True(t, strings.HasPrefix(p.FirstID, `"ev-`), p.FirstID)
		marks += p.Marks
	}
	require.Equal(t, int64(100), marks+dr.Unindexed, "one mark per event ID")
	require.Zero(t, dr.Other)
	require.Zero(t, dr.Expired)

	st, text, errOut := cmd(t, "dedupe", "inspect", dedupeDir)
	require.Equal(t, exitOK, st, errOut)
	t.Logf("dedupe inspect:\n%s", text)
	st, text, errOut = cmd(t, "state", "inspect", stateDir)
	require.Equal(t, exitOK, st, errOut)
	t.Logf("state inspect:\n%s", text)
	require.Equal(t, stateSum, digest(t, stateDir), "state inspect changed the store")
	require.Equal(t, dedupeSum, digest(t, dedupeDir), "dedupe inspect changed the store")

	empty := t.TempDir()
	for _, kind := range []string{"state", "dedupe"} {
		st, _, errOut = cmd(t, kind, "inspect", empty)
		require.Equal(t, exitFail, st)
		require.Contains(t, errOut, "no store")
	}
	names, _ := os.ReadDir(empty)
	require.Empty(t, names)
	st, _, _ = cmd(t, "state", "inspect")
	require.Equal(t, exitUsage, st)
	st, _, _ = cmd(t, "dedupe", "look")
	require.Equal(t, exitUsage, st)
}
