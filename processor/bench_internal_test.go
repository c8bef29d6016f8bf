package processor

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkDispatchTrackComplete measures the processor's own per-record
// work with a no-op handler and 1,000 sessions: tracking the record in its
// partition, dispatching it to its session goroutine, handing the
// completion back and marking it done. Kafka is not involved.
func BenchmarkDispatchTrackComplete(b *testing.B) { benchDispatch(b) }

func benchDispatch(b *testing.B, opts ...Opt) {
	const sessions, batch = 1000, 1000
	p, err := New(append([]Opt{WithBrokers("x"), WithGroup("g"), WithInstanceID("i"), WithInputTopics("in"),
		WithHandler(func(context.Context, *kgo.Record, Emitter) error { return nil }),
		WithIdleSessionTimeout(time.Minute)}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	defer p.d.stop()
	part := newPartition("in", 0, 1, 0, nil)
	recs := make([]kgo.Record, batch)
	for i := range recs {
		recs[i].Key = []byte(fmt.Sprintf("session-%04d", i%sessions))
	}
	var comps []*item
	b.ReportAllocs()
	b.ResetTimer()
	var offset int64
	for n := 0; n < b.N; n += batch {
		for i := range recs {
			r := &recs[i]
			r.Offset = offset
			offset++
			part.accept(r.Offset)
			it := &item{rec: r, part: part, gen: 1}
			part.pending = append(part.pending, it)
			p.d.dispatch(r.Key, it)
		}
		for done := 0; done < batch; {
			<-p.compWake
			comps = p.takeCompletions(comps)
			for _, it := range comps {
				part.markDone(it)
			}
			done += len(comps)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(offset), "ns/record")
}
