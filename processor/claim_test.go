package processor_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/processor"
)

// TestNewerWaiterWinsTheID: two processes wait for the instance ID of a
// holder cut off from the cluster, and the older one takes it when the
// holder's session expires (the group gives a free instance ID to
// whichever waiting member asks first; here the newer one is cut off at
// that moment, in the soaks it was its retry falling later). The older
// one must find that the newer one claimed the transactional ID after it
// and yield; the newer one takes the ID and finishes the work exactly
// once; the cut-off holder, back, stops fenced. Before claims the newer
// one stopped fenced on seeing the holder change, and the older one ran
// on (the soaks' w91#190 and w97#205).
func TestNewerWaiterWinsTheID(t *testing.T) {
	if !kafkatest.Consumer848() {
		t.Skip("the consumer protocol's rule: ONCEFLOW_GROUP_PROTOCOL=consumer")
	}
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		pl := newPipeline(t, c, 2, 2000, 50)
		var cutHolder, cutNewer kafkatest.Cutter
		holder, dead := pl.startHolder(t, "i1", &cutHolder)
		cutHolder.Cut()

		// Each waits for the dead holder: refused, it has claimed the
		// transactional ID (a lifetime claims before its first poll).
		// The newer one has then also met the dead holder: without
		// claims, a different holder next means it was replaced.
		olderLog, olderRefused := refusedSignal(t, "older")
		older := start(t, append(pl.opts("i1", copyHandler), processor.WithKgoOpts(quickRetries), olderLog)...)
		waitSignal(t, olderRefused, "the older process was not refused the instance ID")
		newerLog, newerRefused := refusedSignal(t, "newer")
		newer := start(t, append(pl.opts("i1", copyHandler), processor.WithKgoOpts(cutNewer.Opt(), quickRetries), newerLog)...)
		waitSignal(t, newerRefused, "the newer process was not refused the instance ID")
		cutNewer.Cut()
		require.Eventually(t, func() bool { h := pl.holder(t, "i1"); return h != "" && h != dead }, 30*time.Second, 20*time.Millisecond,
			"the older process did not take the instance ID")
		cutNewer.Heal()

		require.ErrorIs(t, older.wait(t, 30*time.Second), processor.ErrFenced)
		cutHolder.Heal()
		require.ErrorIs(t, holder.wait(t, 30*time.Second), processor.ErrFenced)
		pl.produce(t, pl.inputs/2, pl.inputs)
		pl.waitDone(t, 60*time.Second)
		require.NoError(t, newer.stop(t))
		rep := pl.read(t)
		require.True(t, rep.ExactlyOnce(), rep.String())
		require.Equal(t, pl.inputs, rep.Outputs)
	})
}

// quickRetries: each client reaches the cluster within 100ms of a heal,
// so the order of the heals is the order of the joins.
var quickRetries = kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond })

// startHolder produces the first half of the inputs and starts a processor
// with instance, its connections behind cut, that holds the instance ID
// once it has committed them; it returns the processor and its member ID.
func (pl *pipeline) startHolder(t *testing.T, instance string, cut *kafkatest.Cutter) (*running, string) {
	t.Helper()
	pl.produce(t, 0, pl.inputs/2)
	r := start(t, append(pl.opts(instance, copyHandler), processor.WithKgoOpts(cut.Opt(), quickRetries))...)
	pl.waitOutputs(t, pl.inputs/2, 30*time.Second)
	member := pl.holder(t, instance)
	require.NotEmpty(t, member)
	return r, member
}

// refusedSignal is a logger option that signals when the processor logs
// that the group refused it the instance ID.
func refusedSignal(t *testing.T, name string) (processor.Opt, chan struct{}) {
	ch := make(chan struct{}, 1)
	h := signalHandler{testLogger(t).Handler().WithAttrs([]slog.Attr{slog.String("process", name)}), "waiting for the group to release", ch}
	return processor.WithLogger(slog.New(h)), ch
}

func waitSignal(t *testing.T, ch chan struct{}, msg string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatal(msg)
	}
}

// signalHandler passes records to its handler and signals when one's
// message contains msg.
type signalHandler struct {
	slog.Handler
	msg    string
	signal chan struct{}
}

func (h signalHandler) Handle(ctx context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.msg) {
		select {
		case h.signal <- struct{}{}:
		default:
		}
	}
	return h.Handler.Handle(ctx, r)
}
