package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
		phs, err := phases(tc.args, scenario)
		require.NoError(t, err, tc.args)
		require.Len(t, phs, 1, tc.args)
		require.Equal(t, tc.want, phs[0].HandlerCPU, tc.args)
	}
	phs, err := phases([]string{"-scenario", "cpu", "-count", "1"}, "cpu")
	require.NoError(t, err)
	require.Equal(t, 1, phs[0].Count, "explicit flags override the preset's 3 runs")
	_, err = phases([]string{"-handler-cpu", "-1us"}, "default")
	require.ErrorContains(t, err, "-handler-cpu")
}
