package bench

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/onceflow/onceflow/processor"
)

func TestObservedModes(t *testing.T) {
	ms, err := ParseModes("onceflow-session,onceflow-unordered+obs,onceflow+obs")
	require.NoError(t, err)
	require.Equal(t, []Mode{ModeSession, ModeUnordered + ObserveSuffix, ModeOnceflow + ObserveSuffix}, ms)
	require.Equal(t, ModePartition+ObserveSuffix, ms[2].resolve(processor.OrderByPartition))
	require.False(t, ms[1].ordered())
	require.Equal(t, processor.Unordered, ms[1].ordering())
	require.True(t, ms[1].ExactlyOnce())
	require.False(t, ms[1].baseline())
	ms, err = ParseModes("onceflow-session+metrics,onceflow+tracing")
	require.NoError(t, err)
	require.True(t, ms[0].metricsOn())
	require.False(t, ms[0].tracingOn())
	require.Equal(t, ModeSession, ms[0].base())
	require.Equal(t, ModeUnordered+TracingSuffix, ms[1].resolve(processor.Unordered))
	require.True(t, ms[1].tracingOn())
	require.False(t, ms[1].metricsOn())
	require.True(t, (ModeSession + ObserveSuffix).metricsOn())
	require.True(t, (ModeSession + ObserveSuffix).tracingOn())
	require.False(t, ModeSession.metricsOn() || ModeSession.tracingOn() || ModeSession.guardOn())
	ms, err = ParseModes("onceflow+guard")
	require.NoError(t, err)
	require.True(t, ms[0].guardOn())
	require.False(t, ms[0].metricsOn() || ms[0].tracingOn())
	require.Equal(t, ModeSession+GuardSuffix, ms[0].resolve(processor.OrderBySession))
	for _, bad := range []string{"alo-raw+obs", "franz-gts+metrics", "onceflow+obs+obs", "onceflow+metrics+tracing", "+obs", "franz-gts+guard", "onceflow+guard+obs"} {
		_, err := ParseModes(bad)
		require.Error(t, err, bad)
	}

	rs := []Result{
		{Mode: ModeSession, Throughput: 100},
		{Mode: ModeSession + ObserveSuffix, Throughput: 90},
		{Mode: ModeSession, Throughput: 80},
		{Mode: ModePartition + ObserveSuffix, Throughput: 50}, // no twin
		{Mode: ModeSession + MetricsSuffix, Throughput: 45},
	}
	setRatios(rs)
	require.Nil(t, rs[0].RatioToUnobserved)
	require.InDelta(t, 1.0, *rs[1].RatioToUnobserved, 1e-9) // 90 / mean(100, 80)
	require.Nil(t, rs[3].RatioToUnobserved)
	require.InDelta(t, 0.5, *rs[4].RatioToUnobserved, 1e-9)
}
