package processor

import (
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// commitTimes is the distribution of committed transactions' round trips
// (flush, offsets, EndTxn), for Stats' median, p99 and max: a record waits
// out a typical commit, which a few slow ones drag the mean away from. At
// most about a hundred commits end a second, so a mutex costs nothing;
// record works the quantiles out, so that Stats only copies them.
type commitTimes struct {
	mu                sync.Mutex
	hist              *hdrhistogram.Histogram // microseconds; built at the first commit
	p50, p99, longest time.Duration
}

// The histogram keeps round trips of 1µs to 10 minutes (shorter or longer
// ones count as the bound) to 2 significant figures, in a few KiB.
const commitTimesMin, commitTimesMax = time.Microsecond, 10 * time.Minute

func (c *commitTimes) record(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hist == nil {
		c.hist = hdrhistogram.New(1, commitTimesMax.Microseconds(), 2)
	}
	_ = c.hist.RecordValue(min(max(d, commitTimesMin), commitTimesMax).Microseconds()) // in range: cannot fail
	c.longest = max(c.longest, d)
	// A quantile is its bucket's upper end, which may pass the exact max.
	at := func(q float64) time.Duration {
		return min(time.Duration(c.hist.ValueAtQuantile(q))*time.Microsecond, c.longest)
	}
	c.p50, c.p99 = at(50), at(99)
}

// quantiles returns the median, p99 and max round trip, 0 before the first
// commit.
func (c *commitTimes) quantiles() (p50, p99, longest time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.p50, c.p99, c.longest
}
