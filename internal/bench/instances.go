package bench

import (
	"context"
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

func (t *trial) startPipeline(ctx context.Context) (running, error) {
	if t.cfg.Workers > 0 {
		return startWorkers(t.r.WorkerExe, t.r.WorkerArgs, t.cfg.Workers, t.job, t.r.WorkerStderr, t.r.Log)
	}
	p, err := newPipeline(t.job, t.r.Log)
	if err != nil {
		return nil, err
	}
	// The pipeline outlives runCtx by a little: it is stopped explicitly,
	// so that its shutdown commit is part of every run.
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ip := &inProcess{p: p, cancel: cancel, exited: make(chan struct{}), peaks: startPeaks()}
	go func() {
		ip.err = p.run(pctx)
		close(ip.exited)
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
