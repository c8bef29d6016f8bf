package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/onceflow/onceflow/internal/kafkatest"
)

// TestSecuredRun: eosbench against a listener that requires TLS and
// SCRAM-SHA-512 (a secured kfake cluster, or the environment's SASL_SSL
// listener in the secured pass), every mode with state and dedupe, so that
// each of its clients (admin, warm-up, feeder, observer, read-back, the
// pipelines' own, the processor's) must take the -tls and -sasl flags: one
// that does not cannot connect and the run fails. Without the flags it
// fails at once with the reason.
func TestSecuredRun(t *testing.T) {
	if kafkatest.Real() && !kafkatest.SecuredEnv() {
		t.Skip("needs a secured cluster (KAFKA_TLS_CA, KAFKA_SASL_*) or kfake")
	}
	c := kafkatest.New(t, kafkatest.Secured())
	sec := c.Security
	args := []string{"-brokers", strings.Join(c.Brokers, ","), "-tls", "-tls-ca", sec.CAFile,
		"-sasl-mechanism", sec.Mechanism, "-sasl-user", sec.User}
	t.Setenv("ONCEFLOW_SASL_PASSWORD", sec.Password) // as an operator would pass it
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	status := run(ctx, append(args, "-messages", "2000", "-sessions", "50", "-modes", "alo-raw,franz-gts,onceflow-session",
		"-count", "1", "-stateful", "-dup-rate", "0.05", "-timeout", "90s", "-json"), strings.NewReader(""), &stdout, &stderr)
	require.Equal(t, 0, status, "stderr: %s", stderr.String())
	rs := decode(t, stdout.Bytes())
	require.Len(t, rs, 3)
	for _, r := range rs {
		require.False(t, r.Failed(), "%s: %s", r.Mode, r.Failure)
	}

	stdout.Reset()
	stderr.Reset()
	began := time.Now()
	status = run(ctx, []string{"-brokers", strings.Join(c.Brokers, ","), "-messages", "100", "-modes", "onceflow-session", "-count", "1"},
		strings.NewReader(""), &stdout, &stderr)
	require.NotEqual(t, 0, status)
	// franz-go's reason: kfake closes the connection ("is TLS
	// missing?"), Kafka answers with a TLS alert ("a plaintext
	// connection speaking to a tls endpoint").
	require.Contains(t, strings.ToLower(stderr.String()), "tls")
	require.Less(t, time.Since(began), 20*time.Second)
}
