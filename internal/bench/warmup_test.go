package bench

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/onceflow/onceflow/internal/kafkatest"
)

// TestWarmUp: the first warm-up commits a transaction, later ones only
// ready their topics; each says on one line what it took; a topic no
// broker knows fails it.
func TestWarmUp(t *testing.T) {
	c := kafkatest.New(t)
	env, err := NewEnv(c.Brokers, false, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	defer env.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, err := env.Topic(ctx, "a", 3)
	require.NoError(t, err)
	b, err := env.Topic(ctx, "b", 6)
	require.NoError(t, err)

	var stderr bytes.Buffer
	r := &Runner{Env: env, Log: slog.New(slog.DiscardHandler), Stderr: &stderr}
	require.NoError(t, r.warmUp(ctx, "one", []string{a, b}))
	require.NoError(t, r.warmUp(ctx, "two", []string{b}))
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	require.Len(t, lines, 2, stderr.String())
	require.Regexp(t, `^eosbench: one: warm-up took \S+: a committed transaction and a group commit; 2 topics known to every broker \(\d+\)`, lines[0])
	require.Regexp(t, `^eosbench: two: warm-up took \S+: 1 topic known to every broker`, lines[1], "the coordinators are warmed once")

	// EndTransaction returns once the coordinator has logged the commit;
	// it writes the markers that move the last stable offset after that,
	// so on a real cluster the record becomes readable a moment later.
	require.Eventually(t, func() bool { return len(c.ReadCommitted(t, env.Name("warmup"))) == 1 },
		10*time.Second, 50*time.Millisecond, "the warm-up transaction committed its record")

	short, cancelShort := context.WithTimeout(ctx, 2*time.Second)
	defer cancelShort()
	err = r.warmUp(short, "three", []string{env.Name("no-such-topic")})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "to know the topics")
}
