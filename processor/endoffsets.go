package processor

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// endOffsets are the input partitions' end offsets as a goroutine lists
// them (refresh), for the lag gauge: a paused partition gets no fetches,
// and so no high watermark, exactly when it lags (metrics.publish).
type endOffsets struct {
	mu     sync.Mutex
	listed map[tp]int64 // since the last raise
}

func newEndOffsets() *endOffsets { return &endOffsets{listed: make(map[tp]int64)} }

// refresh lists the inputs' end offsets every interval
// (lagRefreshInterval) until ctx is done. It runs on its own goroutine,
// off the loop.
func (e *endOffsets) refresh(ctx context.Context, cl *kgo.Client, inputs []string, interval time.Duration, log *slog.Logger) {
	adm := kadm.NewClient(cl)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, interval)
		ends, err := adm.ListEndOffsets(rctx, inputs...)
		cancel()
		if err != nil {
			log.Debug("listing end offsets for the lag gauge failed", "err", err)
			continue
		}
		e.mu.Lock()
		ends.Each(func(o kadm.ListedOffset) {
			if o.Err == nil {
				k := tp{o.Topic, o.Partition}
				e.listed[k] = max(e.listed[k], o.Offset)
			}
		})
		e.mu.Unlock()
	}
}

// raise raises the partitions' high watermarks to the end offsets listed
// since the last call. The loop calls it.
func (e *endOffsets) raise(all map[tp]*partition) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for k, end := range e.listed {
		if p := all[k]; p != nil {
			p.hwm = max(p.hwm, end)
		}
	}
	clear(e.listed)
}
