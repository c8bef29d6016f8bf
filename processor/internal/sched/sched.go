package sched

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Pool runs sessions' work units of type T on a pool of worker goroutines.
//
// A session's key is hashed (hashKey) to a shard that owns the map of its
// sessions. A session with work is on the run queue or on one worker at a
// time, so its units run one at a time in dispatch order. A session
// without work stays in the map only until its shard holds its share of
// maxIdleSessions such sessions, then they are all forgotten: what
// sessions cost follows the active ones, not all sessions seen, and a
// session that comes back soon is found without allocating. A session
// backing off before a retry leaves its worker and waits on a goroutine of
// its own, so a retrying session holds no worker that other sessions need.
//
// Workers start when work waits and none is idle, up to maxWorkers (a
// unit that blocks holds its worker), and end after Config.IdleWorker
// without work. At most maxSpinning woken workers are on their way to the
// run queue at a time, and no more than sessions wait there; a worker that
// takes a session and sees more waiting wakes the next, so fast units run
// on few workers and blocking ones draw more.
type Pool[T comparable] struct {
	cfg    Config[T]
	shards []shard[T]
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // workers and backoff waits

	mu       sync.Mutex    // guards what follows
	runq     []*Session[T] // FIFO: runq[runqHead:] wait for a worker
	runqHead int
	idle     []*worker // parked workers, the most recent last
	workers  int
	spinning int // woken or started workers not yet at the run queue
}

// Config is what a Pool needs of its user.
type Config[T comparable] struct {
	// Shards is the number of session maps (at least 1). Each has its
	// lock, which the dispatcher and the workers take for every unit:
	// the more shards, the less they wait on each other.
	Shards int
	// IdleWorker is how long a worker waits for work before it ends.
	IdleWorker time.Duration
	// After is the clock's time.After, for retries' backoffs.
	After func(time.Duration) <-chan time.Time
	// Attempt runs one attempt of t with ctx, the worker's context
	// (canceled by Session.Cancel or Stop). It returns the delay before
	// the next attempt and true to retry; false: t is finished.
	Attempt func(ctx context.Context, t T) (delay time.Duration, retry bool)
	// Bind tells t the session it is queued on, before t can run.
	Bind func(t T, s *Session[T])
	// Active counts the sessions with work queued, running or backing
	// off.
	Active *atomic.Int64
}

// New returns a pool without workers: they start with the first work.
func New[T comparable](cfg Config[T]) *Pool[T] {
	d := &Pool[T]{cfg: cfg, shards: make([]shard[T], max(1, cfg.Shards))}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	for i := range d.shards {
		sh := &d.shards[i]
		sh.sessions = make(map[uint64]*Session[T])
		sh.maxIdle = max(1, maxIdleSessions/len(d.shards))
		sh.maxFree = max(1, maxFreeSessions/len(d.shards))
	}
	return d
}

// maxWorkers bounds the worker goroutines; work units of more sessions than
// this whose units all block wait for a worker.
const maxWorkers = 4096

// maxSpinning bounds the workers woken at once: enough that workers
// whose units block are replaced quickly when the scheduler is busy,
// few enough that fast units do not wake a crowd for every burst.
const maxSpinning = 8

// turn is how many work units a session runs before it goes to the back of
// the run queue, so that a session with a long queue shares its worker.
const turn = 16

// maxIdleSessions bounds the sessions without work units kept in the
// shards' maps, and maxFreeSessions the forgotten ones kept for reuse, each
// shard holding its share.
const (
	maxIdleSessions = 8192
	maxFreeSessions = 8192
)

type shard[T comparable] struct {
	mu       sync.Mutex
	sessions map[uint64]*Session[T] // by key hash; collisions chain on next
	idle     int                    // sessions in the map without work units
	free     []*Session[T]          // forgotten sessions, for reuse
	maxIdle  int                    // the shard's share of maxIdleSessions
	maxFree  int                    // and of maxFreeSessions
	_        [24]byte               // keep shards' locks off one cache line
}

// Session is the queue of one session's work units. Guarded by sh.mu.
type Session[T comparable] struct {
	sh    *shard[T]
	hash  uint64
	key   []byte
	next  *Session[T] // next session with the same hash
	queue []T         // queue[head:] wait; in dispatch order
	head  int
	cur   T       // the record being handled or backing off
	w     *worker // the worker running cur, if any
	kick  chan struct{}
	state sessionState
}

type sessionState uint8

const (
	sessionQueued  sessionState = iota // on the run queue (or about to be)
	sessionRunning                     // on a worker
	sessionWaiting                     // backing off before a retry of cur
	sessionIdle                        // no work units; in the map until swept
)

type worker struct {
	wake   chan struct{}
	ctx    context.Context // the units' context; canceled by Session.Cancel
	cancel context.CancelFunc
}

// hashKey hashes a session key: FNV-1a, then murmur3's finalizer. FNV-1a
// alone leaves its top bits, which pick the shard, nearly the same for
// keys that differ in their last bytes ("session-0000" to "session-0999"
// fell on 4 of 8 shards, and on 10 of 64), so the dispatcher and the
// workers waited on a few shards' locks.
func hashKey(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	return h
}

// shardOf maps a hash to one of n shards (Lemire's multiply-shift, fairer
// and cheaper than a modulo).
func shardOf(h uint64, n int) int { return int((h >> 32) * uint64(n) >> 32) }

// dispatchBatch is how many woken sessions DispatchAll puts on the run
// queue at once: one lock of the run queue for several sessions, while
// workers start on the first ones before the rest are queued.
const dispatchBatch = 16

// DispatchAll queues each unit on its session (key returns a unit's
// session key, which the pool copies if it keeps it), scheduling the
// sessions that had no work. wakes is scratch space, returned for reuse.
func (d *Pool[T]) DispatchAll(items []T, key func(T) []byte, wakes []*Session[T]) []*Session[T] {
	for _, it := range items {
		if s := d.enqueue(key(it), it); s != nil {
			if wakes = append(wakes, s); len(wakes) == dispatchBatch {
				d.activate(wakes)
				wakes = wakes[:0]
			}
		}
	}
	if len(wakes) > 0 {
		d.activate(wakes)
	}
	clear(wakes)
	return wakes[:0]
}

// enqueue queues it on its session and returns the session if it had no
// work units: the caller schedules it.
func (d *Pool[T]) enqueue(key []byte, it T) *Session[T] {
	h := hashKey(key)
	sh := &d.shards[shardOf(h, len(d.shards))]
	sh.mu.Lock()
	s := sh.sessions[h]
	for s != nil && string(s.key) != string(key) {
		s = s.next
	}
	wake := s == nil || s.state == sessionIdle
	switch {
	case s == nil:
		s = sh.newSession(h, key)
	case s.state == sessionIdle:
		s.state = sessionQueued
		sh.idle--
	}
	d.cfg.Bind(it, s)
	s.queue = append(s.queue, it)
	sh.mu.Unlock()
	if !wake {
		return nil
	}
	return s
}

// newSession adds a session to the shard, reusing a forgotten one.
func (sh *shard[T]) newSession(h uint64, key []byte) *Session[T] {
	var s *Session[T]
	if n := len(sh.free); n > 0 {
		s, sh.free = sh.free[n-1], sh.free[:n-1]
	} else {
		s = &Session[T]{sh: sh}
	}
	s.hash, s.key, s.state = h, append(s.key[:0], key...), sessionQueued
	s.next = sh.sessions[h]
	sh.sessions[h] = s
	return s
}

// idleSession marks s as without work units, forgetting the shard's idle
// sessions once there are too many. sh.mu is held.
func (sh *shard[T]) idleSession(s *Session[T]) {
	var zero T
	s.state, s.cur, s.w = sessionIdle, zero, nil
	s.queue, s.head = s.queue[:0], 0
	if sh.idle++; sh.idle <= sh.maxIdle {
		return
	}
	for h, first := range sh.sessions {
		var keep *Session[T]
		for x := first; x != nil; {
			next := x.next
			if x.state == sessionIdle {
				x.next = nil
				if len(sh.free) < sh.maxFree {
					sh.free = append(sh.free, x)
				}
			} else {
				x.next, keep = keep, x
			}
			x = next
		}
		if keep == nil {
			delete(sh.sessions, h)
		} else {
			sh.sessions[h] = keep
		}
	}
	sh.idle = 0
}

// schedule puts sessions on the run queue and makes sure workers will
// look.
func (d *Pool[T]) schedule(ss ...*Session[T]) {
	d.mu.Lock()
	d.runq = append(d.runq, ss...)
	for range ss {
		d.wakeLocked()
	}
	d.mu.Unlock()
}

// activate schedules sessions that had no work units: they become active.
func (d *Pool[T]) activate(ss []*Session[T]) {
	d.cfg.Active.Add(int64(len(ss)))
	d.schedule(ss...)
}

// wakeLocked wakes an idle worker, or starts one, unless as many are on
// their way to the run queue as sessions wait there, or maxSpinning are.
// d.mu is held.
func (d *Pool[T]) wakeLocked() {
	if d.spinning >= min(maxSpinning, len(d.runq)-d.runqHead) || d.ctx.Err() != nil {
		return
	}
	if n := len(d.idle); n > 0 {
		w := d.idle[n-1]
		d.idle = d.idle[:n-1]
		d.spinning++
		w.wake <- struct{}{} // buffered, and only idle workers are sent to
		return
	}
	if d.workers >= maxWorkers {
		return
	}
	d.workers++
	d.spinning++
	w := &worker{wake: make(chan struct{}, 1)}
	w.ctx, w.cancel = context.WithCancel(d.ctx)
	d.wg.Add(1)
	go d.work(w)
}

// take returns the next runnable session, parking the worker while there
// is none; nil when the worker ends (stop, or idle too long). back says
// the worker comes from a turn: it was not counted as spinning.
func (d *Pool[T]) take(w *worker, idle *time.Timer, back bool) *Session[T] {
	d.mu.Lock()
	if !back {
		d.spinning--
	}
	for {
		if d.ctx.Err() != nil {
			d.workers--
			d.mu.Unlock()
			return nil
		}
		if d.runqHead < len(d.runq) {
			s := d.runq[d.runqHead]
			d.runq[d.runqHead] = nil
			d.runqHead++
			if d.runqHead == len(d.runq) {
				d.runq, d.runqHead = d.runq[:0], 0
			} else {
				d.wakeLocked() // more is waiting: let another worker see it
			}
			d.mu.Unlock()
			return s
		}
		d.idle = append(d.idle, w)
		d.mu.Unlock()
		idle.Reset(d.cfg.IdleWorker)
		select {
		case <-w.wake:
			idle.Stop()
			d.mu.Lock() // woken: spinning was counted for us
			d.spinning--
			continue
		case <-idle.C:
		}
		d.mu.Lock()
		if i := indexWorker(d.idle, w); i >= 0 {
			d.idle = append(d.idle[:i], d.idle[i+1:]...)
			d.workers--
			d.mu.Unlock()
			return nil
		}
		// Woken as the timer fired: take the wake.
		d.mu.Unlock()
		<-w.wake
		d.mu.Lock()
		d.spinning--
	}
}

func indexWorker(ws []*worker, w *worker) int {
	for i, x := range ws {
		if x == w {
			return i
		}
	}
	return -1
}

func (d *Pool[T]) work(w *worker) {
	defer d.wg.Done()
	idle := time.NewTimer(time.Hour)
	idle.Stop()
	back := false // from a turn, rather than woken or started
	for {
		s := d.take(w, idle, back)
		if s == nil {
			return
		}
		d.runTurn(w, s)
		back = true
	}
}

// Stop cancels every worker's context and waits for the workers and
// backoffs: a unit not started yet does not run.
func (d *Pool[T]) Stop() {
	d.cancel()
	d.mu.Lock()
	for _, w := range d.idle {
		d.spinning++
		w.wake <- struct{}{}
	}
	d.idle = nil
	d.mu.Unlock()
	d.wg.Wait()
}

// Key is the session's key.
func (s *Session[T]) Key() []byte { return s.key }

// Cancel cancels the context of t's running attempt, or cuts its backoff
// short; nothing if t is not s's current unit. A unit not started yet is
// the Attempt's to drop.
func (s *Session[T]) Cancel(it T) {
	s.sh.mu.Lock()
	defer s.sh.mu.Unlock()
	if s.cur != it {
		return
	}
	switch s.state {
	case sessionRunning:
		s.w.cancel()
	case sessionWaiting:
		if s.kick != nil {
			close(s.kick)
			s.kick = nil
		}
	}
}

// runTurn runs up to turn work units of s on w. Then s goes to the back of
// the run queue if it has more, waits on its own goroutine if its unit
// backs off before a retry, or ends if it has none.
func (d *Pool[T]) runTurn(w *worker, s *Session[T]) {
	var zero T
	sh := s.sh
	sh.mu.Lock()
	for n := 0; ; n++ {
		it := s.cur
		if it == zero {
			if s.head == len(s.queue) {
				sh.idleSession(s)
				sh.mu.Unlock()
				d.cfg.Active.Add(-1)
				return
			}
			if n >= turn {
				s.state = sessionQueued
				sh.mu.Unlock()
				d.schedule(s)
				return
			}
			it = s.queue[s.head]
			s.queue[s.head] = zero
			if s.head++; s.head == len(s.queue) {
				s.queue, s.head = s.queue[:0], 0 // reuse the array
			}
			s.cur = it
		}
		s.state, s.w = sessionRunning, w
		sh.mu.Unlock()

		delay, retry := d.cfg.Attempt(w.ctx, it)

		sh.mu.Lock()
		s.w = nil
		d.renew(w) // under sh.mu: Cancel no longer sees w
		if retry {
			kick := make(chan struct{})
			s.state, s.kick = sessionWaiting, kick
			sh.mu.Unlock()
			d.wg.Add(1) // the worker's own count keeps wg above zero
			go d.backoff(s, delay, kick)
			return
		}
		s.cur = zero
	}
}

// backoff waits out a retry's delay (cut short by Session.Cancel or Stop),
// then puts s back on the run queue.
func (d *Pool[T]) backoff(s *Session[T], delay time.Duration, kick chan struct{}) {
	defer d.wg.Done()
	select {
	case <-d.cfg.After(delay):
	case <-kick:
	case <-d.ctx.Done():
	}
	s.sh.mu.Lock()
	s.state, s.kick = sessionQueued, nil
	s.sh.mu.Unlock()
	d.schedule(s)
}

// renew gives w a fresh context after Session.Cancel canceled its last.
// The session's shard lock is held, with s.w no longer w.
func (d *Pool[T]) renew(w *worker) {
	if w.ctx.Err() != nil && d.ctx.Err() == nil {
		w.ctx, w.cancel = context.WithCancel(d.ctx)
	}
}

// Stopped reports whether Stop was called.
func (d *Pool[T]) Stopped() bool { return d.ctx.Err() != nil }
