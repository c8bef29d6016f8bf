package processor

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// newTestGate is a gate whose sends are recorded and whose flush waits
// for flushed.
func newTestGate(after <-chan struct{}, flushed <-chan struct{}, sent *[]string) (*openGate, chan struct{}, *sync.WaitGroup) {
	woken := make(chan struct{}, 4)
	var wg sync.WaitGroup
	return &openGate{
		send: func(r *kgo.Record, _ func(*kgo.Record, error)) error {
			*sent = append(*sent, string(r.Value))
			return nil
		},
		flush: func(context.Context) error { <-flushed; return nil },
		wake:  func() { woken <- struct{}{} },
		ctx:   context.Background(),
		wg:    &wg,
		after: after,
	}, woken, &wg
}

func rec(v string) *kgo.Record { return &kgo.Record{Value: []byte(v)} }

// TestOpenGate: a transaction's first record goes out alone; the rest wait,
// in order, until the flush that follows it returns; commit waits for it
// as well.
func TestOpenGate(t *testing.T) {
	var sent []string
	flushed := make(chan struct{})
	g, woken, wg := newTestGate(nil, flushed, &sent)

	require.NoError(t, g.produce(rec("a"), nil))
	require.NoError(t, g.produce(rec("b"), nil))
	require.NoError(t, g.produce(rec("c"), nil))
	require.Equal(t, []string{"a"}, sent, "only the first record goes out before it is acknowledged")
	require.False(t, g.ready())
	require.NoError(t, g.releaseIfReady())
	require.Equal(t, []string{"a"}, sent)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	require.ErrorIs(t, g.releaseForCommit(ctx), context.DeadlineExceeded, "commit waits for the first record")
	cancel()
	require.Equal(t, []string{"a"}, sent)

	close(flushed)
	<-woken
	require.True(t, g.ready())
	require.NoError(t, g.releaseIfReady())
	require.NoError(t, g.produce(rec("d"), nil))
	require.Equal(t, []string{"a", "b", "c", "d"}, sent, "held records go out in order, then the gate is open")
	wg.Wait()

	// A commit with nothing produced opens the gate for its own records.
	sent = nil
	g, _, _ = newTestGate(nil, flushed, &sent)
	require.NoError(t, g.releaseForCommit(context.Background()))
	require.NoError(t, g.produce(rec("p1"), nil))
	require.NoError(t, g.produce(rec("p2"), nil))
	require.Equal(t, []string{"p1", "p2"}, sent)
}

// TestOpenGateWaitsForTheEndingTransaction: the next transaction's records
// wait until the ending one has flushed (after), so that no partition gets
// them before the ending one's; then its first record goes out alone as
// usual. A commit waits for after too.
func TestOpenGateWaitsForTheEndingTransaction(t *testing.T) {
	var sent []string
	after, flushed := make(chan struct{}), make(chan struct{})
	g, woken, wg := newTestGate(after, flushed, &sent)
	require.NoError(t, g.produce(rec("a"), nil))
	require.NoError(t, g.produce(rec("b"), nil))
	require.Empty(t, sent, "nothing goes out before the ending transaction has flushed")
	require.False(t, g.ready())
	require.NoError(t, g.releaseIfReady())
	require.Empty(t, sent)
	require.False(t, g.holding(time.Now(), time.Hour), "not holding a commit off: none can start before the ending one ends")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	require.ErrorIs(t, g.releaseForCommit(ctx), context.DeadlineExceeded, "commit waits for the ending transaction")
	cancel()
	require.Empty(t, sent)

	close(after)
	require.True(t, g.ready())
	require.NoError(t, g.releaseIfReady())
	require.Equal(t, []string{"a"}, sent, "then the first record alone")
	require.True(t, g.holding(time.Now(), time.Hour))
	close(flushed)
	<-woken
	require.NoError(t, g.releaseIfReady())
	require.Equal(t, []string{"a", "b"}, sent)
	wg.Wait()
}
