package processor_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/clientsec"
	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/processor"
)

// securedCluster is a cluster that refuses clients without TLS and SASL:
// an embedded one made so, or the secured listener of the environment
// (kafkatest.SecuredEnv); a plain real cluster skips the test.
func securedCluster(t *testing.T) *kafkatest.Cluster {
	t.Helper()
	if kafkatest.Real() && !kafkatest.SecuredEnv() {
		t.Skip("needs a secured cluster: KAFKA_TLS_CA, KAFKA_SASL_* with KAFKA_BROKERS, or kfake")
	}
	return kafkatest.New(t, kafkatest.Secured())
}

// TestSecuredEveryClient: a processor using every feature that opens a
// client of its own (the changelog restore of state and dedupe, the
// position guard's log, the metrics' end-offset refresh, the claims and
// yields of the consumer protocol, the bounded run's watcher and the
// changelog topic checks) runs its input to the end through a listener
// that requires TLS and SCRAM-SHA-512, with the settings passed once, in
// WithKgoOpts. A client built without them cannot connect, and the run
// does not finish (the test times out); it was checked by dropping
// cfg.clientOpts() from the restore's client.
func TestSecuredEveryClient(t *testing.T) {
	c := securedCluster(t)
	pl := newPipeline(t, c, 2, 2000, 50)
	ids, dups := span(0, pl.inputs, 20)
	pl.produceEvents(t, ids...)
	stateDir, dedupeDir := t.TempDir(), t.TempDir()
	opts := func(h processor.Handler) []processor.Opt {
		return append(pl.opts("i1", h), processor.WithLagRefresh(50*time.Millisecond), processor.WithStateStore(stateDir, nil), processor.WithDedupe(dedupeDir, nil),
			processor.WithPositionGuard(), processor.WithMetrics(prometheus.NewRegistry()), processor.WithStopAtEnd())
	}
	// Half, a stop, and the rest: the second run restores its state
	// and marks and reads the position log.
	held, release := gated(pl.inputs / 2)
	first := start(t, opts(held)...)
	// A fresh broker's first transaction waits for its transaction
	// log to be created: more than 30s on a busy machine.
	pl.waitOutputs(t, pl.inputs/4, 90*time.Second)
	require.NoError(t, first.stop(t))
	release()
	second := start(t, opts(counterless)...)
	require.NoError(t, second.wait(t, 60*time.Second))
	require.Equal(t, int64(dups), first.p.Stats().DuplicatesSkipped+second.p.Stats().DuplicatesSkipped)
	rep := pl.read(t)
	require.True(t, rep.ExactlyOnce(), rep.String())
	require.Equal(t, pl.inputs, rep.Outputs)
}

// counterless copies its input and touches the session's state, so that
// the state keyspace is in use.
func counterless(ctx context.Context, r *kgo.Record, out processor.Emitter) error {
	st := processor.StateFrom(ctx)
	if st != nil {
		st.Set(r.Key, []byte("seen"))
	}
	return copyHandler(ctx, r, out)
}

// TestSecuredWithoutCredentials: a processor that reaches a secured
// listener without the right settings stops with a clear error, at once,
// rather than retrying forever: no SASL, a wrong password, no TLS.
func TestSecuredWithoutCredentials(t *testing.T) {
	c := securedCluster(t)
	pl := newPipeline(t, c, 1, 0, 1)
	tlsOnly := c.Security
	tlsOnly.Mechanism, tlsOnly.User, tlsOnly.Password = "", "", ""
	wrong := c.Security
	wrong.Password = "not-the-password"
	noTLS := c.Security
	noTLS.TLS, noTLS.CAFile = false, ""
	for _, tc := range []struct {
		name string
		sec  clientsec.Config
		want string
	}{
		{"no SASL", tlsOnly, "SASL"},
		{"wrong password", wrong, "SASL_AUTHENTICATION_FAILED"},
		{"no TLS", noTLS, "TLS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.sec.Password == wrong.Password && c.Fake != nil {
				// Kafka answers SASL_AUTHENTICATION_FAILED; kfake
				// closes the connection instead, which a client
				// cannot tell from a broker going away.
				t.Skip("kfake closes the connection on a wrong password: real brokers only")
			}
			kopts, err := tc.sec.Opts()
			require.NoError(t, err)
			base := pl.opts("i1", copyHandler)
			base = base[:len(base)-1] // the cluster's own WithKgoOpts
			p, err := processor.New(append(base, processor.WithKgoOpts(kopts...))...)
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			began := time.Now()
			err = p.Run(ctx)
			t.Logf("%s: Run returned after %v: %v", tc.name, time.Since(began).Round(time.Millisecond), err)
			require.Error(t, err)
			require.NotErrorIs(t, err, context.DeadlineExceeded)
			require.ErrorIs(t, err, processor.ErrUnauthenticated)
			require.Contains(t, err.Error(), tc.want)
			require.False(t, errors.Is(err, processor.ErrFenced))
		})
	}
}
