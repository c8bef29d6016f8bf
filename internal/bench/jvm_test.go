package bench

import (
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/onceflow/onceflow/internal/kafkatest"
)

// needJVM skips t unless the JVM modes can be built here: in the
// real-broker pass, which has Java and Maven (broker.sh installs them), or
// when EOSBENCH_JVM_TESTS=1 asks for it.
func needJVM(t *testing.T) {
	t.Helper()
	if !kafkatest.Real() && os.Getenv("EOSBENCH_JVM_TESTS") != "1" {
		t.Skip("builds the JVM modes with Maven: runs in the real-broker pass (or with EOSBENCH_JVM_TESTS=1)")
	}
}

// TestJVMHandlerMatchesGo: the Java handler (jvm/common Work.java) does
// what work.go and cpu.go do, bit for bit: the same digest of chained
// SHA-256 rounds, the same splitmix64 and so the same faulty records.
func TestJVMHandlerMatchesGo(t *testing.T) {
	needJVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var b jvmBuilds
	cp, err := b.classpath(ctx, jvmApp{dir: "kstreams"}, os.Stderr)
	require.NoError(t, err)
	const rate = 0.1
	out, err := exec.CommandContext(ctx, "java", "-cp", cp, "onceflow.bench.SelfCheck",
		"--fault-cut="+strconv.FormatUint(faultCut(rate), 10)).CombinedOutput()
	require.NoError(t, err, "%s", out)

	value := make([]byte, 100)
	for i := range value {
		value[i] = byte(i)
	}
	d := hashRounds(value, 3)
	w := newWork(Latency{}, 0, rate, 1000)
	faulty := "faulty"
	for id := range uint64(1000) {
		if w.faulty(id) {
			faulty += fmt.Sprintf(" %d", id)
		}
	}
	want := strings.Join([]string{
		"hash " + hex.EncodeToString(d[:]),
		fmt.Sprintf("mix %d %d", mix(0), mix(12345)),
		faulty,
	}, "\n")
	require.Equal(t, want, strings.TrimSpace(string(out)))
}
