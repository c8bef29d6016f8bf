package bench

import (
	"crypto/sha256"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCalibrate: the arithmetic, against a fake clock of 100ns a round:
// doubling to the sample length, the fastest sample kept, rounds rounded
// to the target, and no work for no target.
func TestCalibrate(t *testing.T) {
	calls := 0
	fake := func(n int) time.Duration {
		calls++
		d := time.Duration(n) * 100 * time.Nanosecond
		if calls%2 == 0 {
			d *= 3 // a preempted sample: must not count
		}
		return d
	}
	c := calibrate(20*time.Microsecond, fake)
	require.Equal(t, 200, c.Rounds)
	require.Equal(t, 100*time.Nanosecond, c.PerRound)
	require.Equal(t, 20*time.Microsecond, c.Target)

	require.Equal(t, 1, calibrate(time.Nanosecond, func(n int) time.Duration { return time.Duration(n) * time.Microsecond }).Rounds,
		"a positive target does some work")
	require.Equal(t, 1, calibrate(time.Microsecond, func(int) time.Duration { return calibrationSample }).Rounds,
		"a clock too coarse to see a round")

	calls = 0
	require.Zero(t, calibrate(0, fake).Rounds)
	require.Zero(t, calls, "no target, no measurement")
}

// TestCalibrateCPU: on this machine, whatever its load, a 20µs target
// comes to some rounds, and the measured cost per round is plausible for
// SHA-256 of 132 bytes (loose bounds: no timing is asserted tightly).
func TestCalibrateCPU(t *testing.T) {
	c := calibrateCPU(20*time.Microsecond, 100)
	require.Positive(t, c.Rounds)
	require.Greater(t, c.PerRound, time.Nanosecond)
	require.Less(t, c.PerRound, 100*time.Microsecond)
	require.Equal(t, 100, c.Size)
	require.Contains(t, c.String(), "SHA-256 rounds of 132 bytes per record")
}

// TestHashRounds: deterministic, chained (each round changes the digest)
// and over the whole value.
func TestHashRounds(t *testing.T) {
	v := []byte("a value of a record")
	require.Equal(t, [sha256.Size]byte{}, hashRounds(v, 0))
	one := hashRounds(v, 1)
	require.Equal(t, sha256.Sum256(append(make([]byte, sha256.Size), v...)), one)
	require.Equal(t, hashRounds(v, 7), hashRounds(v, 7))
	require.NotEqual(t, hashRounds(v, 7), hashRounds(v, 8))
	w := append([]byte{}, v...)
	w[len(w)-1] ^= 1
	require.NotEqual(t, hashRounds(v, 7), hashRounds(w, 7), "the last byte counts")

	// The handler does the rounds on every attempt, and they change
	// nothing else: a faulty record still fails once.
	wk := newWork(Latency{}, 10, 0.999, 1)
	require.ErrorIs(t, wk.do(0, v), errInjected)
	require.NoError(t, wk.do(0, v))
}

// TestCPUScenario: the preset's values, and that it validates.
func TestCPUScenario(t *testing.T) {
	phases, err := Scenario("cpu")
	require.NoError(t, err)
	require.Len(t, phases, 1)
	c := phases[0]
	require.Equal(t, "cpu", c.Scenario)
	require.Equal(t, 20*time.Microsecond, c.HandlerCPU)
	require.Equal(t, 100_000, c.Messages)
	require.Equal(t, 3, c.Count)
	require.Contains(t, c.Modes, ModeGTS)
	require.Contains(t, c.Modes, ModeSession)
	require.Zero(t, c.HandlerLatency, "CPU only: no sleep")
	require.NoError(t, c.Validate())
	require.Contains(t, ScenarioNames(), "cpu")

	c.HandlerCPU = -time.Microsecond
	require.ErrorContains(t, c.Validate(), "-handler-cpu")
}
