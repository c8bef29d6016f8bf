package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/onceflow/onceflow/internal/version"
)

// TestHandlerCPUFlag: the cpu preset asks 20µs per record, -handler-cpu
// overrides it and adds CPU work to any scenario; without either there is
// none.
func TestHandlerCPUFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want time.Duration
	}{
		{nil, 0},
		{[]string{"-scenario", "cpu"}, 20 * time.Microsecond},
		{[]string{"-scenario", "cpu", "-handler-cpu", "5us"}, 5 * time.Microsecond},
		{[]string{"-handler-cpu", "1ms"}, time.Millisecond},
		{[]string{"-scenario", "io", "-handler-cpu", "20us"}, 20 * time.Microsecond},
	} {
		scenario := "default"
		if len(tc.args) > 1 && tc.args[0] == "-scenario" {
			scenario = tc.args[1]
		}
		phs, _, err := phases(tc.args, scenario)
		require.NoError(t, err, tc.args)
		require.Len(t, phs, 1, tc.args)
		require.Equal(t, tc.want, phs[0].HandlerCPU, tc.args)
	}
	phs, _, err := phases([]string{"-scenario", "cpu", "-count", "1"}, "cpu")
	require.NoError(t, err)
	require.Equal(t, 1, phs[0].Count, "explicit flags override the preset's 3 runs")
	_, _, err = phases([]string{"-handler-cpu", "-1us"}, "default")
	require.ErrorContains(t, err, "-handler-cpu")
}

// TestVersionFlag: -version prints one line naming eosbench and the
// module's version, exits 0 and runs nothing (no cluster is started).
func TestVersionFlag(t *testing.T) {
	var stdout, stderr bytes.Buffer
	status := run(context.Background(), []string{"-version"}, strings.NewReader(""), &stdout, &stderr)
	require.Equal(t, 0, status, "stderr: %s", stderr.String())
	require.Empty(t, stderr.String())
	require.Regexp(t, `^eosbench \S+( \(.*\))?\n$`, stdout.String())
	require.Equal(t, version.Current("eosbench")+"\n", stdout.String())
}
