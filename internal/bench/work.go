package bench

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"time"
)

// errInjected is the transient failure a handler returns on the first
// attempt at a faulty record.
var errInjected = errors.New("bench: injected transient fault")

// work is the simulated handler shared by every mode, so that all of them
// do the same thing per record: hash the value cpuRounds times (simulated
// CPU work, see cpu.go), sleep the handler latency (simulated I/O) and
// fail the first attempt at a fixed fraction of the records.
type work struct {
	latency   Latency
	cpuRounds int // SHA-256 rounds per record (Job.CPURounds)
	// faultCut: record id is faulty when mix(id) < faultCut. Hashing the
	// ID (rather than drawing at random) makes every mode fail the same
	// records, and a restarted worker fail them again as a real flaky
	// dependency would.
	faultCut uint64
	tried    []atomic.Uint64 // bitset: first attempt made

	// What the handlers actually slept: timers overshoot (to the next
	// millisecond on some machines), and results report it.
	sleeps, slept atomic.Int64
}

func newWork(latency Latency, cpuRounds int, faultRate float64, messages int) *work {
	w := &work{latency: latency, cpuRounds: cpuRounds}
	if faultRate > 0 {
		w.faultCut = uint64(faultRate * math.MaxUint64)
		w.tried = make([]atomic.Uint64, (messages+63)/64)
	}
	return w
}

// mix is splitmix64's finalizer: a cheap, well-spread hash of an ID.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// faulty reports whether id is one of the records that fail first.
func (w *work) faulty(id uint64) bool {
	return w.faultCut > 0 && mix(id) < w.faultCut
}

// do handles record id, whose value is value, once: hash, sleep, then
// fail if this is the first attempt at a faulty record (every attempt
// does the CPU work, as a real handler failing on its I/O would have).
func (w *work) do(id uint64, value []byte) error {
	if w.cpuRounds > 0 {
		_ = hashRounds(value, w.cpuRounds)
	}
	if d := w.latency.draw(); d > 0 {
		t0 := time.Now()
		time.Sleep(d)
		w.slept.Add(int64(time.Since(t0)))
		w.sleeps.Add(1)
	}
	if !w.faulty(id) || id/64 >= uint64(len(w.tried)) {
		return nil
	}
	bit := uint64(1) << (id % 64)
	if w.tried[id/64].Or(bit)&bit == 0 {
		return errInjected
	}
	return nil
}

// doRetrying is the baselines' retry loop: the same exponential backoff
// the processor uses, in line, so a failing record holds its whole batch
// (which is how a serial consumer behaves).
func (w *work) doRetrying(ctx context.Context, id uint64, value []byte, initial time.Duration, retries *atomic.Int64) error {
	delay := initial
	for {
		err := w.do(id, value)
		if err == nil {
			return nil
		}
		retries.Add(1)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		delay = min(2*delay, 10*time.Second)
	}
}

// count adds the handler sleep totals to c.
func (w *work) count(c Counters) Counters {
	c.Sleeps, c.SleptNanos = w.sleeps.Load(), w.slept.Load()
	return c
}
