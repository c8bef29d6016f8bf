package bench

import (
	"bytes"
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
	ws, err := startWorkerSet(stuck, false, 3, Job{}, workerLogs{stderr: io.Discard}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	began := time.Now()
	ws.stop(200 * time.Millisecond)
	require.Less(t, time.Since(began), 10*time.Second)
}

// TestLevelFilter: a worker's lines below the level stay out of stderr,
// lines without a level (a panic) and split lines come through whole.
func TestLevelFilter(t *testing.T) {
	var out bytes.Buffer
	f := &levelFilter{w: &out, min: slog.LevelWarn}
	in := "time=x level=INFO msg=assigned\ntime=x level=WARN msg=fetch err=y\npanic: boom\n" +
		"time=x level=ERROR msg=split\n"
	for i := 0; i < len(in); i += 7 { // arrives in pieces, as a pipe's reads do
		_, err := f.Write([]byte(in[i:min(i+7, len(in))]))
		require.NoError(t, err)
	}
	require.Equal(t, "time=x level=WARN msg=fetch err=y\npanic: boom\ntime=x level=ERROR msg=split\n", out.String())
}
