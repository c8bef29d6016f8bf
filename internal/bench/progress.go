package bench

import (
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/term"
)

// Progress keeps one live status line on a terminal. A nil *Progress is
// valid and quiet, which is what NewProgress returns when the file is not
// a terminal (a log file or a pipe wants no carriage returns).
type Progress struct {
	f  *os.File
	mu sync.Mutex // one line at a time
}

// NewProgress returns a Progress drawing on f, or nil if f is not a
// terminal.
func NewProgress(f *os.File) *Progress {
	if f == nil || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return &Progress{f: f}
}

// Start redraws status() four times a second until the returned function
// is called, which clears the line.
func (p *Progress) Start(status func() string) (stop func()) {
	if p == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				p.draw(status())
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			wg.Wait()
			p.draw("")
		})
	}
}

func (p *Progress) draw(line string) {
	// Cut to the terminal's width: a wrapped line cannot be redrawn in
	// place.
	if w, _, err := term.GetSize(int(p.f.Fd())); err == nil && w > 1 && len(line) >= w {
		line = line[:w-1]
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.f, "\r\x1b[K%s", line)
}
