package bench

import (
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"runtime"
	"time"
)

// running is a mode's pipeline while it runs: one in-process instance or
// a set of subprocess workers.
type running interface {
	// stopped is closed when the pipeline stopped by itself (nil when it
	// cannot); runErr then says why.
	stopped() <-chan struct{}
	runErr() error
}

// inProcess is one pipeline instance running in this process.
type inProcess struct {
	p      pipeline
	cancel context.CancelFunc
	exited chan struct{}
	err    error // Run's result, once exited is closed
	peaks  *peaks
}

func (ip *inProcess) stopped() <-chan struct{} { return ip.exited }
func (ip *inProcess) runErr() error            { return ip.err }

// Workers never stop by themselves: the set restarts those that exit.
func (ws *workerSet) stopped() <-chan struct{} { return nil }
func (ws *workerSet) runErr() error            { return nil }

// stopTimeout bounds a pipeline's shutdown (drain and final commit).
const stopTimeout = time.Minute

// jvmReadyTimeout bounds a JVM worker's start up to its "ready": the JVM,
// its classes and the framework's clients, on a busy 2-core machine.
const jvmReadyTimeout = 2 * time.Minute

// prepareJVM starts a JVM mode's instances (-workers of them, at least
// one) held: started, built and ready, but not yet consuming, so that the
// JVM's own start-up falls outside the timed run as a Go binary's loading
// does. startPipeline releases them. Go modes prepare nothing (nil).
func (t *trial) prepareJVM(ctx context.Context) (*workerSet, error) {
	app, ok := t.res.Mode.jvmApp()
	if !ok {
		return nil, nil
	}
	cp, err := t.r.jvm.classpath(ctx, app, t.r.buildOutput())
	if err != nil {
		return nil, err
	}
	n := max(1, t.cfg.Workers)
	threads := jvmThreads(t.cfg.Partitions, n)
	if t.res.Mode.suffix() == CoresSuffix {
		threads = runtime.NumCPU()
	}
	if app.dir == "kstreams" {
		t.res.StreamThreads = threads
	}
	verbose := t.r.Log.Enabled(ctx, slog.LevelInfo)
	command := func(job Job, held bool) *exec.Cmd {
		return jvmCommand(app, cp, job, threads, t.cfg.Sessions, held, verbose)
	}
	ws, err := startWorkerSet(command, true, n, t.job, t.workerLogs(), t.r.Log)
	if err != nil {
		return nil, err
	}
	if err := ws.awaitReady(ctx, jvmReadyTimeout); err != nil {
		ws.stop(10 * time.Second)
		return nil, fmt.Errorf("%s: %w", t.res.Mode, err)
	}
	return ws, nil
}

// startPipeline starts the run's pipeline, or releases the one prepared
// (prepareJVM).
func (t *trial) startPipeline(ctx context.Context, prepared *workerSet) (running, error) {
	if prepared != nil {
		prepared.release()
		return prepared, nil
	}
	if t.cfg.Workers > 0 {
		return startWorkers(t.r.WorkerExe, t.r.WorkerArgs, t.cfg.Workers, t.job, t.workerLogs(), t.r.Log)
	}
	p, err := newPipeline(t.job, t.r.Log)
	if err != nil {
		return nil, err
	}
	// The pipeline outlives runCtx by a little: it is stopped explicitly,
	// so that its shutdown commit is part of every run.
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ip := &inProcess{p: p, cancel: cancel, exited: make(chan struct{}), peaks: startPeaks()}
	delay := t.r.startDelay
	go func() {
		defer close(ip.exited)
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-pctx.Done():
				return
			}
		}
		ip.err = p.run(pctx)
	}()
	return ip, nil
}

// stopPipeline stops the pipeline, waits for its final commit and records
// its counters and peaks.
func (t *trial) stopPipeline(pl running) {
	res := t.res
	switch pl := pl.(type) {
	case *inProcess:
		pl.cancel()
		select {
		case <-pl.exited:
			if pl.err != nil && t.failure == "" {
				t.failure = "pipeline: " + pl.err.Error()
			}
		case <-time.After(stopTimeout):
			if t.failure == "" {
				t.failure = "pipeline did not stop within " + stopTimeout.String()
			}
		}
		pk := pl.peaks.stop()
		res.Peaks = &pk
		res.Counters = pl.p.counters()
	case *workerSet:
		reports := pl.stop(stopTimeout)
		res.Kills, res.Crashes = pl.restarts()
		res.CPUSeconds = pl.cpuTime().Seconds()
		pk := Peaks{}
		for _, rep := range reports {
			res.Counters.add(rep.Counters)
			pk.Goroutines = max(pk.Goroutines, rep.Goroutines)
			pk.RSSBytes = max(pk.RSSBytes, rep.RSSBytes)
		}
		if len(reports) > 0 {
			res.Peaks = &pk
		}
	}
	res.HandlerMs = res.Counters.sleepMs()
}
