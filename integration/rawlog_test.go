package integration

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/verify"
)

// rawLog renders a partition's log between offsets from and to (exclusive)
// as a read_uncommitted consumer sees it, transaction markers included:
// which producer ID and epoch wrote each record and which markers ended
// which transactions. Evidence for duplicates and stuck last stable offsets.
func (e *env) rawLog(topic string, partition int32, from, to int64) string {
	if from < 0 {
		from = 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ends, err := e.c.Admin.ListEndOffsets(ctx, topic)
	if err != nil {
		return err.Error()
	}
	if end, ok := ends.Lookup(topic, partition); ok && end.Offset < to {
		to = end.Offset
	}
	if from >= to {
		return fmt.Sprintf("raw log of %s/%d: nothing in [%d, %d)", shortTopic(topic), partition, from, to)
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(e.c.Brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().At(from)}}),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()),
		kgo.KeepControlRecords(),
	)
	if err != nil {
		return err.Error()
	}
	defer cl.Close()
	names := e.pidNames()
	var b strings.Builder
	fmt.Fprintf(&b, "raw log of %s/%d [%d, %d):\n", shortTopic(topic), partition, from, to)
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			fmt.Fprintf(&b, "  (stopped: %v)\n", ctx.Err())
			return b.String()
		}
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= to {
				done = true
				return
			}
			who := nameOr(names, r.ProducerID)
			if r.Attrs.IsControl() {
				kind := "marker?"
				if len(r.Key) >= 4 {
					switch binary.BigEndian.Uint16(r.Key[2:]) {
					case 0:
						kind = "ABORT"
					case 1:
						kind = "COMMIT"
					}
				}
				fmt.Fprintf(&b, "  @%d %s marker producer %d/%d (%s)\n", r.Offset, kind, r.ProducerID, r.ProducerEpoch, who)
				return
			}
			p, _ := verify.Decode(r.Value)
			fmt.Fprintf(&b, "  @%d id=%d producer %d/%d (%s) txn=%v written %+.3fs\n",
				r.Offset, p.ID, r.ProducerID, r.ProducerEpoch, who, r.Attrs.IsTransactional(), r.Timestamp.Sub(e.t0).Seconds())
			if r.Offset+1 >= to {
				done = true
			}
		})
		if done {
			return b.String()
		}
	}
}
