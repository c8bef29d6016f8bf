package bench

import (
	"bufio"
	"bytes"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"
)

// peaks samples this process's goroutines and resident memory during a
// run. Peak RSS is the kernel's VmHWM, reset at the start of the run
// through /proc/self/clear_refs where allowed (else the largest sampled
// VmRSS stands in), so that each run reports its own peak.
type peaks struct {
	hwmReset bool
	stopCh   chan struct{}
	wg       sync.WaitGroup

	mu         sync.Mutex
	goroutines int
	rss        int64
}

// Peaks is a run's peak goroutine count and resident memory (bytes).
type Peaks struct {
	Goroutines int   `json:"peak_goroutines"`
	RSSBytes   int64 `json:"peak_rss_bytes"`
}

func startPeaks() *peaks {
	p := &peaks{stopCh: make(chan struct{})}
	// "5" resets the peak RSS to the current RSS (Linux 4.0+).
	p.hwmReset = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
	p.sample()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.stopCh:
				return
			case <-t.C:
				p.sample()
			}
		}
	}()
	return p
}

func (p *peaks) sample() {
	g := runtime.NumGoroutine()
	rss := procStatus("VmRSS:")
	p.mu.Lock()
	p.goroutines = max(p.goroutines, g)
	p.rss = max(p.rss, rss)
	p.mu.Unlock()
}

func (p *peaks) stop() Peaks {
	close(p.stopCh)
	p.wg.Wait()
	p.sample()
	p.mu.Lock()
	defer p.mu.Unlock()
	out := Peaks{Goroutines: p.goroutines, RSSBytes: p.rss}
	if hwm := procStatus("VmHWM:"); p.hwmReset && hwm > 0 {
		out.RSSBytes = hwm
	}
	return out
}

// procStatus returns a "kB" field of /proc/self/status in bytes, or 0.
func procStatus(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte(field)) {
			continue
		}
		f := bytes.Fields(line[len(field):])
		if len(f) == 0 {
			return 0
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil {
			return 0
		}
		return kb << 10
	}
	return 0
}
