package bench

import (
	"bytes"
	"os"
	"strconv"
	"time"
)

// userHZ is the unit of /proc/stat's counters, USER_HZ: 100 on every
// Linux architecture Go supports (the kernel scales its own HZ to it).
const userHZ = 100

// cpuSample is the CPU time this process and the whole machine had used
// at one instant. A run's two samples say how many cores it had: on a
// machine shared with other jobs a parallel mode gains only what they
// leave it, and a ratio to a serial mode means little without that.
type cpuSample struct {
	at      time.Time
	self    time.Duration // this process, user + system (/proc/self/stat)
	machine time.Duration // every CPU, busy (/proc/stat)
}

// sampleCPU reads both clocks. Where /proc is missing (not Linux) they
// read 0 and cores reports nothing.
func sampleCPU() cpuSample {
	return cpuSample{at: time.Now(), self: selfBusy(), machine: machineBusy()}
}

// cores returns the cores used on average from a to b: by this process
// (its pipelines, when in-process, with the embedded cluster and the
// observer) and by the whole machine; 0 for what is unknown.
func (a cpuSample) cores(b cpuSample) (self, machine float64) {
	wall := b.at.Sub(a.at).Seconds()
	if wall <= 0 {
		return 0, 0
	}
	if a.self > 0 && b.self > 0 {
		self = (b.self - a.self).Seconds() / wall
	}
	if a.machine > 0 && b.machine > 0 {
		machine = (b.machine - a.machine).Seconds() / wall
	}
	return self, machine
}

// machineBusy is the busy time of every CPU since boot from the first
// line of /proc/stat: user, nice, system, irq, softirq and steal (guest
// time is counted in user already; idle and iowait are not busy).
func machineBusy() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) < 9 || string(f[0]) != "cpu" {
		return 0
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		n, err := strconv.ParseInt(string(f[i]), 10, 64)
		if err != nil {
			return 0
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ
}

// selfBusy is this process's user and system time from /proc/self/stat
// (fields 14 and 15, counted after the parenthesised command name, which
// may hold spaces).
func selfBusy() time.Duration {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := bytes.Fields(b[i+1:]) // from field 3, the state
	if len(f) < 13 {
		return 0
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(string(s), 10, 64)
		if err != nil {
			return 0
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ
}
