// Package brokerretry rides out what a Kafka cluster passes through by
// itself: a refused dial while a node restarts, a leader or coordinator
// that moved, a topic that not every broker knows yet, a request that
// timed out. It retries such errors until the caller's context ends and
// gives up at once on refusals no retry cures (credentials,
// authorization, lost data). eosbench's input producer, read-back and
// verifier use it, so that a FAIL means a broken guarantee, never a
// hiccup of the brokers (issue 45).
package brokerretry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/clientsec"
)

// Pauses between two tries: short at first, since most hiccups pass
// within a metadata refresh, and capped low, since a request every quarter
// second is nothing to a cluster and the end of a hiccup is then seen at
// once.
const (
	firstPause = 50 * time.Millisecond
	maxPause   = 250 * time.Millisecond
)

// Transient reports whether err may pass by itself. It follows franz-go's
// judgement: a broker's error code is transient when its kerr.Error says
// Retriable, and refused or reset connections, timeouts and EOFs are
// network errors franz-go retries too (it leaves refused dials to each
// caller, which is how a refused ListOffsets once failed a clean run).
// Final are: context errors (the caller's deadline or stop),
// kgo.ErrClientClosed, refused credentials and authorization
// (clientsec.IsAuthError), lost data (kgo.ErrDataLoss), an address that
// does not resolve or may not be dialed, and any error code a broker does
// not call retriable. Every error joined into err (kadm's shard errors)
// must be transient.
func Transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, kgo.ErrClientClosed) || clientsec.IsAuthError(err) {
		return false
	}
	var loss *kgo.ErrDataLoss
	if errors.As(err, &loss) {
		return false
	}
	// franz-go's permanent dial errors (isPermanentDialErr).
	var dns *net.DNSError
	if errors.As(err, &dns) && dns.IsNotFound || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM) {
		return false
	}
	transient := true
	walk(err, func(e error) {
		if ke, ok := e.(*kerr.Error); ok && !ke.Retriable {
			transient = false
		}
	})
	return transient
}

// notYet is a condition expected to pass, such as a topic a broker has not
// learned of yet.
type notYet struct{ err error }

func (n *notYet) Error() string { return n.err.Error() }
func (n *notYet) Unwrap() error { return n.err }

// NotYet marks err, a condition expected to pass, as transient; Do logs
// it at debug level only.
func NotYet(err error) error { return &notYet{err} }

// Do calls fn until it returns nil or an error that is not Transient,
// pausing between tries from 50 ms doubling up to 250 ms. Hiccups are logged
// as Hiccups does, with what (what was being done); a recovery after one
// is logged too. When ctx ends first, Do returns ctx's error with fn's
// last one (what was not ready).
func Do(ctx context.Context, log *slog.Logger, what string, fn func() error) error {
	h := &Hiccups{Log: log, What: what}
	start, pause := time.Now(), firstPause
	var last error
	for {
		err := fn()
		if err == nil {
			h.passed(time.Since(start))
			return nil
		}
		if ctx.Err() == nil {
			if !Transient(err) {
				return err
			}
			last = err
			h.Note(err)
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			if last == nil {
				return ctx.Err()
			}
			return fmt.Errorf("%w (last: %w)", ctx.Err(), last)
		case <-t.C:
		}
		pause = min(2*pause, maxPause)
	}
}

// Hiccups logs transient errors met while doing What: the first of each
// kind at info level (NotYet conditions at debug), the rest only counted,
// so that a minute of refused dials is one line, not hundreds. The zero
// Log discards.
type Hiccups struct {
	Log  *slog.Logger
	What string

	mu   sync.Mutex
	seen map[string]bool
	n    int
}

// Note records one transient error.
func (h *Hiccups) Note(err error) {
	k := kind(err)
	h.mu.Lock()
	first := !h.seen[k]
	if h.seen == nil {
		h.seen = make(map[string]bool)
	}
	h.seen[k] = true
	h.n++
	h.mu.Unlock()
	if !first || h.Log == nil {
		return
	}
	level := slog.LevelInfo
	var ny *notYet
	if errors.As(err, &ny) {
		level = slog.LevelDebug
	}
	h.Log.Log(context.Background(), level, "broker hiccup: retrying", "what", h.What, "kind", k, "err", err)
}

// passed logs, after hiccups, that they passed.
func (h *Hiccups) passed(took time.Duration) {
	h.mu.Lock()
	n := h.n
	h.mu.Unlock()
	if n > 0 && h.Log != nil {
		h.Log.Info("broker hiccup passed", "what", h.What, "retries", n, "took", took.Round(time.Millisecond))
	}
}

// KgoLogger returns a franz-go logger that notes to h every transient
// error franz-go logs (with its "err" key), for the retries franz-go makes
// by itself: a producer's, a consumer's. What it gives up on reaches its
// caller.
func (h *Hiccups) KgoLogger() kgo.Logger { return kgoLogger{h} }

type kgoLogger struct{ h *Hiccups }

// Level is info: franz-go logs a retried produce or metadata wait there.
func (kgoLogger) Level() kgo.LogLevel { return kgo.LogLevelInfo }

func (l kgoLogger) Log(_ kgo.LogLevel, _ string, keyvals ...any) {
	for i := 0; i+1 < len(keyvals); i += 2 {
		if k, _ := keyvals[i].(string); k == "err" {
			if err, ok := keyvals[i+1].(error); ok && Transient(err) {
				l.h.Note(err)
			}
		}
	}
}

// kind names err's kind for Hiccups: a broker's error code, the system
// call error (connection refused, reset), a timeout, an EOF, or the
// innermost error's type.
func kind(err error) string {
	var (
		ke    *kerr.Error
		ny    *notYet
		errno syscall.Errno
		ne    net.Error
	)
	switch {
	case errors.As(err, &ke):
		return ke.Message
	case errors.As(err, &ny):
		return "not yet"
	case errors.As(err, &errno):
		return errno.Error()
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return "EOF"
	}
	inner := err
	walk(err, func(e error) { inner = e })
	return fmt.Sprintf("%T", inner)
}

// walk calls fn on err and every error it wraps, depth first.
func walk(err error, fn func(error)) {
	if err == nil {
		return
	}
	fn(err)
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		walk(u.Unwrap(), fn)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			walk(e, fn)
		}
	}
}
