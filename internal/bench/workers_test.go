package bench

import (
	"io"
	"log/slog"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestWorkerSetStopKillsEveryStuckWorker: workers that ignore the request
// to stop (a hung JVM close) are all killed once the timeout is up, not
// only the first.
func TestWorkerSetStopKillsEveryStuckWorker(t *testing.T) {
	stuck := func(Job, bool) *exec.Cmd { return exec.Command("sleep", "60") }
	ws, err := startWorkerSet(stuck, false, 3, Job{}, io.Discard, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	began := time.Now()
	ws.stop(200 * time.Millisecond)
	require.Less(t, time.Since(began), 10*time.Second)
}
