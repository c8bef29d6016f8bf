package bench

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/internal/durations"
)

// requestTimes times an onceflow pipeline's requests to the brokers by
// kind, end to end as the client sees them (write, wait, read): what a
// commit round trip is made of (the produce requests its flush waits for,
// the offset commit, EndTxn), and the metadata refreshes franz-go makes
// when a produce is refused (CONCURRENT_TRANSACTIONS among them). It is a
// franz-go hook on every client of the pipeline.
type requestTimes struct {
	// count and bytes total every request but fetches (the reading) and
	// their bytes both ways: what the pipeline's writing and committing
	// cost the brokers, per commit in the scale table.
	count, bytes atomic.Int64

	mu    sync.Mutex
	times map[int16]*durations.Recorder
	errs  map[int16]int64
}

// timedKeys are the requests reported.
var timedKeys = []kmsg.Key{kmsg.Produce, kmsg.AddOffsetsToTxn, kmsg.TxnOffsetCommit, kmsg.OffsetCommit, kmsg.EndTxn, kmsg.InitProducerID, kmsg.Metadata}

func newRequestTimes() *requestTimes {
	rt := &requestTimes{times: make(map[int16]*durations.Recorder), errs: make(map[int16]int64)}
	for _, k := range timedKeys {
		rt.times[int16(k)] = new(durations.Recorder)
	}
	return rt
}

// OnBrokerE2E implements kgo.HookBrokerE2E.
func (rt *requestTimes) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	if key != int16(kmsg.Fetch) {
		rt.count.Add(1)
		rt.bytes.Add(int64(e2e.BytesWritten + e2e.BytesRead))
	}
	r, ok := rt.times[key]
	if !ok {
		return
	}
	r.Record(e2e.DurationE2E())
	if e2e.Err() != nil {
		rt.mu.Lock()
		rt.errs[key]++
		rt.mu.Unlock()
	}
}

// RequestTime is one kind of request's count, median and p99.
type RequestTime struct {
	Count  int64 `json:"count"`
	P50    int64 `json:"p50_ns"`
	P99    int64 `json:"p99_ns"`
	Errors int64 `json:"errors,omitempty"`
}

// summary returns the times by request name, for Counters.
func (rt *requestTimes) summary() map[string]RequestTime {
	out := make(map[string]RequestTime)
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for key, r := range rt.times {
		s := r.Summary()
		if s.Count == 0 {
			continue
		}
		out[kmsg.NameForKey(key)] = RequestTime{Count: s.Count, P50: int64(s.P50), P99: int64(s.P99), Errors: rt.errs[key]}
	}
	return out
}

// opts hooks rt into a client (nil: nothing).
func (rt *requestTimes) opts() []kgo.Opt {
	if rt == nil {
		return nil
	}
	return []kgo.Opt{kgo.WithHooks(rt)}
}

// setCounters sets c's request figures from rt (nil: none).
func (rt *requestTimes) setCounters(c *Counters) {
	if rt == nil {
		return
	}
	c.Requests = rt.summary()
	c.RequestCount, c.RequestBytes = rt.count.Load(), rt.bytes.Load()
}

// requestsLine formats the times for the report, in timedKeys' order.
func requestsLine(times map[string]RequestTime) string {
	order := make(map[string]int)
	for i, k := range timedKeys {
		order[kmsg.NameForKey(int16(k))] = i
	}
	names := make([]string, 0, len(times))
	for n := range times {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return order[names[i]] < order[names[j]] })
	parts := make([]string, 0, len(names))
	for _, n := range names {
		t := times[n]
		s := fmt.Sprintf("%s %d × p50 %.1f ms p99 %.1f ms", n, t.Count, nsToMs(t.P50), nsToMs(t.P99))
		if t.Errors > 0 {
			s += fmt.Sprintf(" (%d failed)", t.Errors)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}
