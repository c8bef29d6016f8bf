package bench

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/brokerretry"
	"github.com/onceflow/onceflow/processor"
)

// Duplicate input (-dup-rate): a fraction of the events is sent twice,
// with the same key, payload and event ID (the processor.HeaderEventID
// header, which every input record then carries), as an application that
// retries a send would. The duplicate of event j follows its original by
// 1 to dupMaxGap records, so some land in the original's transaction and
// most in later ones. onceflow modes run with processor.WithDedupe and must
// skip every duplicate; franz-gts has no deduplication and must pass each
// one through exactly once.

// dupMaxGap bounds how many records after its original a duplicate is sent.
const dupMaxGap = 2000

// dupSalt makes the duplicated events independent of the faulty ones.
const dupSalt = 0x5ca1ab1e

// dupSchedule says which events are sent twice, and when.
type dupSchedule struct {
	cut uint64 // event j is duplicated when mix(j^dupSalt) < cut
	// at[i] lists the events whose duplicate is sent right after event i;
	// those due beyond the last event are sent after it.
	at map[int][]int
}

func newDupSchedule(rate float64, n int) *dupSchedule {
	if rate <= 0 {
		return nil
	}
	d := &dupSchedule{at: make(map[int][]int)}
	d.cut = math.MaxUint64
	if rate < 1 {
		d.cut = uint64(rate * math.MaxUint64)
	}
	for j := range n {
		if h := mix(uint64(j) ^ dupSalt); h < d.cut {
			i := min(j+1+int(h%dupMaxGap), n-1)
			d.at[i] = append(d.at[i], j)
		}
	}
	return d
}

// injected is the number of duplicate records the schedule sends.
func (d *dupSchedule) injected() int {
	if d == nil {
		return 0
	}
	n := 0
	for _, js := range d.at {
		n += len(js)
	}
	return n
}

// eventIDHeader is input record id's event ID header.
func eventIDHeader(id int) kgo.RecordHeader {
	return kgo.RecordHeader{Key: processor.HeaderEventID, Value: strconv.AppendInt([]byte("ev-"), int64(id), 10)}
}

// dedupes reports whether a mode deduplicates on event IDs when the input
// has duplicates: onceflow modes, which then run with WithDedupe. The
// others (the JVM modes too) must pass each duplicate through once.
func (m Mode) dedupes() bool { return m.onceflow() }

// waitConsumed waits until the job's group has committed every input
// record: the trailing duplicates come after the last original in their
// partitions, so a run that stopped as soon as every event was accounted
// for could leave some of them unread. want is the number of input records
// (events plus duplicates). The group gets stall to catch up; time in
// which the brokers could not be asked (a hiccup, retried until ctx ends)
// does not count against it, and a refusal fails at once.
func waitConsumed(ctx context.Context, log *slog.Logger, adm *kadm.Client, job Job, want int64, stall time.Duration) error {
	if stall <= 0 {
		stall = time.Minute
	}
	hiccups := &brokerretry.Hiccups{Log: log, What: "checking that the input was consumed"}
	var (
		lag     int64
		watched time.Duration // seen behind: stall's budget
		last    = time.Now()
	)
	for {
		ends, err := adm.ListEndOffsets(ctx, job.Input)
		if err == nil {
			err = ends.Error()
		}
		var offs kadm.OffsetResponses
		if err == nil {
			offs, err = adm.FetchOffsets(ctx, job.Group)
		}
		if err == nil {
			err = offs.Error()
		}
		now := time.Now()
		if err == nil {
			watched += now.Sub(last)
			var total int64
			lag = 0
			ends.Each(func(o kadm.ListedOffset) {
				total += o.Offset
				c, ok := offs.Lookup(o.Topic, o.Partition)
				if !ok || c.At < o.Offset {
					lag += o.Offset - max(c.At, 0)
				}
			})
			if total == want && lag == 0 {
				return nil
			}
			if total < want {
				lag += want - total
			}
		}
		last = now
		if ctx.Err() != nil {
			if err != nil {
				return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
			}
			return ctx.Err()
		}
		if err != nil {
			if !brokerretry.Transient(err) {
				return fmt.Errorf("checking that the input was consumed: %w", err)
			}
			hiccups.Note(err)
		}
		if watched > stall {
			return fmt.Errorf("input not fully consumed %v after every event was accounted for (%d records left)", stall, lag)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
