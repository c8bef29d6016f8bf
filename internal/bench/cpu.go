package bench

import (
	"crypto/sha256"
	"fmt"
	"time"
)

// The CPU part of the simulated handler (Config.HandlerCPU) stands for a
// transform such as decoding, changing and re-encoding a JSON value: work
// proportional to the value that occupies a core, unlike a sleep, which
// leaves the core to others. It is a fixed number of SHA-256 rounds over
// the record's value, calibrated once per phase in the benchmark process
// and handed to every pipeline in its Job, so that every mode (workers
// included) does exactly the same work per record whatever the load of
// the machine when it runs. A busy-wait on the clock would instead stretch
// to fill the asked time when preempted, and so hide what parallelism
// gains.

// calibrationSample is the least time one calibration measurement takes:
// long enough that the clock's resolution does not matter, short enough
// that five of them cost a blink.
const calibrationSample = 5 * time.Millisecond

// calibrationSamples are taken, and the fastest kept: on a shared machine
// a sample can only be slowed down (preemption, another job's burst),
// never sped up, so the minimum is the closest to the work's own cost.
const calibrationSamples = 5

// maxCalibrationRounds bounds the doubling of the calibration, in case a
// clock that does not advance would make it run forever.
const maxCalibrationRounds = 1 << 30

// CPUCalibration is what a -handler-cpu target came to on this machine.
type CPUCalibration struct {
	Target   time.Duration // asked CPU time per record
	Size     int           // value bytes each round hashes (plus a digest)
	Rounds   int           // SHA-256 rounds per record
	PerRound time.Duration // measured cost of one round (fastest sample)
	Took     time.Duration // what calibrating took
}

// String is the line eosbench prints on stderr.
func (c CPUCalibration) String() string {
	return fmt.Sprintf("-handler-cpu %v: %d SHA-256 rounds of %d bytes per record (%v a round; calibrated in %v)",
		c.Target, c.Rounds, c.Size+sha256.Size, c.PerRound, c.Took.Round(time.Millisecond))
}

// calibrateCPU measures SHA-256 rounds over size-byte values and returns
// how many make about target of CPU. A zero target needs no rounds.
func calibrateCPU(target time.Duration, size int) CPUCalibration {
	start := time.Now()
	value := make([]byte, size)
	for i := range value {
		value[i] = byte(i)
	}
	c := calibrate(target, func(n int) time.Duration {
		t0 := time.Now()
		_ = hashRounds(value, n)
		return time.Since(t0)
	})
	c.Size, c.Took = size, time.Since(start)
	return c
}

// calibrate turns a measurement of n rounds into the rounds for target:
// it doubles n until one measurement takes calibrationSample, then keeps
// the fastest of calibrationSamples measurements of that n. measure is a
// parameter so that the arithmetic is testable without a clock.
func calibrate(target time.Duration, measure func(n int) time.Duration) CPUCalibration {
	c := CPUCalibration{Target: target}
	if target <= 0 {
		return c
	}
	n := 1
	for n < maxCalibrationRounds && measure(n) < calibrationSample {
		n *= 2
	}
	best := time.Duration(-1)
	for range calibrationSamples {
		if d := measure(n); best < 0 || d < best {
			best = d
		}
	}
	perRound := float64(best) / float64(n)
	c.PerRound = time.Duration(perRound)
	c.Rounds = 1 // a positive target always does some work
	if perRound > 0 {
		c.Rounds = max(1, int(float64(target)/perRound+0.5))
	}
	return c
}

// hashRounds chains n SHA-256 rounds, each over the previous digest
// followed by value: every round reads the whole value, as a transform
// would, and depends on the one before, so none can be skipped or done in
// parallel. The digest is returned so that the work is observably used.
func hashRounds(value []byte, n int) [sha256.Size]byte {
	var d [sha256.Size]byte
	if n <= 0 {
		return d
	}
	buf := make([]byte, sha256.Size+len(value))
	copy(buf[sha256.Size:], value)
	for range n {
		copy(buf, d[:])
		d = sha256.Sum256(buf)
	}
	return d
}
