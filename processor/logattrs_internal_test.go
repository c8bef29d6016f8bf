package processor

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestLoudByDefault: without WithLogger the processor logs through
// slog.Default() (issue 33, finding 1: it discarded everything), and its
// warnings and errors, franz-go's included, name the job's group,
// instance, brokers and topics; Info lines do not carry them.
func TestLoudByDefault(t *testing.T) {
	var buf bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })

	p, err := New(WithBrokers("127.0.0.1:9092", "127.0.0.1:9094"), WithGroup("g"), WithInstanceID("i"),
		WithInputTopics("in1", "in2"), WithOutputTopic("out"), WithDLQTopic("dlq"), WithHandler(copyToOutput))
	require.NoError(t, err)
	slog.SetDefault(prev) // read at New: later changes do not matter

	log := p.cfg.logger
	log.Debug("a debug line")
	log.Info("an info line", "k", 1)
	log.With("component", "kgo").Warn("a warning", "topic", "in1", "partition", 3)
	log.Error("an error")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 3, buf.String()) // Info and above
	require.Contains(t, lines[0], `msg="an info line" k=1`)
	require.NotContains(t, lines[0], "brokers=")
	job := `group=g instance=i brokers=127.0.0.1:9092,127.0.0.1:9094 inputs=in1,in2 output=out dlq=dlq`
	require.Contains(t, lines[1], `msg="a warning" component=kgo topic=in1 partition=3 `+job)
	require.Contains(t, lines[2], `msg="an error" `+job)
	// A key the line or the logger carries is not repeated.
	buf.Reset()
	log.With("instance", "mine").Warn("w", "group", "other")
	require.Equal(t, 1, strings.Count(buf.String(), "instance="), buf.String())
	require.Equal(t, 1, strings.Count(buf.String(), "group="), buf.String())
	require.Contains(t, buf.String(), `msg=w instance=mine group=other brokers=`)
	// franz-go's client log goes the same way.
	buf.Reset()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	p, err = New(WithBrokers("b:1"), WithGroup("g"), WithInstanceID("i"), WithInputTopics("in"),
		WithoutDefaultOutput(), WithHandler(copyToOutput))
	slog.SetDefault(prev)
	require.NoError(t, err)
	newClientLogger(p.cfg.logger, p.cfg.clientLogLevel).Log(kgo.LogLevelWarn, "unable to open connection to broker", "addr", "b:1")
	require.Contains(t, buf.String(), `msg="unable to open connection to broker" component=kgo addr=b:1 group=g instance=i brokers=b:1 inputs=in`)
}
