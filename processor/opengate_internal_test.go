package processor

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestOpenGate: a transaction's first record goes out alone; the rest wait,
// in order, until the flush that follows it returns; commit waits for it
// as well; an abort drops what is held.
func TestOpenGate(t *testing.T) {
	var sent []string
	flushed := make(chan struct{})
	woken := make(chan struct{}, 4)
	g := &openGate{
		send:  func(r *kgo.Record, _ func(*kgo.Record, error)) { sent = append(sent, string(r.Value)) },
		flush: func(context.Context) error { <-flushed; return nil },
		wake:  func() { woken <- struct{}{} },
		ctx:   context.Background(),
	}
	rec := func(v string) *kgo.Record { return &kgo.Record{Value: []byte(v)} }

	g.produce(rec("a"), nil)
	g.produce(rec("b"), nil)
	g.produce(rec("c"), nil)
	require.Equal(t, []string{"a"}, sent, "only the first record goes out before it is acknowledged")
	require.False(t, g.ready())
	g.releaseIfReady()
	require.Equal(t, []string{"a"}, sent)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	require.ErrorIs(t, g.releaseForCommit(ctx), context.DeadlineExceeded, "commit waits for the first record")
	cancel()
	require.Equal(t, []string{"a"}, sent)

	close(flushed)
	<-woken
	require.True(t, g.ready())
	g.releaseIfReady()
	g.produce(rec("d"), nil)
	require.Equal(t, []string{"a", "b", "c", "d"}, sent, "held records go out in order, then the gate is open")

	// The next transaction, aborted while holding: its held records go.
	g.reset()
	sent = nil
	g.produce(rec("e"), nil)
	g.produce(rec("f"), nil)
	g.reset()
	g.wait()
	require.Equal(t, []string{"e"}, sent)

	// A commit with nothing produced opens the gate for its own records.
	g.reset()
	sent = nil
	require.NoError(t, g.releaseForCommit(context.Background()))
	g.produce(rec("p1"), nil)
	g.produce(rec("p2"), nil)
	require.Equal(t, []string{"p1", "p2"}, sent)
}
