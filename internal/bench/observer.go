package bench

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/verify"
)

// observer is the read_committed consumer that watches a run's output and
// dead-letter topics from before the pipeline starts. It timestamps each
// record when it becomes visible, which gives the latency histogram, the
// end of the processing window and the end of the run (every awaited input
// accounted for). Duplicates and order are judged later, on a read-back.
type observer struct {
	cl     *kgo.Client
	dlq    string
	target int       // inputs awaited: IDs 0..target-1
	primer int       // IDs 0..primer-1 are a paced run's primer: accounted for, not timed
	floor  time.Time // latency counts from max(ProducedAt, floor)
	start  time.Time // the run's start, origin of the timeline
	log    *slog.Logger

	accounted, outputs, deadLetters atomic.Int64
	done                            chan struct{} // closed when all are accounted for

	stopOnce sync.Once
	// Owned by the poll goroutine until wg.Wait returns.
	wg   sync.WaitGroup
	seen []bool
	hist *hdrhistogram.Histogram // microseconds
	last time.Time               // when the last awaited input became visible
	// firstOutput is when the first record (output or dead letter)
	// became visible, in nanoseconds since the Unix epoch (0: none yet).
	firstOutput atomic.Int64
	tl          timeline // inputs accounted for per timelineStep since start
}

// Latencies are recorded in microseconds, from 1µs to 1h, to 3 digits.
func newHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(1, int64(time.Hour/time.Microsecond), 3)
}

func startObserver(ctx context.Context, brokers []string, opts []kgo.Opt, output, dlq string, target, primer int, start, floor time.Time, log *slog.Logger) (*observer, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.ConsumeTopics(output, dlq),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Wake on new data at once; the default max wait only matters
		// when nothing arrives.
		kgo.FetchMaxWait(100 * time.Millisecond),
	}, opts...)...)
	if err != nil {
		return nil, err
	}
	o := &observer{
		cl: cl, dlq: dlq, target: target, primer: primer, start: start, floor: floor, log: log,
		done: make(chan struct{}), seen: make([]bool, target), hist: newHistogram(),
	}
	o.wg.Add(1)
	go o.poll(ctx)
	return o, nil
}

func (o *observer) poll(ctx context.Context) {
	defer o.wg.Done()
	for {
		fs := o.cl.PollFetches(ctx)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return
		}
		now := time.Now()
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				o.log.Warn("observer: fetch error", "topic", t, "partition", p, "err", err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) { o.observe(r, now) })
	}
}

func (o *observer) observe(r *kgo.Record, now time.Time) {
	o.firstOutput.CompareAndSwap(0, now.UnixNano())
	isDLQ := r.Topic == o.dlq
	if isDLQ {
		o.deadLetters.Add(1)
	} else {
		o.outputs.Add(1)
	}
	p, err := verify.Decode(r.Value)
	if err != nil || p.ID >= uint64(o.target) || o.seen[p.ID] {
		return // malformed, beyond a capped run, or a duplicate: judged on read-back
	}
	o.seen[p.ID] = true
	lat := time.Duration(-1)
	if !isDLQ && p.ID >= uint64(o.primer) {
		from := p.ProducedAt
		if from.Before(o.floor) {
			from = o.floor
		}
		lat = now.Sub(from)
		_ = o.hist.RecordValue(max(1, lat.Microseconds())) // beyond 1h: dropped, and the run timed out anyway
	}
	o.last = now
	o.tl.add(now.Sub(o.start), lat)
	if o.accounted.Add(1) == int64(o.target) {
		close(o.done)
	}
}

// stop ends the consumer; the histogram, the timeline and the window end
// are then safe to read.
func (o *observer) stop() {
	o.stopOnce.Do(func() {
		o.cl.Close()
		o.wg.Wait()
	})
}
