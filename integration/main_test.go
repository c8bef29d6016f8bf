package integration

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

var (
	soakFor  = flag.Duration("soak", 0, "run TestSoak for this long (mixed faults, continuously); 0 skips it")
	seedFlag = flag.Uint64("seed", 0, "random seed for fault schedules (0: from the clock)")
	keepLogs = flag.Bool("worker-logs", false, "print every worker's stderr at the end of each test, not only on failure")
	wLevel   = flag.String("worker-log-level", "warn", "workers' processor log level (debug, info, warn, error); logs are kept on failure")
	wMaxVer  = flag.String("worker-max-kafka-version", "", "pin the workers' franz-go request versions to a Kafka release (e.g. 4.1)")
	feedLog  = flag.Bool("feeder-log", false, "log the input producer's franz-go client at info to stderr")
	kgoLevel = flag.String("worker-kgo-log-level", "none", "workers' franz-go log level (none, error, warn, info, debug)")
)

// binDir holds the worker binary, built once per test binary run.
var (
	binDir    string
	buildOnce sync.Once
	workerBin string
	buildErr  error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "onceflow-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration: temp dir:", err)
		os.Exit(1)
	}
	binDir = dir
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		_ = os.RemoveAll(dir)
		os.Exit(code)
	}))
}

// worker returns the path of the worker binary, building it on first use
// (without -race: the processes under test run at full speed).
func worker(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		start := time.Now()
		out := filepath.Join(binDir, "worker")
		cmd := exec.Command("go", "build", "-o", out, "github.com/onceflow/onceflow/integration/worker")
		b, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build worker: %v\n%s", err, b)
			return
		}
		workerBin = out
		t.Logf("built worker in %v", time.Since(start).Round(time.Millisecond))
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return workerBin
}
