package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/onceflow/onceflow/internal/clientsec"
)

// WorkerFlag is the hidden flag that makes the binary run one Job (given
// as JSON) instead of a benchmark: eosbench re-executes itself with it.
const WorkerFlag = "worker"

// WorkerReport is the one JSON line a worker prints on stdout when it
// stops cleanly. A worker killed with SIGKILL prints nothing.
type WorkerReport struct {
	Peaks
	Counters
	Error string `json:"error,omitempty"`
}

// RunWorker runs job until ctx is done and prints its report on stdout.
// Peaks are this process's own: a worker holds no embedded cluster, so
// they measure the pipeline alone.
func RunWorker(ctx context.Context, job Job, stdout io.Writer, log *slog.Logger) error {
	pk := startPeaks()
	p, err := newPipeline(job, log)
	if err != nil {
		pk.stop()
		return err
	}
	runErr := p.run(ctx)
	rep := WorkerReport{Peaks: pk.stop(), Counters: p.counters()}
	if runErr != nil {
		rep.Error = runErr.Error()
	}
	if err := json.NewEncoder(stdout).Encode(rep); err != nil && runErr == nil {
		runErr = err
	}
	return runErr
}

// workerSet supervises one mode's subprocess workers. Instance i always
// runs as instance ID "w<i>", so a restart takes over its predecessor's
// transactional ID and static group membership.
type workerSet struct {
	// command returns instance job's process; held ones (the first of a
	// JVM mode's) wait for "go" on stdin once ready.
	command func(job Job, held bool) *exec.Cmd
	// hold: the first start of each worker is held until release.
	hold   bool
	job    Job
	log    *slog.Logger
	stderr io.Writer
	// stderrLevel: a worker's log lines below it go to its log file
	// only, not to stderr.
	stderrLevel slog.Level
	// logDir, when set, gets each instance's whole log (stderr), in
	// <instance ID>.log, appended across its restarts.
	logDir string

	mu         sync.Mutex
	procs      []*workerProc
	stopping   bool
	kills      int
	unexpected int
	// cpu is the CPU time (user and system) of the workers that exited,
	// killed ones included.
	cpu     time.Duration
	reports []WorkerReport
	wg      sync.WaitGroup // exit watchers
}

type workerProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser // closing it asks the worker to stop
	stdout *workerStdout
	log    *os.File     // its log file; nil without a logDir
	filter *levelFilter // its stderr copy; nil without stderr
	exited chan struct{}
	killed bool // by us: not an unexpected exit
}

// workerStdout keeps what a worker prints (its report is the last line)
// and tells when it printed "ready" (held workers).
type workerStdout struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	ready chan struct{}
	once  sync.Once
}

func newWorkerStdout() *workerStdout { return &workerStdout{ready: make(chan struct{})} }

func (w *workerStdout) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if bytes.HasPrefix(w.buf.Bytes(), []byte("ready\n")) {
		w.once.Do(func() { close(w.ready) })
	}
	return len(p), nil
}

// report is the last line printed, decoded: false when there is none.
func (w *workerStdout) report() (WorkerReport, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := bytes.TrimSpace(w.buf.Bytes())
	if i := bytes.LastIndexByte(out, '\n'); i >= 0 {
		out = out[i+1:]
	}
	var rep WorkerReport
	return rep, json.Unmarshal(out, &rep) == nil
}

// goWorkerCommand runs this binary (exe) as a worker of job.
func goWorkerCommand(exe string, args []string) func(Job, bool) *exec.Cmd {
	return func(job Job, _ bool) *exec.Cmd {
		arg, err := json.Marshal(job)
		if err != nil {
			panic(fmt.Sprintf("bench: a job does not marshal: %v", err)) // plain data: cannot happen
		}
		return exec.Command(exe, append(args[:len(args):len(args)], "-"+WorkerFlag, string(arg))...)
	}
}

// workerLogs is where a worker set's output goes: every line to a file per
// instance in dir (when set), the lines at level or above (and those of
// no slog level) to stderr as well.
type workerLogs struct {
	stderr io.Writer
	level  slog.Level
	dir    string
}

func startWorkers(exe string, args []string, n int, job Job, logs workerLogs, log *slog.Logger) (*workerSet, error) {
	return startWorkerSet(goWorkerCommand(exe, args), false, n, job, logs, log)
}

// startWorkerSet starts n workers of job, each built by command; with
// hold, they wait for release once ready (see awaitReady).
func startWorkerSet(command func(Job, bool) *exec.Cmd, hold bool, n int, job Job, logs workerLogs, log *slog.Logger) (*workerSet, error) {
	stderr := logs.stderr
	if stderr != nil {
		// Each worker's stderr is copied by a goroutine of its own: a
		// writer that is not a file (a test's buffer) needs a lock.
		stderr = &lockedWriter{w: stderr}
	}
	ws := &workerSet{command: command, hold: hold, job: job, log: log, stderr: stderr, stderrLevel: logs.level, logDir: logs.dir, procs: make([]*workerProc, n)}
	for i := range n {
		if err := ws.start(i); err != nil {
			ws.stop(10 * time.Second)
			return nil, err
		}
	}
	return ws, nil
}

// awaitReady waits until every held worker printed "ready", one exits, or
// timeout passes.
func (ws *workerSet) awaitReady(ctx context.Context, timeout time.Duration) error {
	ws.mu.Lock()
	procs := append([]*workerProc(nil), ws.procs...)
	ws.mu.Unlock()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for i, p := range procs {
		select {
		case <-p.stdout.ready:
		case <-p.exited:
			return fmt.Errorf("worker w%d exited before it was ready (see its stderr above)", i)
		case <-deadline.C:
			return fmt.Errorf("worker w%d not ready within %v", i, timeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// release lets the held workers go.
func (ws *workerSet) release() {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.hold = false
	for i, p := range ws.procs {
		if _, err := io.WriteString(p.stdin, "go\n"); err != nil {
			ws.log.Warn("releasing a held worker", "instance", fmt.Sprintf("w%d", i), "err", err)
		}
	}
}

// start runs worker i. It holds the lock throughout, so that a start
// racing with stop either is seen by stop or does not happen.
func (ws *workerSet) start(i int) error {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.stopping {
		return nil
	}
	job := ws.job
	job.InstanceID = fmt.Sprintf("w%d", i)
	if job.Stateful {
		// One store per instance ID: a restarted instance finds its
		// predecessor's and restores only the changelog's tail.
		job.StateDir = filepath.Join(filepath.Dir(ws.job.StateDir), job.InstanceID)
	}
	if job.DedupeDir != "" {
		job.DedupeDir = filepath.Join(filepath.Dir(ws.job.DedupeDir), job.InstanceID)
	}
	// The SASL password goes in the worker's environment, not on its
	// command line, where any user's process listing would show it.
	password := job.Security.Password
	job.Security.Password = ""
	p := &workerProc{exited: make(chan struct{}), stdout: newWorkerStdout()}
	// A restarted worker is never held: the run is under way.
	p.cmd = ws.command(job, ws.hold)
	if password != "" {
		p.cmd.Env = append(os.Environ(), clientsec.PasswordEnv+"="+password)
	}
	p.cmd.Stdout = p.stdout
	if err := ws.connectLog(p, job.InstanceID); err != nil {
		return err
	}
	// The worker stops when its stdin closes: on our request, or when
	// this process dies, so that no worker outlives its benchmark.
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return err
	}
	if err := p.cmd.Start(); err != nil {
		p.closeLog()
		return fmt.Errorf("starting worker %s: %w", job.InstanceID, err)
	}
	if p.log != nil {
		fmt.Fprintf(p.log, "eosbench: worker %s started, pid %d, at %s\n", job.InstanceID, p.cmd.Process.Pid, time.Now().Format(time.RFC3339Nano))
	}
	ws.procs[i] = p
	ws.wg.Add(1)
	go ws.watch(i, p)
	return nil
}

// watch waits for a worker's exit. An exit nobody asked for is logged and
// the worker restarted: the benchmark judges the output, not the process.
func (ws *workerSet) watch(i int, p *workerProc) {
	defer ws.wg.Done()
	err := p.cmd.Wait()
	ws.mu.Lock()
	killed := p.killed
	if st := p.cmd.ProcessState; st != nil {
		ws.cpu += st.UserTime() + st.SystemTime()
	}
	ws.mu.Unlock()
	if p.log != nil {
		fmt.Fprintf(p.log, "eosbench: worker exited at %s: %v (killed by eosbench: %t)\n", time.Now().Format(time.RFC3339Nano), err, killed)
	}
	p.closeLog() // before exited: a restart appends to the same file
	close(p.exited)
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if p.killed {
		return
	}
	rep, ok := p.stdout.report()
	if ok {
		ws.reports = append(ws.reports, rep)
	}
	if ws.stopping {
		if err != nil {
			ws.log.Warn("worker failed while stopping", "instance", fmt.Sprintf("w%d", i), "err", err, "report", rep.Error)
		}
		return
	}
	ws.unexpected++
	ws.log.Warn("worker exited unexpectedly; restarting it", "instance", fmt.Sprintf("w%d", i), "err", err, "report", rep.Error)
	go func() {
		time.Sleep(200 * time.Millisecond)
		if err := ws.start(i); err != nil {
			ws.log.Error("restarting worker", "err", err)
		}
	}()
}

// kill SIGKILLs worker i (no EndTxn, no LeaveGroup: a crash) and starts
// its replacement under the same instance ID.
func (ws *workerSet) kill(i int) error {
	ws.mu.Lock()
	p := ws.procs[i]
	if ws.stopping || p == nil {
		ws.mu.Unlock()
		return nil
	}
	p.killed = true
	ws.kills++
	ws.mu.Unlock()
	_ = p.cmd.Process.Kill()
	<-p.exited
	return ws.start(i)
}

// killLoop kills one worker every interval, in turn, until ctx is done.
func (ws *workerSet) killLoop(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ws.mu.Lock()
		n := len(ws.procs)
		ws.mu.Unlock()
		if err := ws.kill(i % n); err != nil {
			ws.log.Error("restarting a killed worker", "err", err)
		}
	}
}

// stop asks every worker to finish and commit, killing those that do not
// exit within timeout, and returns their reports.
func (ws *workerSet) stop(timeout time.Duration) []WorkerReport {
	ws.mu.Lock()
	ws.stopping = true
	procs := append([]*workerProc(nil), ws.procs...)
	ws.mu.Unlock()
	for _, p := range procs {
		if p != nil {
			_ = p.stdin.Close()
		}
	}
	// A context's Done stays closed once the time is up: every worker
	// still running then is killed, not only the first (time.After's
	// channel delivers once, and the next worker was waited for forever).
	deadline, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for _, p := range procs {
		if p == nil {
			continue
		}
		select {
		case <-p.exited:
		case <-deadline.Done():
			ws.log.Warn("worker did not stop in time; killing it")
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	}
	ws.wg.Wait()
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return ws.reports
}

// cpuTime is the CPU time of the workers that exited so far (all of them,
// after stop).
func (ws *workerSet) cpuTime() time.Duration {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return ws.cpu
}

func (ws *workerSet) restarts() (kills, unexpected int) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return ws.kills, ws.unexpected
}

// connectLog sends p's stderr to its instance's log file and, filtered by
// level, to the set's stderr.
func (ws *workerSet) connectLog(p *workerProc, instance string) error {
	var outs []io.Writer
	if ws.stderr != nil {
		p.filter = &levelFilter{w: ws.stderr, min: ws.stderrLevel}
		outs = append(outs, p.filter)
	}
	if ws.logDir != "" {
		f, err := os.OpenFile(filepath.Join(ws.logDir, instance+".log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("opening worker %s's log: %w", instance, err)
		}
		p.log = f
		outs = append(outs, f)
	}
	if len(outs) > 0 {
		p.cmd.Stderr = io.MultiWriter(outs...)
	}
	return nil
}

// closeLog ends p's output: a last line without its newline still
// reaches stderr.
func (p *workerProc) closeLog() {
	if p.filter != nil && len(p.filter.part) > 0 {
		_, _ = p.filter.w.Write(append(p.filter.part, '\n'))
		p.filter.part = nil
	}
	if p.log != nil {
		_ = p.log.Close()
	}
}

// levelFilter passes on the lines of one worker's slog text output at min
// or above, and every line without a level (a panic, a JVM's output).
// One per worker: it holds back a partial line until its end arrives.
type levelFilter struct {
	w    io.Writer
	min  slog.Level
	part []byte
}

func (f *levelFilter) Write(b []byte) (int, error) {
	f.part = append(f.part, b...)
	for {
		i := bytes.IndexByte(f.part, '\n')
		if i < 0 {
			break
		}
		line := f.part[:i+1]
		if f.pass(line) {
			if _, err := f.w.Write(line); err != nil {
				return len(b), err
			}
		}
		f.part = f.part[i+1:]
	}
	if len(f.part) == 0 {
		f.part = nil // let the buffer go
	}
	return len(b), nil
}

func (f *levelFilter) pass(line []byte) bool {
	const key = " level="
	i := bytes.Index(line, []byte(key))
	if i < 0 {
		return true
	}
	tok := line[i+len(key):]
	if j := bytes.IndexAny(tok, " \n"); j >= 0 {
		tok = tok[:j]
	}
	var l slog.Level
	if err := l.UnmarshalText(tok); err != nil {
		return true
	}
	return l >= f.min
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
