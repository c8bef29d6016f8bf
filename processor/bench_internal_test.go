package processor

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkDispatchTrackComplete measures the processor's own per-record
// work with a no-op handler and 1,000 sessions, through the loop's own
// steps against a fake client: tracking the fetched record in its
// partition, dispatching it to its session, running it on a worker,
// handing the completion back and admitting it into the transaction.
// Kafka is not involved. Besides the wall time per record it reports the
// process's CPU time per record (cpu-ns/record), which is what a record
// costs a busy instance: the workers and the loop run on other cores.
//
// With 1,000 records a poll each session has one record per poll, so each
// record wakes its session (the worst case); 8,000 is a backlog's poll,
// dispatched through the partition's window (1,000 in flight) as its
// records finish.
func BenchmarkDispatchTrackComplete(b *testing.B) {
	for _, batch := range []int{1000, 8000} {
		b.Run(fmt.Sprintf("poll=%d", batch), func(b *testing.B) { benchDispatchBatch(b, batch) })
	}
}

func benchDispatch(b *testing.B, opts ...Opt) { benchDispatchBatch(b, 1000, opts...) }

func benchDispatchBatch(b *testing.B, batch int, opts ...Opt) {
	const sessions = 1000
	p, err := New(append([]Opt{WithBrokers("x"), WithGroup("g"), WithInstanceID("i"), WithInputTopics("in"), WithoutDefaultOutput(),
		WithHandler(func(context.Context, *kgo.Record, Emitter) error { return nil }),
		WithIdleSessionTimeout(time.Minute)}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	r := newRun(p)
	l := r.newLifetime(context.Background())
	stopGate := l.connect(newFakeClient())
	defer func() {
		l.ps.staleAll()
		r.pool.Stop()
		stopGate()
		l.ps.restores.close()
	}()
	recs := make([]*kgo.Record, batch)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "in", Key: fmt.Appendf(nil, "session-%04d", i%sessions)}
	}
	fs := fetchesOf("in", 0, recs)
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	var offset int64
	for n := 0; n < b.N; n += batch {
		for _, r := range recs {
			r.Offset = offset
			offset++
		}
		if err := l.ps.intake(fs, l.now); err != nil {
			b.Fatal(err)
		}
		for l.ps.unfinished() > 0 {
			<-r.comps.wake
			if err := l.ps.drain(l.c.open, l.now); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(offset), "ns/record")
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(offset), "cpu-ns/record")
}
