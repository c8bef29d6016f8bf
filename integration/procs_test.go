package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/processor"
)

// Why the test expects a worker process to end. A process that ends with
// no intent, or with an exit status its intent does not allow, is a
// problem the test reports.
type intent string

const (
	intentNone  intent = ""
	intentKill  intent = "SIGKILL"      // any end is fine
	intentTerm  intent = "SIGTERM"      // must exit 0
	intentFence intent = "fenced"       // replaced by a newer instance with its ID: must exit 3
	intentMaybe intent = "maybe fenced" // its replacement ended before it woke or soon after: exit 0 or 3
	intentQuit  intent = "SIGQUIT"      // goroutine dump requested: any end is fine
	intentClose intent = "test cleanup" // any end is fine
)

// workerResult is the JSON object a worker prints on exit.
type workerResult struct {
	Instance string          `json:"instance"`
	Exit     int             `json:"exit"`
	Error    string          `json:"error"`
	Stats    processor.Stats `json:"stats"`
}

// proc is one worker process.
type proc struct {
	serial   int
	instance string
	pid      int
	started  time.Time
	cmd      *exec.Cmd
	logPath  string
	stdout   bytes.Buffer  // read only after done
	ready    chan struct{} // closed once SIGTERM stops it cleanly (or it ended)
	done     chan struct{}

	// Guarded by fleet.mu.
	intent   intent
	stopped  bool // SIGSTOPped
	exitCode int  // -1 when ended by a signal
	exitSig  string
	result   *workerResult
	ended    time.Time
}

func (p *proc) String() string { return fmt.Sprintf("%s#%d(pid %d)", p.instance, p.serial, p.pid) }

// event is one entry of a test's fault timeline.
type event struct {
	at  time.Duration
	msg string
}

// counts are a run's fault totals. BrokerRestarts counts every broker
// restart, of the single node or of one cluster node; NodeRestarts splits
// the cluster's by the role that chose the node.
type counts struct {
	Starts, Instances, Kills, Stops, Terms, Fenced, BrokerRestarts, Unexpected int
	NodeRestarts                                                               nodeRestarts
}

// fleet starts, signals and watches worker processes.
type fleet struct {
	t      testing.TB
	bin    string
	args   []string // every worker's common flags
	logDir string
	t0     time.Time

	mu        sync.Mutex
	running   map[int]*proc // by serial, until the process ends
	all       []*proc
	instances map[string]bool
	serial    int
	events    []event
	problems  []string
	counts    counts
	results   []workerResult
	closed    bool
	wg        sync.WaitGroup
	kept      atomic.Bool // keep the worker logs even if the test passes
	// perInstance, when set, adds flags for one instance (its network
	// path: -dial-map, see netfaults_test.go).
	perInstance func(instance string) []string
}

// keep keeps the worker logs after the test.
func (f *fleet) keep() { f.kept.Store(true) }

func newFleet(t testing.TB, bin string, args []string, t0 time.Time) *fleet {
	dir, err := os.MkdirTemp("", "onceflow-workers-")
	if err != nil {
		t.Fatal(err)
	}
	f := &fleet{t: t, bin: bin, args: args, logDir: dir, t0: t0, running: make(map[int]*proc), instances: make(map[string]bool)}
	t.Cleanup(func() {
		if t.Failed() || *keepLogs || f.kept.Load() {
			t.Logf("worker logs kept in %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	return f
}

func (f *fleet) eventf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.eventLocked(format, args...)
}

func (f *fleet) eventLocked(format string, args ...any) {
	f.events = append(f.events, event{time.Since(f.t0), fmt.Sprintf(format, args...)})
}

func (f *fleet) problemf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	msg := fmt.Sprintf(format, args...)
	f.problems = append(f.problems, msg)
	f.eventLocked("PROBLEM: %s", msg)
	f.t.Logf("PROBLEM at %v: %s", time.Since(f.t0).Round(time.Millisecond), msg) // at once: a soak runs on for minutes
}

// start launches a worker with the given instance ID.
func (f *fleet) start(instance string, extra ...string) *proc {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	f.serial++
	p := &proc{serial: f.serial, instance: instance, ready: make(chan struct{}), done: make(chan struct{})}
	p.logPath = filepath.Join(f.logDir, fmt.Sprintf("%03d-%s.log", p.serial, instance))
	logf, err := os.Create(p.logPath)
	if err != nil {
		f.t.Errorf("creating worker log: %v", err)
		return nil
	}
	// The worker closes its end of the pipe once it handles SIGTERM: a
	// SIGTERM before that kills it (seen in CI, 3 ms after a start).
	readyR, readyW, err := os.Pipe()
	if err != nil {
		_ = logf.Close()
		f.t.Errorf("creating worker pipe: %v", err)
		return nil
	}
	args := append(slices.Clone(f.args), "-instance", instance, "-ready-fd", "3")
	if f.perInstance != nil {
		args = append(args, f.perInstance(instance)...)
	}
	args = append(args, extra...)
	p.cmd = exec.Command(f.bin, args...)
	p.cmd.Stdout = &p.stdout
	p.cmd.Stderr = logf
	p.cmd.ExtraFiles = []*os.File{readyW} // descriptor 3
	err = p.cmd.Start()
	_ = logf.Close() // the child has its own descriptors
	_ = readyW.Close()
	if err != nil {
		_ = readyR.Close()
		f.t.Errorf("starting worker %s: %v", instance, err)
		return nil
	}
	go func() {
		_, _ = io.Copy(io.Discard, readyR) // EOF: closed by the worker or at its end
		_ = readyR.Close()
		close(p.ready)
	}()
	p.pid, p.started = p.cmd.Process.Pid, time.Now()
	f.running[p.serial] = p
	f.all = append(f.all, p)
	f.counts.Starts++
	if !f.instances[instance] {
		f.instances[instance] = true
		f.counts.Instances++
	}
	f.eventLocked("start %s", p)
	f.wg.Add(1)
	go f.watch(p)
	return p
}

// watch waits for p to end and judges the end against its intent.
func (f *fleet) watch(p *proc) {
	defer f.wg.Done()
	err := p.cmd.Wait()
	code, sig := 0, ""
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			sig = ws.Signal().String()
		}
	} else if err != nil {
		code = -1
		sig = err.Error()
	}
	var res *workerResult
	if line := bytes.TrimSpace(p.stdout.Bytes()); len(line) > 0 {
		var r workerResult
		if json.Unmarshal(line, &r) == nil {
			res = &r
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	p.exitCode, p.exitSig, p.result, p.ended = code, sig, res, time.Now()
	delete(f.running, p.serial)
	if res != nil {
		f.results = append(f.results, *res)
	}
	how := fmt.Sprintf("exit %d", code)
	if sig != "" {
		how = "signal " + sig
	}
	f.eventLocked("end %s: %s (intent %q, up %v)", p, how, p.intent, time.Since(p.started).Round(time.Millisecond))
	var bad string
	switch p.intent {
	case intentNone:
		bad = "ended by itself"
	case intentTerm:
		if code != 0 {
			bad = "did not exit 0 after SIGTERM"
		}
	case intentFence:
		if code != 3 {
			bad = "replaced by a newer instance with its ID but did not exit 3 (ErrFenced)"
		} else {
			f.counts.Fenced++
		}
	case intentMaybe:
		switch code {
		case 3:
			f.counts.Fenced++
		case 0:
		default:
			bad = "did not exit 0 or 3"
		}
	}
	if bad != "" && !f.closed {
		f.counts.Unexpected++
		msg := fmt.Sprintf("worker %s %s: %s; stderr tail:\n%s", p, bad, how, tailFile(p.logPath, 4000))
		f.problems = append(f.problems, msg)
		f.eventLocked("PROBLEM: worker %s %s: %s", p, bad, how)
		f.t.Logf("PROBLEM at %v: %s", time.Since(f.t0).Round(time.Millisecond), msg)
	}
	close(p.done)
}

// signal sends sig to p, recording why (the first intent wins, except
// that a later SIGKILL or SIGQUIT may end a process whatever it was
// expected to do).
func (f *fleet) signal(p *proc, sig syscall.Signal, why intent) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.signalLocked(p, sig, why)
}

func (f *fleet) signalLocked(p *proc, sig syscall.Signal, why intent) {
	select {
	case <-p.done:
		return
	default:
	}
	if why != intentNone && (p.intent == intentNone || why == intentKill || why == intentQuit || why == intentClose) {
		p.intent = why
	}
	switch sig {
	case syscall.SIGSTOP:
		p.stopped = true
	case syscall.SIGCONT:
		p.stopped = false
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		f.eventLocked("signal %v to %s failed: %v", sig, p, err)
		return
	}
	f.eventLocked("%v %s", sig, p)
}

// kill SIGKILLs p and waits for it to end.
func (f *fleet) kill(p *proc) {
	f.mu.Lock()
	f.counts.Kills++
	f.signalLocked(p, syscall.SIGKILL, intentKill)
	f.mu.Unlock()
	<-p.done
}

// stop SIGSTOPs p: it keeps its sockets but runs no code (a zombie to be).
func (f *fleet) stop(p *proc) {
	f.mu.Lock()
	f.counts.Stops++
	f.signalLocked(p, syscall.SIGSTOP, intentNone)
	f.mu.Unlock()
}

func (f *fleet) cont(p *proc) { f.signal(p, syscall.SIGCONT, intentNone) }

// expectFenced notes that p (stopped) was replaced by an instance with its
// ID, so it must exit 3 once it runs again.
func (f *fleet) expectFenced(p *proc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p.intent == intentNone {
		p.intent = intentFence
	}
}

// replacementGone relaxes a zombie's expectation when the process that
// took its ID has ended before the zombie ran again, or within the window
// after (zombieStep): no newer instance may be left to fence it.
func (f *fleet) replacementGone(p *proc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p.intent == intentFence {
		p.intent = intentMaybe
		f.eventLocked("%s: its replacement has ended; it may run on (exit 0) or be fenced (exit 3)", p)
	}
}

// term SIGTERMs p and waits up to timeout for it to exit (0, judged by
// watch). A worker that does not stop in time is SIGQUIT for a goroutine
// dump and reported.
func (f *fleet) term(p *proc, timeout time.Duration) {
	f.mu.Lock()
	f.counts.Terms++
	if p.stopped {
		f.signalLocked(p, syscall.SIGCONT, intentNone)
	}
	f.mu.Unlock()
	deadline := time.After(timeout)
	select {
	case <-p.ready:
	case <-deadline:
	}
	f.signal(p, syscall.SIGTERM, intentTerm)
	select {
	case <-p.done:
		return
	case <-deadline:
	}
	f.signal(p, syscall.SIGQUIT, intentQuit)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		f.signal(p, syscall.SIGKILL, intentKill)
		<-p.done
	}
	f.problemf("worker %s did not stop within %v of SIGTERM; goroutine dump:\n%s", p, timeout, quitDump(p.logPath))
}

// termAll SIGTERMs every running worker at once and waits for them.
func (f *fleet) termAll(timeout time.Duration) {
	var wg sync.WaitGroup
	for _, p := range f.live() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.term(p, timeout)
		}()
	}
	wg.Wait()
}

// live returns the running workers, oldest first.
func (f *fleet) live() []*proc {
	f.mu.Lock()
	defer f.mu.Unlock()
	ps := make([]*proc, 0, len(f.running))
	for _, p := range f.running {
		ps = append(ps, p)
	}
	slices.SortFunc(ps, func(a, b *proc) int { return a.serial - b.serial })
	return ps
}

// pick returns a random running worker that is not stopped and not
// expected to end, or nil.
func (f *fleet) pick(rng *rand.Rand) *proc {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ps []*proc
	for _, p := range f.running {
		if !p.stopped && p.intent == intentNone {
			ps = append(ps, p)
		}
	}
	if len(ps) == 0 {
		return nil
	}
	slices.SortFunc(ps, func(a, b *proc) int { return a.serial - b.serial })
	return ps[rng.IntN(len(ps))]
}

// active counts running workers that are neither stopped nor ending.
func (f *fleet) active() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, p := range f.running {
		if !p.stopped && p.intent == intentNone {
			n++
		}
	}
	return n
}

// dumpAll SIGQUITs every running worker and logs their goroutine dumps.
func (f *fleet) dumpAll() {
	ps := f.live()
	for _, p := range ps {
		f.mu.Lock()
		if p.stopped {
			f.signalLocked(p, syscall.SIGCONT, intentNone)
		}
		f.signalLocked(p, syscall.SIGQUIT, intentQuit)
		f.mu.Unlock()
	}
	for _, p := range ps {
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			f.signal(p, syscall.SIGKILL, intentKill)
			<-p.done
		}
		f.t.Logf("===== goroutine dump of worker %s =====\n%s", p, quitDump(p.logPath))
	}
}

// close ends every worker still running (SIGKILL) and waits for the
// watchers. Ends after close are not judged.
func (f *fleet) close() {
	f.mu.Lock()
	f.closed = true
	for _, p := range f.running {
		if p.stopped {
			f.signalLocked(p, syscall.SIGCONT, intentNone)
		}
		f.signalLocked(p, syscall.SIGKILL, intentClose)
	}
	f.mu.Unlock()
	f.wg.Wait()
}

func (f *fleet) snapshot() (counts, []string, []event, []workerResult) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts, slices.Clone(f.problems), slices.Clone(f.events), slices.Clone(f.results)
}

func (f *fleet) addBrokerRestart() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.counts.BrokerRestarts++
}

func (f *fleet) addNodeRestart(kind nodeFault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.counts.BrokerRestarts++
	f.counts.NodeRestarts[kind]++
}

// logTimeline logs the last n events.
func (f *fleet) logTimeline(t testing.TB, n int) {
	_, _, evs, _ := f.snapshot()
	if len(evs) > n {
		t.Logf("timeline: %d earlier events not shown", len(evs)-n)
		evs = evs[len(evs)-n:]
	}
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "  %9.3fs  %s\n", e.at.Seconds(), e.msg)
	}
	t.Logf("timeline (seconds since the test started):\n%s", b.String())
}

// logStderr logs every worker's stderr tail (for -worker-logs).
func (f *fleet) logStderr(t testing.TB, max int) {
	f.mu.Lock()
	ps := slices.Clone(f.all)
	f.mu.Unlock()
	for _, p := range ps {
		if s := tailFile(p.logPath, max); s != "" {
			t.Logf("----- stderr of worker %s -----\n%s", p, s)
		}
	}
}

// tailFile returns at most the last max bytes of a file.
func tailFile(path string, max int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	if len(b) > max {
		b = append([]byte("…"), b[len(b)-max:]...)
	}
	return string(b)
}

// quitDump returns the goroutine dump a SIGQUIT left in a worker's stderr.
func quitDump(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	if i := bytes.LastIndex(b, []byte("SIGQUIT: quit")); i >= 0 {
		b = b[i:]
	}
	const max = 256 << 10
	if len(b) > max {
		b = append(b[:max:max], "\n… (truncated; full dump in the kept worker log)"...)
	}
	return string(b)
}

// deadFor reports how long no process has run with the instance ID (false
// while one runs, or if none ever did).
func (f *fleet) deadFor(instance string) (time.Duration, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var last time.Time
	for _, p := range f.all {
		if p.instance != instance {
			continue
		}
		if _, running := f.running[p.serial]; running {
			return 0, false
		}
		if p.ended.After(last) {
			last = p.ended
		}
	}
	if last.IsZero() {
		return 0, false
	}
	return time.Since(last), true
}

// TestTermAtStart: a worker SIGTERMed at any point of its start exits 0:
// at once (the CI run of 4407b38 SIGTERMed one 3 ms after its start,
// before it handled the signal, and the signal killed it), during the
// start check (Run returned "no broker answered within 0s: context
// canceled") or its first join.
func TestTermAtStart(t *testing.T) {
	c := kafkatest.New(t)
	in := c.CreateTopic(t, "in", 1, nil)
	out := c.CreateTopic(t, "out", 1, nil)
	f := newFleet(t, worker(t), []string{
		"-brokers", strings.Join(c.Brokers, ","), "-group", kafkatest.Name(t, "app"),
		"-in", in, "-out", out, "-group-protocol", kafkatest.GroupProtocol(),
	}, time.Now())
	t.Cleanup(f.close)
	// A stop from about 20 ms on may come during the first JoinGroup,
	// which franz-go's close waits for; the coordinator holds that join
	// up to a session timeout (6 s) for an earlier worker that was a
	// member and did not leave: one such step is enough here.
	for i, after := range []time.Duration{0, 0, 5 * time.Millisecond, 20 * time.Millisecond} {
		p := f.start(fmt.Sprint("w", i))
		time.Sleep(after)
		f.term(p, time.Minute)
	}
	if _, problems, _, _ := f.snapshot(); len(problems) > 0 {
		f.logTimeline(t, 20)
		t.Fatalf("problems: %q", problems)
	}
}
