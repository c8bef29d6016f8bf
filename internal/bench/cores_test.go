package bench

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCores: the arithmetic of two samples, and that on Linux both
// clocks are read.
func TestCores(t *testing.T) {
	t0 := time.Now()
	a := cpuSample{at: t0, self: time.Second, machine: 10 * time.Second}
	b := cpuSample{at: t0.Add(2 * time.Second), self: 3 * time.Second, machine: 13 * time.Second}
	self, machine := a.cores(b)
	require.InDelta(t, 1, self, 1e-9)
	require.InDelta(t, 1.5, machine, 1e-9)
	self, machine = cpuSample{at: t0}.cores(cpuSample{at: t0.Add(time.Second)})
	require.Zero(t, self, "unknown clocks: nothing reported")
	require.Zero(t, machine)
	self, _ = a.cores(a)
	require.Zero(t, self, "no time elapsed")

	if runtime.GOOS != "linux" {
		t.Skip("/proc is Linux's")
	}
	s := sampleCPU()
	require.Positive(t, s.self)
	require.Positive(t, s.machine)
	require.Equal(t, "-", cores(Result{}))
	require.Equal(t, "0.50/1.25 of 2", cores(Result{CoresSelf: 0.5, CoresMachine: 1.25, MachineCores: 2}))
	require.Equal(t, "-/1.25 of 2", cores(Result{CoresMachine: 1.25, MachineCores: 2}), "workers: not ours")
}
