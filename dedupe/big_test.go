package dedupe

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestBig stores 10 million IDs on a real directory and reports disk size
// and peak RSS. It takes a minute or two, so it runs only with DEDUPE_BIG=1:
//
//	DEDUPE_BIG=1 go test -run TestBig -v ./dedupe/
func TestBig(t *testing.T) {
	if os.Getenv("DEDUPE_BIG") == "" {
		t.Skip("set DEDUPE_BIG=1 to run")
	}
	const total, batch = 10_000_000, 1000
	dir := t.TempDir()
	s, err := Open(dir, &Options{Logger: discard()})
	require.NoError(t, err)
	defer s.Close()

	g := newIDGen(42)
	ids := make([][]byte, batch)
	start := time.Now()
	for range total / batch {
		for i := range ids {
			ids[i] = g.next(ids[i])
		}
		first, err := s.ClaimBatch(ids)
		require.NoError(t, err)
		require.True(t, first[0])
	}
	load := time.Since(start)
	require.NoError(t, s.db.Flush())
	t.Logf("claimed %d IDs (16 bytes) in %v: %.0f ids/s", total, load.Round(time.Millisecond),
		float64(total)/load.Seconds())
	t.Logf("after load: disk %s, %d files", mib(dirSize(t, dir)), len(mustList(t, dir)))

	// Lookups against the full store, before compactions settle.
	probe := func(seed uint64, want bool) time.Duration {
		g := newIDGen(seed)
		var id []byte
		const n = 200_000
		t0 := time.Now()
		for range n {
			id = g.next(id)
			seen, err := s.Seen(id)
			require.NoError(t, err)
			require.Equal(t, want, seen)
		}
		return time.Since(t0) / n
	}
	t.Logf("Seen present: %v/op, absent: %v/op", probe(42, true), probe(43, false))

	// Let background compactions finish, then report the settled size.
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) && s.db.Metrics().Compact.NumInProgress > 0 {
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("settled: disk %s (%.1f bytes/ID), peak RSS (VmHWM) %s",
		mib(dirSize(t, dir)), float64(dirSize(t, dir))/total, vmHWM(t))
}

func dirSize(t *testing.T, dir string) int64 {
	var n int64
	require.NoError(t, filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			n += info.Size()
		}
		return err
	}))
	return n
}

func mustList(t *testing.T, dir string) []os.DirEntry {
	es, err := os.ReadDir(dir)
	require.NoError(t, err)
	return es
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

func vmHWM(t *testing.T) string {
	f, err := os.Open("/proc/self/status")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
