package dedupe

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"
)

func TestOnceRunsOnce(t *testing.T) {
	s := mustOpen(t, "db", testOptions(vfs.NewMem(), newFakeClock()))
	defer s.Close()
	ctx := context.Background()
	calls := 0
	fn := func(context.Context) error { calls++; return nil }
	ran, err := s.Once(ctx, []byte("e1"), fn)
	require.NoError(t, err)
	require.True(t, ran)
	ran, err = s.Once(ctx, []byte("e1"), fn)
	require.NoError(t, err)
	require.False(t, ran)
	require.Equal(t, 1, calls)
	seen, err := s.Seen([]byte("e1"))
	require.NoError(t, err)
	require.True(t, seen)
}

func TestOnceFailureDoesNotMark(t *testing.T) {
	s := mustOpen(t, "db", testOptions(vfs.NewMem(), newFakeClock()))
	defer s.Close()
	ctx := context.Background()
	boom := errors.New("boom")
	ran, err := s.Once(ctx, []byte("e1"), func(context.Context) error {
		// The mark must not exist while the effect runs.
		seen, err := s.Seen([]byte("e1"))
		require.NoError(t, err)
		require.False(t, seen)
		return boom
	})
	require.ErrorIs(t, err, boom)
	require.True(t, ran)
	seen, err := s.Seen([]byte("e1"))
	require.NoError(t, err)
	require.False(t, seen)
	// The retry runs the effect again and then marks.
	ran, err = s.Once(ctx, []byte("e1"), func(context.Context) error { return nil })
	require.NoError(t, err)
	require.True(t, ran)
}

func TestOnceConcurrent(t *testing.T) {
	s := mustOpen(t, "db", testOptions(vfs.NewMem(), newFakeClock()))
	defer s.Close()
	ctx := context.Background()
	var calls, ranTrue atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ran, err := s.Once(ctx, []byte("same"), func(context.Context) error {
				calls.Add(1)
				time.Sleep(time.Millisecond) // widen the race window
				return nil
			})
			if err != nil {
				t.Error(err)
			}
			if ran {
				ranTrue.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	require.EqualValues(t, 1, calls.Load())
	require.EqualValues(t, 1, ranTrue.Load())
	require.Zero(t, s.once.size(), "lock entries are released")
}

func TestOnceWaitRespectsContext(t *testing.T) {
	s := mustOpen(t, "db", testOptions(vfs.NewMem(), newFakeClock()))
	defer s.Close()
	holding, release := make(chan struct{}), make(chan struct{})
	go func() {
		_, _ = s.Once(context.Background(), []byte("id"), func(context.Context) error {
			close(holding)
			<-release
			return nil
		})
	}()
	<-holding
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	ran, err := s.Once(ctx, []byte("id"), func(context.Context) error { return nil })
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.False(t, ran)
	close(release)
	require.Eventually(t, func() bool { return s.once.size() == 0 }, time.Second, time.Millisecond)
}

func TestClaimConcurrent(t *testing.T) {
	s := mustOpen(t, "db", testOptions(vfs.NewMem(), newFakeClock()))
	defer s.Close()
	var wins atomic.Int32
	var wg sync.WaitGroup
	for g := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var first bool
			var err error
			if g%2 == 0 {
				first, err = s.Claim([]byte("same"))
			} else {
				var fs []bool
				fs, err = s.ClaimBatch([][]byte{[]byte("other"), []byte("same")})
				if err == nil {
					first = fs[1]
				}
			}
			if err != nil {
				t.Error(err)
			}
			if first {
				wins.Add(1)
			}
		}()
	}
	wg.Wait()
	require.EqualValues(t, 1, wins.Load())
}
