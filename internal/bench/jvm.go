package bench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The JVM modes (kafka-streams, parallel-consumer) run a small Java program
// per instance, as subprocess workers (workers.go) that speak the Go
// workers' protocol. Their sources travel inside this binary, so that a
// binary built anywhere (a test's temporary directory) can build them: on
// first use they are written to a cache directory and built there by
// jvm/build.sh with Maven and javac, once per machine for each version of
// the sources.

//go:embed jvm/build.sh jvm/common jvm/kstreams jvm/parallelconsumer
var jvmSources embed.FS

// EnvJVMCache names the environment variable that overrides where the
// JVM modes are built (default: the user's cache directory,
// onceflow-eosbench-jvm under it).
const EnvJVMCache = "EOSBENCH_JVM_CACHE"

// jvmApp is one JVM mode's program.
type jvmApp struct {
	dir       string // under jvm/: its pom.xml and src/
	mainClass string
}

// jvmApp returns the mode's program, or false for a Go mode.
func (m Mode) jvmApp() (jvmApp, bool) {
	switch m.base() {
	case ModeKafkaStreams:
		return jvmApp{dir: "kstreams", mainClass: "onceflow.bench.kstreams.Main"}, true
	case ModeParallelConsumer:
		return jvmApp{dir: "parallelconsumer", mainClass: "onceflow.bench.pc.Main"}, true
	}
	return jvmApp{}, false
}

// jvmBuilds builds each JVM program at most once per Runner.
type jvmBuilds struct {
	mu    sync.Mutex
	paths map[string]string // app dir -> classpath
}

// classpath builds app if needed and returns the classpath to run it
// with. Maven's and the build's progress go to stderr.
func (b *jvmBuilds) classpath(ctx context.Context, app jvmApp, stderr io.Writer) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if cp, ok := b.paths[app.dir]; ok {
		return cp, nil
	}
	root, err := jvmCacheRoot()
	if err != nil {
		return "", err
	}
	src, err := extractJVMSources(root)
	if err != nil {
		return "", fmt.Errorf("writing the JVM sources under %s: %w", root, err)
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(src, "build.sh"), app.dir)
	cmd.Env = append(os.Environ(), "JVM_BENCH_CACHE_DIR="+root)
	cmd.Stdout, cmd.Stderr = &out, stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building the %s program (%s): %w", app.dir, filepath.Join(src, "build.sh"), err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	cp := strings.TrimSpace(lines[len(lines)-1])
	if cp == "" {
		return "", fmt.Errorf("building the %s program: build.sh printed no classpath", app.dir)
	}
	if b.paths == nil {
		b.paths = map[string]string{}
	}
	b.paths[app.dir] = cp
	return cp, nil
}

func jvmCacheRoot() (string, error) {
	if d := os.Getenv(EnvJVMCache); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no directory to build the JVM modes in (set %s): %w", EnvJVMCache, err)
	}
	return filepath.Join(d, "onceflow-eosbench-jvm"), nil
}

// extractJVMSources writes the embedded sources to root/src-<hash> unless
// they are there already, and returns that directory.
func extractJVMSources(root string) (string, error) {
	h := sha256.New()
	err := fs.WalkDir(jvmSources, "jvm", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := jvmSources.ReadFile(path)
		fmt.Fprintf(h, "%s %d\n", path, len(b))
		h.Write(b)
		return err
	})
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, "src-"+hex.EncodeToString(h.Sum(nil))[:16])
	if _, err := os.Stat(filepath.Join(dir, "build.sh")); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(root, "src-tmp-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp) // after a successful rename, nothing is left
	err = fs.WalkDir(jvmSources, "jvm", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		to := filepath.Join(tmp, strings.TrimPrefix(path, "jvm"))
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		b, err := jvmSources.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
	if err != nil {
		return "", err
	}
	// Another process may have written the same tree meanwhile: either
	// copy will do.
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(filepath.Join(dir, "build.sh")); serr == nil {
			return dir, nil
		}
		return "", err
	}
	return dir, nil
}

// jvmThreads is how many threads an instance of a JVM mode runs: one per
// input partition it owns when the partitions are spread evenly over the
// instances (Kafka Streams' stream threads).
func jvmThreads(partitions, instances int) int {
	return max(1, (partitions+instances-1)/instances)
}

// pcConcurrency is Parallel Consumer's maxConcurrency (its worker threads)
// for a run of sessions keys: a key runs on one thread at a time, so more
// threads than keys would idle; past 256 platform threads, a 2-core
// machine gains nothing but switches (its default, 16, would cap the io
// scenario's 1 ms handlers at 16,000 records/s).
func pcConcurrency(sessions int) int { return max(16, min(sessions, 256)) }

// faultCut is the hash below which a record is faulty at rate (work.faulty).
func faultCut(rate float64) uint64 {
	if rate <= 0 {
		return 0
	}
	return uint64(rate * math.MaxUint64)
}

// jvmCommand returns the command line of one instance of a JVM mode: java
// with the program's classpath and the job as --name=value flags
// (jvm/common/src/onceflow/bench/Args.java). hold makes it wait for "go"
// on stdin once built (Control.java).
// Below info (eosbench's default, warn), the producers' warnings about
// produce requests they retry (CONCURRENT_TRANSACTIONS while the previous
// transaction's markers are written, and the OUT_OF_ORDER_SEQUENCE_NUMBER
// that can follow) are left out: they are many, and expected. -log-level
// info or debug shows them.
func jvmCommand(app jvmApp, classpath string, job Job, threads, sessions int, hold, verbose bool) *exec.Cmd {
	protocol := "classic"
	if job.GroupProtocol == "consumer" {
		protocol = job.GroupProtocol
		if app.dir == "kstreams" {
			// Kafka Streams' counterpart of KIP-848 is its own protocol
			// (KIP-1071).
			protocol = "streams"
		}
	}
	ns := func(d time.Duration) string { return strconv.FormatInt(int64(d), 10) }
	args := []string{
		// Three broker JVMs share the machine: a modest heap, as theirs.
		"-Xms256m", "-Xmx1g",
		// Kafka's own INFO log is chatty; warnings and errors are kept.
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
		"-Dorg.slf4j.simpleLogger.showDateTime=true",
	}
	if !verbose {
		args = append(args, "-Dorg.slf4j.simpleLogger.log.org.apache.kafka.clients.producer.internals.Sender=error",
			// A config the assignor builds from the consumer's subset of
			// the properties warns that the global processing exception
			// handler is off, whatever the application set.
			"-Dorg.slf4j.simpleLogger.log.org.apache.kafka.streams.StreamsConfig=error")
	}
	args = append(args,
		"-cp", classpath, app.mainClass,
		"--brokers="+strings.Join(job.Brokers, ","),
		"--input="+job.Input, "--output="+job.Output, "--dlq="+job.DLQ,
		"--group="+job.Group, "--instance="+job.InstanceID,
		"--messages="+strconv.Itoa(job.Messages),
		"--cpu-rounds="+strconv.Itoa(job.CPURounds),
		"--latency-min="+ns(job.Latency.Min), "--latency-max="+ns(job.Latency.Max),
		"--fault-cut="+strconv.FormatUint(faultCut(job.FaultRate), 10),
		"--retry-initial="+ns(job.RetryInitial),
		"--commit-interval="+ns(job.CommitInterval),
		"--session-timeout="+ns(job.SessionTimeout),
		"--threads="+strconv.Itoa(threads),
		"--max-concurrency="+strconv.Itoa(pcConcurrency(sessions)),
		"--group-protocol="+protocol,
		"--hold="+strconv.FormatBool(hold),
	)
	return exec.Command("java", args...)
}

// jvmCommitSource says where a JVM mode's commit figures come from.
func jvmCommitSource(m Mode) string {
	if m.base() == ModeKafkaStreams {
		return "Kafka Streams' stream-thread commit-total and commit-latency-avg/max metrics: every task's flush, offsets and commit, per thread; the mean is over the metrics' sample window, the last 30-60 s"
	}
	return "the producer's txn-send-offsets-time-ns-total and txn-commit-time-ns-total metrics; it counts no commits"
}
