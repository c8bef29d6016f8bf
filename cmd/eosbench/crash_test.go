package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/onceflow/onceflow/internal/bench"
	"github.com/onceflow/onceflow/internal/kafkatest"
)

// built is eosbench built once for the tests that need the binary
// (builtDir is removed by TestMain).
var (
	buildOnce sync.Once
	builtDir  string
	built     string
	buildErr  error
)

// buildBinary builds eosbench (with the race detector when the tests
// have it), since the crash and scale scenarios' workers are the binary
// itself. It is built once per test process.
func buildBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		goBin, err := exec.LookPath("go")
		if err != nil {
			buildErr = fmt.Errorf("the go command is needed to build the worker binary: %w", err)
			return
		}
		if builtDir, buildErr = os.MkdirTemp("", "eosbench-test-"); buildErr != nil {
			return
		}
		bin := filepath.Join(builtDir, "eosbench")
		args := []string{"build", "-o", bin}
		if raceEnabled {
			args = append(args, "-race")
		}
		if out, err := exec.Command(goBin, append(args, ".")...).CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %w: %s", err, out)
			return
		}
		built = bin
	})
	require.NoError(t, buildErr)
	return built
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
