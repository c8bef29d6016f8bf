//go:build unix

package processor

import "syscall"

// cpuTime is the process's user and system CPU time so far, in
// nanoseconds (0 where it cannot be read).
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
