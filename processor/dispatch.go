package processor

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// dispatcher runs records on session goroutines. A session's key is hashed
// (FNV-1a, then jump consistent hashing) to a shard that owns the map of its
// live sessions; each session has one goroutine that handles its records
// one at a time, in dispatch order, and ends after an idle timeout, so
// goroutines follow the number of active sessions.
type dispatcher struct {
	cfg      *config
	shards   []shard
	complete func(*item) // hands a finished item back to the loop
	retries  *atomic.Int64
	tracer   trace.Tracer // nil: no tracing
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

type shard struct {
	mu       sync.Mutex
	sessions map[string]*session
	_        [40]byte // keep shards' locks off one cache line
}

type session struct {
	sh     *shard
	key    string
	queue  []*item // guarded by sh.mu; queue[head:] is waiting
	head   int
	wake   chan struct{}
	ctx    context.Context // canceled on shutdown or when a record is stuck
	cancel context.CancelFunc
}

func newDispatcher(cfg *config, shards int, complete func(*item)) *dispatcher {
	d := &dispatcher{cfg: cfg, shards: make([]shard, shards), complete: complete}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	for i := range d.shards {
		d.shards[i].sessions = make(map[string]*session)
	}
	return d
}

func fnv1a(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

// jump is Lamping and Veach's jump consistent hash.
func jump(key uint64, buckets int) int {
	var b, j int64 = -1, 0
	for j < int64(buckets) {
		b = j
		key = key*2862933555777941757 + 1
		j = int64(float64(b+1) * (float64(int64(1)<<31) / float64((key>>33)+1)))
	}
	return int(b)
}

// dispatch queues it on its session, starting the session if needed.
func (d *dispatcher) dispatch(key []byte, it *item) {
	sh := &d.shards[jump(fnv1a(key), len(d.shards))]
	sh.mu.Lock()
	s := sh.sessions[string(key)]
	if s == nil {
		s = &session{sh: sh, key: string(key), wake: make(chan struct{}, 1)}
		s.ctx, s.cancel = context.WithCancel(d.ctx)
		sh.sessions[s.key] = s
		d.wg.Add(1)
		go d.run(s)
	}
	it.sess = s
	s.queue = append(s.queue, it)
	sh.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// activeSessions counts live session goroutines.
func (d *dispatcher) activeSessions() int {
	n := 0
	for i := range d.shards {
		sh := &d.shards[i]
		sh.mu.Lock()
		n += len(sh.sessions)
		sh.mu.Unlock()
	}
	return n
}

// stop cancels every handler and waits for the session goroutines.
func (d *dispatcher) stop() {
	d.cancel()
	for i := range d.shards {
		sh := &d.shards[i]
		sh.mu.Lock()
		for _, s := range sh.sessions {
			select {
			case s.wake <- struct{}{}:
			default:
			}
		}
		sh.mu.Unlock()
	}
	d.wg.Wait()
}

func (d *dispatcher) run(s *session) {
	defer d.wg.Done()
	idle := time.NewTimer(d.cfg.idleSession)
	defer idle.Stop()
	for {
		it := d.next(s, idle)
		if it == nil {
			return
		}
		d.handle(s, it)
	}
}

// next returns the session's next item, or nil when the session ends.
func (d *dispatcher) next(s *session, idle *time.Timer) *item {
	for {
		s.sh.mu.Lock()
		if d.ctx.Err() != nil {
			delete(s.sh.sessions, s.key)
			s.sh.mu.Unlock()
			return nil
		}
		if s.head < len(s.queue) {
			it := s.queue[s.head]
			s.queue[s.head] = nil
			s.head++
			if s.head == len(s.queue) {
				s.queue, s.head = s.queue[:0], 0 // reuse the array
			}
			s.sh.mu.Unlock()
			if it.gen != it.part.gen.Load() {
				continue // revoked or rewound since dispatch
			}
			return it
		}
		s.sh.mu.Unlock()
		idle.Reset(d.cfg.idleSession)
		select {
		case <-s.wake:
			continue
		case <-idle.C:
		}
		s.sh.mu.Lock()
		if s.head == len(s.queue) {
			delete(s.sh.sessions, s.key)
			s.sh.mu.Unlock()
			s.cancel()
			return nil
		}
		s.sh.mu.Unlock()
	}
}

// handle runs the handler with retries; the item goes back to the loop
// finished (outputs or a dead-letter record) unless it went stale.
func (d *dispatcher) handle(s *session, it *item) {
	cfg := d.cfg
	d.resetSessionCtx(s)
	var span trace.Span
	var spanCtx context.Context
	if d.tracer != nil {
		spanCtx, span = startHandle(context.Background(), d.tracer, it)
		defer func() {
			if span != nil { // stale, stuck or stopping: no outputs from here
				abandonHandle(span, it)
			}
		}()
	}
	// finish hands it back to the loop, ending its span first: once the
	// loop has it, the session must not touch it.
	finish := func(reason string, err error) {
		if span != nil {
			endHandle(spanCtx, span, it, reason, err)
			span = nil
		}
		d.complete(it)
	}
	for {
		it.outputs, it.writes = it.outputs[:0], it.writes[:0]
		it.attempts++
		ctx := s.ctx
		if span != nil {
			ctx = trace.ContextWithSpan(ctx, span)
		}
		if it.part.state != nil || it.part.dedupe != nil {
			ctx = context.WithValue(ctx, itemKey{}, it)
		}
		err := cfg.handler(ctx, it.rec, it)
		if err == nil {
			err = d.checkOutputs(it)
		}
		if err == nil {
			publishWrites(it)
			finish("", nil)
			return
		}
		if it.stuck.Load() || d.ctx.Err() != nil {
			d.resetSessionCtx(s)
			return // the loop already dead-lettered it, or we are stopping
		}
		now := cfg.clock.Now()
		if it.firstFailure.IsZero() {
			it.firstFailure = now
		}
		var perm *PermanentError
		switch {
		case errors.As(err, &perm) || (cfg.permanent != nil && cfg.permanent(err)):
			it.outputs, it.writes = it.outputs[:0], it.writes[:0]
			it.dlq = deadLetter(cfg.dlq, it, reasonPermanent, err, it.attempts, it.firstFailure)
			finish(reasonPermanent, err)
			return
		case cfg.retry.exhausted(it.attempts, now.Sub(it.firstFailure)):
			it.outputs, it.writes = it.outputs[:0], it.writes[:0]
			it.dlq = deadLetter(cfg.dlq, it, reasonRetriesExhausted, err, it.attempts, it.firstFailure)
			finish(reasonRetriesExhausted, err)
			return
		}
		d.retries.Add(1)
		if span != nil {
			retryEvent(span, it.attempts, err)
		}
		select {
		case <-cfg.clock.After(cfg.retry.delay(it.attempts)):
		case <-s.ctx.Done():
		}
		if it.gen != it.part.gen.Load() {
			return // revoked while backing off
		}
	}
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

// resetSessionCtx gives the session a fresh context after a stuck record's
// was canceled.
func (d *dispatcher) resetSessionCtx(s *session) {
	if s.ctx.Err() == nil || d.ctx.Err() != nil {
		return
	}
	s.sh.mu.Lock()
	s.ctx, s.cancel = context.WithCancel(d.ctx)
	s.sh.mu.Unlock()
}

// cancelStuck cancels the handler context of a stuck record's session.
func cancelStuck(it *item) {
	s := it.sess
	s.sh.mu.Lock()
	s.cancel()
	s.sh.mu.Unlock()
}
