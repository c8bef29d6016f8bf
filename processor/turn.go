package processor

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// runTurn runs up to turn records of s on w. Then s goes to the back of
// the run queue if it has more, waits on its own goroutine if its record
// backs off before a retry, or ends if it has none.
func (d *dispatcher) runTurn(w *worker, s *session) {
	sh := s.sh
	sh.mu.Lock()
	for n := 0; ; n++ {
		it := s.cur
		if it == nil {
			if s.head == len(s.queue) {
				sh.idleSession(s)
				sh.mu.Unlock()
				d.active.Add(-1)
				return
			}
			if n >= turn {
				s.state = sessionQueued
				sh.mu.Unlock()
				d.schedule(s)
				return
			}
			it = s.queue[s.head]
			s.queue[s.head] = nil
			if s.head++; s.head == len(s.queue) {
				s.queue, s.head = s.queue[:0], 0 // reuse the array
			}
			s.cur = it
		}
		s.state, s.w = sessionRunning, w
		sh.mu.Unlock()

		delay, retry := d.attempt(w, it)

		sh.mu.Lock()
		s.w = nil
		d.renew(w) // under sh.mu: cancelStuck no longer sees w
		if retry {
			kick := make(chan struct{})
			s.state, s.kick = sessionWaiting, kick
			sh.mu.Unlock()
			d.wg.Add(1) // the worker's own count keeps wg above zero
			go d.backoff(s, delay, kick)
			return
		}
		s.cur = nil
	}
}

// backoff waits out a retry's delay (cut short when the record is declared
// stuck or the dispatcher stops), then puts s back on the run queue.
func (d *dispatcher) backoff(s *session, delay time.Duration, kick chan struct{}) {
	defer d.wg.Done()
	select {
	case <-d.cfg.clock.After(delay):
	case <-kick:
	case <-d.ctx.Done():
	}
	s.sh.mu.Lock()
	s.state, s.kick = sessionQueued, nil
	s.sh.mu.Unlock()
	d.schedule(s)
}

// renew gives w a fresh handler context after a stuck record's was
// canceled. The session's shard lock is held, with s.w no longer w.
func (d *dispatcher) renew(w *worker) {
	if w.ctx.Err() != nil && d.ctx.Err() == nil {
		w.ctx, w.cancel = context.WithCancel(d.ctx)
	}
}

// attempt runs the handler once for it. It returns the delay before the
// next attempt and true when the error is transient and retries remain;
// otherwise the item went back to the loop finished (outputs or a
// dead-letter record) or was dropped as stale.
func (d *dispatcher) attempt(w *worker, it *item) (time.Duration, bool) {
	cfg := d.cfg
	if it.gen != it.part.gen.Load() || it.stuck.Load() || d.ctx.Err() != nil {
		d.abandon(it) // revoked, rewound, dead-lettered as stuck, or stopping
		return 0, false
	}
	if d.tracer != nil && (it.x == nil || it.x.span == nil) {
		x := it.extra()
		x.spanCtx, x.span = startHandle(context.Background(), d.tracer, it)
	}
	it.resetAttempt()
	it.attempts++
	ctx := w.ctx
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
		err = callHandler(cfg.handler, ctx, it.rec, it)
	}
	if err == nil {
		err = d.checkOutputs(it)
	}
	if err == nil {
		publishWrites(it)
		d.finish(it, "", nil)
		return 0, false
	}
	if it.stuck.Load() || d.ctx.Err() != nil {
		d.abandon(it) // the loop already dead-lettered it, or we are stopping
		return 0, false
	}
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
func (d *dispatcher) finish(it *item, reason string, err error) {
	if ctx, span := it.span(); span != nil {
		endHandle(ctx, span, it, reason, err)
		it.x.span, it.x.spanCtx = nil, nil
	}
	d.complete(it)
}

// abandon ends the span of an item that produces nothing.
func (d *dispatcher) abandon(it *item) {
	if _, span := it.span(); span != nil {
		abandonHandle(span, it)
		it.x.span, it.x.spanCtx = nil, nil
	}
}

// classify says which dead-letter reason a failed attempt's error has,
// if any ("" to retry it), and returns the error to record: a panic of
// the WithPermanentErrors classifier replaces the error it classified.
func (d *dispatcher) classify(err error) (string, error) {
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
func (d *dispatcher) keyPanic(it *item) *PanicError {
	if d.cfg.sessionKey == nil || it.sess == nil {
		return nil
	}
	if k := it.sess.key; len(k) < len(panicKeyPrefix) || string(k[:len(panicKeyPrefix)]) != panicKeyPrefix {
		return nil // compared without a conversion that allocates: once per record
	}
	return panicFromKey(it.sess.key)
}

var errNoTopic = errors.New("processor: emitted record has no topic and no default output topic is set")

func (d *dispatcher) checkOutputs(it *item) error {
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
