package processor

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

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
