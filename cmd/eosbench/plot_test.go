package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/internal/svgtest"
)

// TestPlot: -plot after a short real run writes an SVG document (decoded
// to its end, root svg) with a series per mode in each of its two panels,
// named in their legends; the table is printed as usual.
func TestPlot(t *testing.T) {
	c := kafkatest.New(t)
	path := filepath.Join(t.TempDir(), "run.svg")
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	status := run(ctx, []string{
		"-brokers", strings.Join(c.Brokers, ","),
		"-messages", "2000", "-sessions", "50",
		"-modes", "franz-gts,onceflow-session", "-count", "2",
		"-handler-cpu", "5us", "-timeout", "90s", "-plot", path,
	}, strings.NewReader(""), &stdout, &stderr)
	require.Equal(t, 0, status, "stderr: %s", stderr.String())
	require.Contains(t, stdout.String(), "median rec/s")
	require.Regexp(t, `eosbench: default: -handler-cpu 5µs: \d+ SHA-256 rounds of 132 bytes per record`, stderr.String())

	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	texts := svgtest.Texts(t, f)
	for _, mode := range []string{"franz-gts", "onceflow-session"} {
		require.Equal(t, 3, texts[mode], "%s: one legend entry in each of the three panels", mode)
	}
	require.Equal(t, 1, texts["latency by percentile (all runs merged)"])
	require.Equal(t, 1, texts["throughput over the run (median run, per 300ms)"], "a short run: the shortest points")
	require.Equal(t, 1, texts["median latency over the run (median run, per 300ms)"])
}
