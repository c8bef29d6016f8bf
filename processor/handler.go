package processor

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"
)

// emitter is an item as its handler's Emitter: it sees only the outputs.
type emitter item

// Emit implements Emitter: an output without a key gets its input's.
func (e *emitter) Emit(r *kgo.Record) {
	if r.Key == nil {
		r.Key = e.rec.Key
	}
	e.outputs = append(e.outputs, r)
}

// handlers runs the handler for records on the pool's workers
// (sched.Config.Attempt): one attempt at a time, its error's
// classification, retries and dead letters, and the hand-back of a
// finished record to the loop.
type handlers struct {
	cfg      *config
	complete func(*item) // hands a finished item back to the loop
	retries  *atomic.Int64
	tracer   trace.Tracer // nil: no tracing
	stopped  func() bool  // the pool is stopping
}

// attempt runs the handler once for it. It returns the delay before the
// next attempt and true when the error is transient and retries remain;
// otherwise the item went back to the loop finished (outputs or a
// dead-letter record) or was dropped as stale.
func (d *handlers) attempt(wctx context.Context, it *item) (time.Duration, bool) {
	cfg := d.cfg
	if it.gen != it.part.gen.Load() || it.stuck.Load() || d.stopped() {
		d.abandon(it) // revoked, rewound, dead-lettered as stuck, or stopping
		return 0, false
	}
	if d.tracer != nil && (it.x == nil || it.x.span == nil) {
		x := it.extra()
		x.spanCtx, x.span = startHandle(context.Background(), d.tracer, it)
	}
	it.resetAttempt()
	it.attempts++
	ctx := wctx
	if _, span := it.span(); span != nil {
		ctx = trace.ContextWithSpan(ctx, span)
	}
	if len(it.part.keyspaces) > 0 { // State and Once find their keyspace through it
		ctx = context.WithValue(ctx, itemKey{}, it)
	}
	var err error
	if pe := d.keyPanic(it); pe != nil {
		err = pe // its session key function panicked: the handler does not run
	} else {
		err = callHandler(cfg.handler, ctx, it.rec, (*emitter)(it))
	}
	if x := it.x; x != nil && x.storeErr != nil {
		// A read of the store failed: a value the handler may have taken
		// for absent must not commit, nor be dead-lettered as the
		// record's fault, nor retried in a loop against a failing disk.
		// The loop stops Run with it at admission (tryAdmit).
		it.resetAttempt()
		d.finish(it, "", nil)
		return 0, false
	}
	if err == nil {
		err = d.checkOutputs(it)
	}
	if err == nil {
		publishWrites(it)
		d.finish(it, "", nil)
		return 0, false
	}
	if it.stuck.Load() || d.stopped() {
		d.abandon(it) // the loop already dead-lettered it, or we are stopping
		return 0, false
	}
	return d.failed(it, err)
}

// failed decides what becomes of it after an attempt failed with err:
// a retry after a delay (true), or a dead letter.
func (d *handlers) failed(it *item, err error) (time.Duration, bool) {
	cfg := d.cfg
	now := cfg.clock.Now()
	x := it.extra()
	if x.firstFailure.IsZero() {
		x.firstFailure = now
	}
	reason, err := d.classify(err)
	if reason == "" && cfg.retry.exhausted(int(it.attempts), now.Sub(x.firstFailure)) {
		reason = reasonRetriesExhausted
	}
	if reason != "" {
		it.resetAttempt()
		it.dlq = deadLetter(cfg.dlq, it, reason, err, int(it.attempts), x.firstFailure)
		x.failure = err
		if reason == reasonPanic {
			logPanic(cfg, it, err)
		}
		d.finish(it, reason, err)
		return 0, false
	}
	d.retries.Add(1)
	if x.span != nil {
		retryEvent(x.span, int(it.attempts), err)
	}
	return cfg.retry.delay(int(it.attempts)), true
}

// finish hands it back to the loop, ending its span first: once the loop
// has it, the worker must not touch it.
func (d *handlers) finish(it *item, reason string, err error) {
	if ctx, span := it.span(); span != nil {
		endHandle(ctx, span, it, reason, err)
		it.x.span, it.x.spanCtx = nil, nil
	}
	d.complete(it)
}

// abandon ends the span of an item that produces nothing.
func (d *handlers) abandon(it *item) {
	if _, span := it.span(); span != nil {
		abandonHandle(span, it)
		it.x.span, it.x.spanCtx = nil, nil
	}
}

// classify says which dead-letter reason a failed attempt's error has,
// if any ("" to retry it), and returns the error to record: a panic of
// the WithPermanentErrors classifier replaces the error it classified.
func (d *handlers) classify(err error) (string, error) {
	var perm *PermanentError
	var pe *PanicError
	switch {
	case errors.As(err, &pe):
		return reasonPanic, err
	case errors.As(err, &perm):
		return reasonPermanent, err
	case d.cfg.permanent != nil:
		isPerm, pe := callClassifier(d.cfg.permanent, err)
		if pe != nil {
			return reasonPanic, pe
		}
		if isPerm {
			return reasonPermanent, err
		}
	}
	return "", err
}

// keyPanic returns the panic of the WithSessionKey function for it's
// record, carried by its session key (see panicKeyPrefix), or nil.
func (d *handlers) keyPanic(it *item) *PanicError {
	if d.cfg.sessionKey == nil || it.sess == nil {
		return nil
	}
	if k := it.sess.Key(); len(k) < len(panicKeyPrefix) || string(k[:len(panicKeyPrefix)]) != panicKeyPrefix {
		return nil // compared without a conversion that allocates: once per record
	}
	return panicFromKey(it.sess.Key())
}

var errNoTopic = errors.New("processor: emitted record has no topic and no default output topic is set")

func (d *handlers) checkOutputs(it *item) error {
	if d.cfg.output != "" {
		return nil
	}
	for _, r := range it.outputs {
		if r.Topic == "" {
			return Permanent(errNoTopic)
		}
	}
	return nil
}

// PanicError is a panic of user code that the processor recovered: of the
// handler (and what it calls, Once's effects included), of the
// WithPermanentErrors classifier, of the WithSessionKey or WithEventID
// function. The record is treated as failed permanently: it goes to the
// dead-letter topic with reason "panic" and Error and Stack in its
// HeaderError; without a dead-letter topic Run stops with an error
// wrapping both ErrHandlerPanic and ErrNoDLQ, and the record is not
// committed. It wraps ErrHandlerPanic, and the panic value too if that is
// an error.
type PanicError struct {
	// In says what panicked: "handler" (and what it calls), or the
	// "WithPermanentErrors classifier", "WithSessionKey function" or
	// "WithEventID function".
	In string
	// Value is what was passed to panic (a runtime.Error for a nil
	// dereference, say); its text, for a WithSessionKey function's
	// panic, which reaches the record as text.
	Value any
	// Where is the function and file:line that panicked ("" if unknown).
	Where string
	// Stack is the panicking goroutine's frames from the panic down to
	// the processor's call of the user code, at most maxPanicFrames of
	// them: what a crash would have printed of the user's code, without
	// the processor's and the runtime's frames below it.
	Stack string
}

func (e *PanicError) Error() string {
	if e.Where == "" {
		return fmt.Sprintf("%s panicked: %v", e.In, e.Value)
	}
	return fmt.Sprintf("%s panicked: %v (at %s)", e.In, e.Value, e.Where)
}

func (e *PanicError) Unwrap() []error {
	if err, ok := e.Value.(error); ok {
		return []error{ErrHandlerPanic, err}
	}
	return []error{ErrHandlerPanic}
}

// detail is the dead-letter record's error header: the message, then the
// stack.
func (e *PanicError) detail() string {
	if e.Stack == "" {
		return e.Error()
	}
	return e.Error() + "\n" + e.Stack
}

// maxPanicFrames bounds the frames a PanicError keeps: enough to find the
// bug, little enough for a record header.
const maxPanicFrames = 32

// recoverFuncs are the functions through which the processor calls user
// code: a panic's stack is kept down to the first of them. (Named, not
// taken from the functions, which refer to this through newPanicError.)
var recoverFuncs = func() map[string]bool {
	pkg := reflect.TypeFor[PanicError]().PkgPath() + "."
	return map[string]bool{pkg + "callHandler": true, pkg + "callClassifier": true, pkg + "callRecordFunc": true}
}()

// newPanicError captures the stack of the panic being recovered; call it
// in the deferred function that recovered v.
func newPanicError(in string, v any) *PanicError {
	pcs := make([]uintptr, 64+maxPanicFrames)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(1, pcs)])
	e := &PanicError{In: in, Value: v}
	var b strings.Builder
	inPanic, n := false, 0
	for {
		f, more := frames.Next()
		switch {
		case !inPanic:
			// Frames above the panic: this function, the deferred
			// one, the runtime's panic machinery.
			inPanic = f.Function == "runtime.gopanic"
		case recoverFuncs[f.Function]:
			more = false
		case strings.HasPrefix(f.Function, "runtime.") && n == 0:
			// A runtime error's own frames (sigpanic, panicmem,
			// mapassign...): the user's line is the next one.
		case n == maxPanicFrames:
			b.WriteString("...\n")
			more = false
		default:
			if n == 0 {
				e.Where = fmt.Sprintf("%s, %s:%d", f.Function, shortFile(f.File), f.Line)
			}
			fmt.Fprintf(&b, "%s\n\t%s:%d\n", f.Function, f.File, f.Line)
			n++
		}
		if !more {
			break
		}
	}
	e.Stack = strings.TrimSuffix(b.String(), "\n")
	return e
}

// shortFile is a path's last two elements, as in "pkg/file.go".
func shortFile(path string) string {
	i := strings.LastIndexByte(path, '/')
	if i > 0 {
		if j := strings.LastIndexByte(path[:i], '/'); j >= 0 {
			return path[j+1:]
		}
	}
	return path
}

// callHandler runs the handler, turning a panic into a *PanicError.
func callHandler(h Handler, ctx context.Context, rec *kgo.Record, out Emitter) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = newPanicError("handler", v)
		}
	}()
	return h(ctx, rec, out)
}

// callClassifier runs the WithPermanentErrors classifier; a panic is
// returned, to be treated as the record's.
func callClassifier(isPermanent func(error) bool, err error) (perm bool, perr *PanicError) {
	defer func() {
		if v := recover(); v != nil {
			perr = newPanicError("WithPermanentErrors classifier", v)
		}
	}()
	return isPermanent(err), nil
}

// callRecordFunc runs a function of the record that the loop calls
// before dispatch (WithEventID's or WithSessionKey's, named by in); a
// panic is returned.
func callRecordFunc(in string, fn func(*kgo.Record) []byte, r *kgo.Record) (b []byte, perr *PanicError) {
	defer func() {
		if v := recover(); v != nil {
			perr = newPanicError(in, v)
		}
	}()
	return fn(r), nil
}

// panicKeyPrefix starts the session key that recoverSessionKey gives a
// record whose WithSessionKey function panicked. The loop calls that
// function while dispatching and has nowhere to put an error, so the key
// itself carries the panic to the worker, which dead-letters the record
// instead of running its handler (panicFromKey). A NUL byte and this text
// make a clash with a real key as good as impossible; all such records
// then share a session or a few, which matters not: none of them runs.
const panicKeyPrefix = "\x00onceflow: the session key function panicked\x00"

// recoverSessionKey wraps a WithSessionKey function so that a panic
// becomes a key that says so (see panicKeyPrefix) rather than the end of
// the loop and the process.
func recoverSessionKey(fn func(*kgo.Record) []byte) func(*kgo.Record) []byte {
	return func(r *kgo.Record) []byte {
		key, perr := callRecordFunc("WithSessionKey function", fn, r)
		if perr == nil {
			return key
		}
		return []byte(panicKeyPrefix + fmt.Sprint(perr.Value) + "\x00" + perr.Where + "\x00" + perr.Stack)
	}
}

// panicFromKey returns the panic a session key carries, or nil.
func panicFromKey(key []byte) *PanicError {
	s, ok := strings.CutPrefix(string(key), panicKeyPrefix)
	if !ok {
		return nil
	}
	parts := strings.SplitN(s, "\x00", 3)
	for len(parts) < 3 {
		parts = append(parts, "")
	}
	return &PanicError{In: "WithSessionKey function", Value: parts[0], Where: parts[1], Stack: parts[2]}
}

// deadLetter builds the dead-letter copy of it's input record. It must be
// called by whoever owns it (the session, or the loop for a stuck record,
// which reads only fields the session does not write).
func deadLetter(topic string, it *item, reason string, err error, attempts int, firstFailure time.Time) *kgo.Record {
	in := it.rec
	first := ""
	if !firstFailure.IsZero() {
		first = firstFailure.UTC().Format(time.RFC3339Nano)
	}
	hs := make([]kgo.RecordHeader, 0, 7+len(in.Headers))
	hs = append(hs,
		kgo.RecordHeader{Key: HeaderSourceTopic, Value: []byte(in.Topic)},
		kgo.RecordHeader{Key: HeaderSourcePartition, Value: strconv.AppendInt(nil, int64(in.Partition), 10)},
		kgo.RecordHeader{Key: HeaderSourceOffset, Value: strconv.AppendInt(nil, in.Offset, 10)},
		kgo.RecordHeader{Key: HeaderReason, Value: []byte(reason)},
		kgo.RecordHeader{Key: HeaderError, Value: []byte(errText(err))},
		kgo.RecordHeader{Key: HeaderAttempts, Value: strconv.AppendInt(nil, int64(attempts), 10)},
		kgo.RecordHeader{Key: HeaderFirstFailure, Value: []byte(first)},
	)
	hs = append(hs, in.Headers...)
	return &kgo.Record{Topic: topic, Key: in.Key, Value: in.Value, Headers: hs}
}

// errText is the error header's text: a panic's with its stack.
func errText(err error) string {
	var pe *PanicError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &pe):
		return pe.detail()
	}
	return err.Error()
}

// noDLQError is Run's error for a record that needs the dead-letter
// topic when none is set.
func noDLQError(it *item) error {
	r := it.rec
	var pe *PanicError
	if it.x != nil && errors.As(it.x.failure, &pe) {
		return fmt.Errorf("processor: record %s/%d@%d: %w; %w", r.Topic, r.Partition, r.Offset, pe, ErrNoDLQ)
	}
	return fmt.Errorf("%w: %s/%d@%d: %s", ErrNoDLQ, r.Topic, r.Partition, r.Offset, headerValue(it.dlq, HeaderError))
}

// logPanic reports a recovered panic where it happened, with its stack:
// the record's fate follows (a dead letter, or Run's error without a
// dead-letter topic).
func logPanic(cfg *config, it *item, err error) {
	var pe *PanicError
	if !errors.As(err, &pe) {
		return
	}
	fate := "the record goes to the dead-letter topic"
	if cfg.dlq == "" {
		fate = "no dead-letter topic is set (WithDLQTopic): Run stops and the record is not committed"
	}
	cfg.logger.Error(pe.In+" panicked; "+fate, "topic", it.rec.Topic, "partition", it.rec.Partition,
		"offset", it.rec.Offset, "panic", fmt.Sprint(pe.Value), "at", pe.Where, "stack", pe.Stack)
}
