package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/onceflow/onceflow/internal/bench"
	"github.com/onceflow/onceflow/internal/kafkatest"
)

// buildBinary builds eosbench (with the race detector when the tests
// have it), since the crash scenario's workers are the binary itself.
func buildBinary(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	require.NoError(t, err, "the go command is needed to build the worker binary")
	bin := filepath.Join(t.TempDir(), "eosbench")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	out, err := exec.Command(goBin, append(args, ".")...).CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// TestCrashScenario runs the crash scenario small: three workers, one
// SIGKILLed every 2s while input is produced, for onceflow and alo-raw.
func TestCrashScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs subprocesses")
	}
	c := kafkatest.New(t)
	bin := buildBinary(t)
	cmd := exec.Command(bin,
		"-scenario", "crash",
		"-brokers", strings.Join(c.Brokers, ","),
		"-messages", "6000", "-rate", "1000", "-sessions", "200",
		"-workers", "3", "-kill-every", "2s",
		"-timeout", "90s", "-json",
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("stderr:\n%s", stderr.String())
	require.NoError(t, err, "stdout:\n%s", stdout.String())
	rs := decode(t, stdout.Bytes())
	require.Len(t, rs, 2)

	eos, alo := rs[0], rs[1]
	require.Equal(t, bench.ModeSession, eos.Mode)
	require.Positive(t, eos.Kills, "workers must have been killed")
	require.True(t, eos.ExactlyOnce, "%+v", eos)
	require.Equal(t, 6000, eos.Outputs)
	require.Positive(t, eos.Counters.CommitP50, "the workers' reports carry the commit quantiles")
	require.LessOrEqual(t, eos.Counters.CommitP99, eos.Counters.CommitMax)

	require.Equal(t, bench.ModeALO, alo.Mode)
	require.Positive(t, alo.Kills)
	require.Zero(t, alo.Lost, "at-least-once must not lose records")
	require.Positive(t, alo.Counters.CommitP50, "alo-raw times its commits too")
	t.Logf("alo-raw duplicates after %d kills: %d", alo.Kills, alo.Duplicates)
}
