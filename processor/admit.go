package processor

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"
)

// drain takes finished items and puts their outputs into the transaction.
func (l *lifetime) drain(ctx context.Context) error {
	l.comps = l.r.comps.take(l.comps)
	for i, it := range l.comps {
		l.comps[i] = nil
		p := it.part
		if it.gen != p.gen.Load() || it.stuck.Load() || it.done {
			continue // revoked, rewound or dead-lettered as stuck meanwhile
		}
		// Held completions go first, in order, so a session's outputs
		// keep their order. The lowest unfinished record is the
		// exception: nothing of its session waits before it, and
		// finishing it is what shrinks the metadata.
		if len(p.held) > 0 && p.pending[0] != it {
			p.held = append(p.held, it)
			continue
		}
		if err := l.admit(ctx, p, it); err != nil {
			return err
		}
	}
	for _, p := range l.parts {
		if err := l.admitHeld(ctx, p); err != nil {
			return err
		}
		if err := l.dispatchWindow(p); err != nil {
			return err
		}
	}
	return nil
}

func (l *lifetime) admitHeld(ctx context.Context, p *partition) error {
	// The lowest unfinished record may wait behind others: take it first
	// (see drain), which makes room for the rest.
	if len(p.held) > 0 {
		p.measureMeta() // once per drain; admissions below only add to it
	}
	for len(p.held) > 0 {
		i := slices.Index(p.held, p.pending[0])
		if i < 0 {
			break
		}
		p.held = slices.Delete(p.held, i, i+1)
		if err := l.admit(ctx, p, p.pending[0]); err != nil {
			return err
		}
	}
	for len(p.held) > 0 {
		it := p.held[0]
		ok, err := l.tryAdmit(ctx, p, it)
		if err != nil || !ok {
			return err
		}
		p.held[0] = nil
		p.held = p.held[1:]
	}
	return nil
}

func (l *lifetime) admit(ctx context.Context, p *partition, it *item) error {
	ok, err := l.tryAdmit(ctx, p, it)
	if err == nil && !ok {
		p.held = append(p.held, it)
	}
	return err
}

// tryAdmit marks it finished and produces its records, unless the commit
// metadata would then outgrow the broker's limit: such an item waits.
func (l *lifetime) tryAdmit(ctx context.Context, p *partition, it *item) (bool, error) {
	if it.dlq != nil && l.cfg.dlq == "" {
		return false, noDLQError(it)
	}
	wasHead := p.pending[0] == it
	p.markDone(it)
	if wasHead {
		p.headSince = l.now
	} else if !p.metadataFits(l.cfg.maxMetadataBytes) {
		p.unmarkDone(it)
		return false, nil
	}
	if err := l.txn.produce(it.outputs, it.dlq); err != nil {
		return false, err
	}
	l.txn.holds(p)
	for _, k := range p.keyspaces {
		k.produce(l.txn, it, false)
	}
	return true, nil
}

// checkStuck dead-letters a partition's lowest unfinished record once it has
// been the head longer than the stuck timeout.
func (l *lifetime) checkStuck(ctx context.Context) error {
	timeout := l.cfg.stuckTimeout
	if timeout <= 0 {
		return nil
	}
	now := l.now
	for _, p := range l.parts {
		for len(p.pending) > 0 && now.Sub(p.headSince) >= timeout {
			it := p.pending[0]
			markStuck(it)
			cancelStuck(it)
			dlq := deadLetter(l.cfg.dlq, it, reasonStuck, fmt.Errorf("unfinished after %v", now.Sub(p.headSince).Round(time.Millisecond)), 0, time.Time{})
			l.cfg.logger.Error("record stuck; sending it to the dead-letter topic and moving on",
				"topic", p.topic, "partition", p.id, "offset", it.rec.Offset, "timeout", timeout)
			p.markDone(it)
			p.headSince = now
			if err := l.txn.produce(nil, dlq); err != nil {
				return err
			}
			l.txn.holds(p)
			for _, k := range p.keyspaces {
				k.produce(l.txn, it, true)
			}
		}
	}
	return nil
}

// backpressure pauses fetching from a partition that takes more than its
// part of the total bound (a slow or stuck session holds its window while
// its queue grows), or whose completions wait for room in the commit
// metadata, and resumes it once its queue has drained to half the limit.
// Fetched records stay in their partition's queue, so nothing newer
// overtakes them.
//
// The total bound itself needs no pause: poll takes no more than the free
// room, and franz-go fetches no more from a broker while it holds a fetch
// of that broker's partitions not yet taken. Pausing is kept for isolation,
// and the limit is generous because it is not cheap: franz-go drops a
// paused partition's buffered fetch and fetches it again on resume.
// Pausing every partition at the total bound, and each one whenever a poll
// brought it more than a window, fetched the input two to three times over
// on a 3-node cluster. For the same reason one fetch of a partition is kept
// well under the limit (inputFetchBytes).
func (l *lifetime) backpressure() {
	limit := 2 * l.queueShare(l.partitionCount())
	var pause, resume map[string][]int32
	now := time.Now()
	for _, p := range l.parts {
		// Resumed at half the limit, not just under it: a resumed
		// partition's next fetch lands at once, and pausing again would
		// drop it.
		want := len(p.held) > 0 || len(p.undispatched) >= limit || p.paused && len(p.undispatched) > limit/2
		if want == p.paused {
			continue
		}
		p.paused = want
		l.saturated = l.saturated || want
		l.logPause(p, now)
		m := &resume
		if want {
			m = &pause
		}
		if *m == nil {
			*m = make(map[string][]int32)
		}
		(*m)[p.topic] = append((*m)[p.topic], p.id)
	}
	if pause != nil {
		l.s.PauseFetchPartitions(pause)
	}
	if resume != nil {
		l.s.ResumeFetchPartitions(resume)
	}
}

// inputFetchBytes is the transactional client's kgo.FetchMaxPartitionBytes
// (Java's max.partition.fetch.bytes). franz-go's default of 1MiB holds about
// 40,000 small compressed records, more than a partition's queue limit at
// six partitions: one fetch reached the limit, and the pause dropped the
// rest of it.
const inputFetchBytes = 256 << 10

// queueShare is what each other partition keeps of the total bound while
// one queues twice that (the backpressure limit): the total split among the
// assigned partitions and one more, and at least the per-partition bound.
// One poll takes at most this much, so that it cannot carry a partition
// from an empty queue past the limit. n is partitionCount.
func (l *lifetime) queueShare(n int) int {
	return max(l.cfg.maxPartitionBuffer, l.cfg.maxBuffer/(1+max(1, n)))
}

// pauseLogInterval rate-limits the Info logs of pauses and resumes per
// partition; the changes in between are logged at Debug.
const pauseLogInterval = 30 * time.Second

// logPause logs a change of p's fetch state: at Info at most once per
// pauseLogInterval per partition, else at Debug.
func (l *lifetime) logPause(p *partition, now time.Time) {
	level := slog.LevelDebug
	if now.Sub(p.pauseLogged) >= pauseLogInterval {
		level, p.pauseLogged = slog.LevelInfo, now
	}
	msg := "resumed fetching"
	if p.paused {
		msg = "paused fetching: buffer or commit metadata full"
	}
	var oldest int64 = -1
	if len(p.pending) > 0 {
		oldest = p.pending[0].rec.Offset
	}
	l.cfg.logger.Log(context.Background(), level, msg, "topic", p.topic, "partition", p.id,
		"offset", p.next, "oldest_unfinished", oldest, "buffered", p.buffered(), "held", len(p.held))
}

// waitInFlight waits, at most the drain timeout, for dispatched records to
// finish, putting them into the transaction as they do.
func (l *lifetime) waitInFlight(ctx, drainCtx context.Context) error {
	deadline := time.NewTimer(l.cfg.drainTimeout)
	defer deadline.Stop()
	for l.unfinished() > 0 {
		select {
		case <-l.r.comps.wake:
		case <-deadline.C:
			l.cfg.logger.Info("drain timeout: unfinished records are left to be redone", "unfinished", l.unfinished())
			return nil
		case <-drainCtx.Done():
			return nil
		}
		l.now = l.cfg.clock.Now()
		if err := l.drain(ctx); err != nil {
			return err
		}
	}
	return nil
}
