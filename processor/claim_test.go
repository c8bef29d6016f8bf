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
		holder := pl.startHolder(t, "i1", &cutHolder)
		cutHolder.Cut()

		// Each waits for the dead holder: refused, it has claimed the
		// transactional ID (a lifetime claims before its first poll).
		// The newer one has then also met the dead holder: without
		// claims, a different holder next means it was replaced.
		olderLog, olderSaid := logSignals(t, "older", refusedMsg, yieldingMsg)
		older := start(t, append(pl.opts("i1", copyHandler), processor.WithKgoOpts(quickRetries), olderLog)...)
		waitSignal(t, olderSaid[0], "the older process was not refused the instance ID")
		newerLog, newerSaid := logSignals(t, "newer", refusedMsg)
		newer := start(t, append(pl.opts("i1", copyHandler), processor.WithKgoOpts(cutNewer.Opt(), quickRetries), newerLog)...)
		waitSignal(t, newerSaid[0], "the newer process was not refused the instance ID")
		cutNewer.Cut()
		// The older one takes the ID when the dead holder's session
		// ends, finds its claim superseded and yields at once: its member
		// holds the ID for milliseconds on kfake, too briefly to poll.
		waitSignal(t, olderSaid[1], "the older process did not take the instance ID and yield it")
		cutNewer.Heal()

		require.ErrorIs(t, older.wait(t, 30*time.Second), processor.ErrFenced)
		cutHolder.Heal()
		require.ErrorIs(t, holder.wait(t, 30*time.Second), processor.ErrFenced)
		pl.finishSecondHalf(t, newer)
	})
}

// quickRetries: each client reaches the cluster within 100ms of a heal,
// so the order of the heals is the order of the joins.
var quickRetries = kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond })

// startHolder produces the first half of the inputs and starts a processor
// with instance, its connections behind cut, that holds the instance ID
// once it has committed them.
func (pl *pipeline) startHolder(t *testing.T, instance string, cut *kafkatest.Cutter, opts ...processor.Opt) *running {
	t.Helper()
	pl.produce(t, 0, pl.inputs/2)
	r := start(t, append(append(pl.opts(instance, copyHandler), processor.WithKgoOpts(cut.Opt(), quickRetries)), opts...)...)
	pl.waitOutputs(t, pl.inputs/2, 30*time.Second)
	require.NotEmpty(t, pl.holder(t, instance))
	return r
}

// finishSecondHalf produces the second half of the inputs, waits until
// they are handled by r, the process left holding the instance ID, stops
// it and checks that every input came out exactly once.
func (pl *pipeline) finishSecondHalf(t *testing.T, r *running) {
	t.Helper()
	pl.produce(t, pl.inputs/2, pl.inputs)
	pl.waitDone(t, 60*time.Second)
	require.NoError(t, r.stop(t))
	rep := pl.read(t)
	require.True(t, rep.ExactlyOnce(), rep.String())
	require.Equal(t, pl.inputs, rep.Outputs)
}

// Messages the processor logs: refused the instance ID, and yielding it.
const (
	refusedMsg  = "waiting for the group to release"
	yieldingMsg = "is waiting for it; yielding"
)

// logSignals is a logger option, its records tagged process=name, that
// signals on the i-th channel when a message contains msgs[i].
func logSignals(t *testing.T, name string, msgs ...string) (processor.Opt, []chan struct{}) {
	h := signalHandler{Handler: testLogger(t).Handler().WithAttrs([]slog.Attr{slog.String("process", name)}), msgs: msgs}
	for range msgs {
		h.signals = append(h.signals, make(chan struct{}, 1))
	}
	return processor.WithLogger(slog.New(h)), h.signals
}

func waitSignal(t *testing.T, ch chan struct{}, msg string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatal(msg)
	}
}

// signalHandler passes records to its handler and signals signals[i]
// when one's message contains msgs[i], at any level: the handler's level
// decides only what is passed on.
type signalHandler struct {
	slog.Handler
	msgs    []string
	signals []chan struct{}
}

func (h signalHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h signalHandler) Handle(ctx context.Context, r slog.Record) error {
	for i, msg := range h.msgs {
		if strings.Contains(r.Message, msg) {
			select {
			case h.signals[i] <- struct{}{}:
			default:
			}
		}
	}
	if !h.Handler.Enabled(ctx, r.Level) {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h signalHandler) WithAttrs(as []slog.Attr) slog.Handler {
	h.Handler = h.Handler.WithAttrs(as)
	return h
}

func (h signalHandler) WithGroup(name string) slog.Handler {
	h.Handler = h.Handler.WithGroup(name)
	return h
}

// TestIdleHolderYieldsToNewerProcess: a process that holds the instance
// ID but has nothing to do (here no input; in the soak w179#332, a
// paused process that took its ID back while its replacement waited)
// never runs a transaction, so nothing fences it. It must still find
// that a newer process claimed the transactional ID, yield it and stop;
// the newer one, refused until then, takes the ID and the work. Before
// the periodic check the newer one waited as long as the holder lived.
func TestIdleHolderYieldsToNewerProcess(t *testing.T) {
	if !kafkatest.Consumer848() {
		t.Skip("the consumer protocol's rule: ONCEFLOW_GROUP_PROTOCOL=consumer")
	}
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		pl := newPipeline(t, c, 2, 2000, 50)
		var cut kafkatest.Cutter
		holder := pl.startHolder(t, "i1", &cut)
		newerLog, newerSaid := logSignals(t, "newer", refusedMsg)
		newer := start(t, append(pl.opts("i1", copyHandler), processor.WithKgoOpts(quickRetries), newerLog)...)
		waitSignal(t, newerSaid[0], "the newer process was not refused the instance ID")

		require.ErrorIs(t, holder.wait(t, 30*time.Second), processor.ErrFenced)
		pl.finishSecondHalf(t, newer)
	})
}

// TestRejoinedHolderYieldsAtOnce: a holder expelled while a newer process
// waits for its instance ID, whose retry comes too late (here it is cut
// off), rejoins after its grace (the soak's w179#332); cut off, not
// paused, it keeps its member ID, so only the loss tells that it rejoined.
// After the loss it must check its claim at once, find the newer one's
// and yield; the newer one, back within the rebuild's grace, takes the
// ID. The holder's periodic check is set to an hour, so only the check
// after the loss can find the newer claim.
func TestRejoinedHolderYieldsAtOnce(t *testing.T) {
	if !kafkatest.Consumer848() {
		t.Skip("the consumer protocol's rule: ONCEFLOW_GROUP_PROTOCOL=consumer")
	}
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		pl := newPipeline(t, c, 2, 2000, 50)
		var cutHolder, cutNewer kafkatest.Cutter
		holderLog, holderSaid := logSignals(t, "holder", yieldingMsg)
		holder := pl.startHolder(t, "i1", &cutHolder, holderLog, processor.WithClaimRecheck(time.Hour), processor.WithClientLogLevel(slog.LevelInfo))
		newerLog, newerSaid := logSignals(t, "newer", refusedMsg)
		newer := start(t, append(pl.opts("i1", copyHandler), processor.WithKgoOpts(cutNewer.Opt(), quickRetries), newerLog)...)
		waitSignal(t, newerSaid[0], "the newer process was not refused the instance ID")

		cutHolder.Cut()
		cutNewer.Cut()
		require.Eventually(t, func() bool { return pl.holder(t, "i1") == "" }, 30*time.Second, 50*time.Millisecond,
			"the holder's member was not expelled")
		cutHolder.Heal()
		waitSignal(t, holderSaid[0], "the rejoined holder did not yield to the newer claim")
		cutNewer.Heal()

		require.ErrorIs(t, holder.wait(t, 30*time.Second), processor.ErrFenced)
		pl.finishSecondHalf(t, newer)
	})
}
