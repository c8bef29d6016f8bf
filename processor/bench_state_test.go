package processor

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/changelog"
	"github.com/onceflow/onceflow/statestore"
)

// BenchmarkRestore replays a changelog of 1,000,000 records (16-byte keys
// over 100,000 sessions, 8-byte values) from an embedded cluster into an
// empty store on disk: the full-rebuild rate. Run with -benchtime=1x.
func BenchmarkRestore(b *testing.B) {
	const n = 1_000_000
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "changelog"))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("changelog"),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(100_000))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for i := range n {
		cl.Produce(ctx, &kgo.Record{Key: fmt.Appendf(nil, "session-%08d", i%100_000), Value: binary.BigEndian.AppendUint64(nil, uint64(i))}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	cl.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	b.ResetTimer()
	var took time.Duration
	for range b.N {
		b.StopTimer()
		s, err := statestore.Open(b.TempDir(), nil)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		st, err := changelog.Restore(ctx, c.ListenAddrs(), nil, "changelog", 0, restoreTarget{s, statestore.Partition{Topic: "in"}}, log)
		if err != nil || st.Records != n {
			b.Fatalf("restored %d of %d: %v", st.Records, n, err)
		}
		took += st.Took
		b.StopTimer()
		_ = s.Close()
	}
	b.ReportMetric(float64(n*b.N)/took.Seconds(), "records/s")
}

// BenchmarkStateGetSet is the handler-side cost of one Get and one Set
// (read through the record's writes, the pending overlay and the store,
// then publishing the write), against a handler that touches no state.
func BenchmarkStateGetSet(b *testing.B) {
	s, err := statestore.Open(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	part := newPartition("in", 0, 1, 0, nil)
	ps := &partState{store: s, p: statestore.Partition{Topic: "in"}, over: make(map[string]stateWrite)}
	part.keyspaces = []keyspacePart{ps}
	keys := make([][]byte, 1000)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "session-%04d/count", i)
	}
	val := make([]byte, 8)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		it := &item{part: part, gen: 1}
		k := keys[i%len(keys)]
		v, _, err := (*recordState)(it).Get(k)
		if err != nil {
			b.Fatal(err)
		}
		if len(v) == 8 {
			copy(val, v)
		}
		binary.BigEndian.PutUint64(val, binary.BigEndian.Uint64(val)+1)
		(*recordState)(it).Set(k, val)
		publishWrites(it)
		if i%10_000 == 0 { // what a commit does: apply and drop the overlay
			var ws []stateWrite
			for _, w := range ps.over {
				ws = append(ws, w)
			}
			bt := s.NewBatch()
			for _, w := range ws {
				bt.Write(ps.p, w.Write)
			}
			if err := bt.Commit(); err != nil {
				b.Fatal(err)
			}
			ps.applied(ws)
		}
	}
}
