package brokerretry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func refused() error {
	return fmt.Errorf("unable to dial: %w", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)})
}

func TestTransient(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{refused(), true},
		{kerr.NotLeaderForPartition, true},
		{fmt.Errorf("listing: %w", kerr.UnknownTopicOrPartition), true},
		{kerr.CoordinatorNotAvailable, true},
		{kerr.NotCoordinator, true},
		{kerr.RequestTimedOut, true},
		{io.EOF, true},
		{NotYet(errors.New("2 of 3 topics known")), true},
		{errors.Join(refused(), kerr.NotLeaderForPartition), true},

		{nil, false},
		{kerr.TopicAuthorizationFailed, false},
		{kerr.SaslAuthenticationFailed, false},
		{kerr.UnknownServerError, false},
		{errors.Join(refused(), kerr.TopicAuthorizationFailed), false},
		{errors.Join(kerr.NotLeaderForPartition, kerr.InvalidRequest), false},
		{kgo.ErrClientClosed, false},
		{context.Canceled, false},
		{fmt.Errorf("%w (last: %w)", context.DeadlineExceeded, kerr.NotLeaderForPartition), false},
		{&kgo.ErrDataLoss{Topic: "t"}, false},
		{&net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", IsNotFound: true}}, false},
	} {
		require.Equal(t, c.want, Transient(c.err), "%v", c.err)
	}
}

func TestDoRetriesHiccupsUntilTheyPass(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	errs := []error{refused(), refused(), kerr.NotLeaderForPartition, refused(), kerr.NotLeaderForPartition}
	calls := 0
	err := Do(context.Background(), log, "listing offsets", func() error {
		calls++
		if calls <= len(errs) {
			return errs[calls-1]
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, len(errs)+1, calls)
	out := buf.String()
	require.Equal(t, 2, strings.Count(out, "broker hiccup: retrying"), "once per kind: %s", out)
	require.Contains(t, out, "kind=\"connection refused\"")
	require.Contains(t, out, "kind=NOT_LEADER_FOR_PARTITION")
	require.Contains(t, out, `msg="broker hiccup passed" what="listing offsets" retries=5`)
}

func TestDoFailsAtOnceOnARefusal(t *testing.T) {
	calls := 0
	err := Do(context.Background(), nil, "listing offsets", func() error {
		calls++
		if calls == 1 {
			return refused()
		}
		return kerr.TopicAuthorizationFailed
	})
	require.ErrorIs(t, err, kerr.TopicAuthorizationFailed)
	require.Equal(t, 2, calls)
}

func TestDoEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := Do(ctx, nil, "listing offsets", func() error { return kerr.NotLeaderForPartition })
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, kerr.NotLeaderForPartition, "the last hiccup is named")
	require.False(t, Transient(err))
}

func TestKgoLoggerNotesFranzGoRetries(t *testing.T) {
	var buf bytes.Buffer
	h := &Hiccups{Log: slog.New(slog.NewTextHandler(&buf, nil)), What: "producing"}
	l := h.KgoLogger()
	for range 10 {
		l.Log(kgo.LogLevelInfo, "batch in a produce request failed", "topic", "in", "err", kerr.UnknownTopicOrPartition)
	}
	l.Log(kgo.LogLevelInfo, "flushing")
	require.Equal(t, 1, strings.Count(buf.String(), "broker hiccup"), buf.String())
	require.Contains(t, buf.String(), "UNKNOWN_TOPIC_OR_PARTITION")
}
