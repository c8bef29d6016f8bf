// Package readback reads topics back the way a downstream consumer sees
// them: read_committed, from the start up to the last stable offset, so
// that verifiers count exactly what became visible and nothing that was
// aborted.
package readback

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/brokerretry"
)

// ReadCommitted returns every committed record of the topics, per partition
// in offset order. Open transactions are not waited for: the read stops at
// each partition's last stable offset at the time of the call.
func ReadCommitted(ctx context.Context, brokers []string, topics ...string) ([]*kgo.Record, error) {
	return ReadCommittedWith(ctx, brokers, nil, topics...)
}

// ReadCommittedWith is ReadCommitted with client options (TLS, SASL) for
// every client it opens.
func ReadCommittedWith(ctx context.Context, brokers []string, opts []kgo.Opt, topics ...string) ([]*kgo.Record, error) {
	return ReadCommittedLog(ctx, nil, brokers, opts, topics...)
}

// ReadCommittedLog is ReadCommittedWith logging to log (nil: nowhere) the
// hiccups it rides out. The brokers' transient errors (a refused dial, a
// moved leader, a topic not known yet: brokerretry.Transient) are retried
// until ctx ends; any other error ends the read at once.
func ReadCommittedLog(ctx context.Context, log *slog.Logger, brokers []string, opts []kgo.Opt, topics ...string) ([]*kgo.Record, error) {
	if log != nil {
		// franz-go's own retries are noted too; a caller's logger wins.
		hiccups := &brokerretry.Hiccups{Log: log, What: fmt.Sprintf("read-back of %v", topics)}
		opts = append([]kgo.Opt{kgo.WithLogger(hiccups.KgoLogger())}, opts...)
	}
	admCl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		return nil, err
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	var ends kadm.ListedOffsets
	// franz-go does not retry a refused dial to a partition's leader, nor
	// UNKNOWN_TOPIC_OR_PARTITION within a second of its metadata: a node
	// fault failed a clean run here (issue 45).
	err = brokerretry.Do(ctx, log, "read-back: listing last stable offsets", func() error {
		var err error
		if ends, err = adm.ListCommittedOffsets(ctx, topics...); err == nil {
			err = ends.Error()
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("readback: listing last stable offsets: %w", err)
	}
	want := make(map[string]map[int32]kgo.Offset)
	remaining := make(map[string]map[int32]int64)
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset <= 0 {
			return
		}
		if want[o.Topic] == nil {
			want[o.Topic] = make(map[int32]kgo.Offset)
			remaining[o.Topic] = make(map[int32]int64)
		}
		want[o.Topic][o.Partition] = kgo.NewOffset().AtStart()
		remaining[o.Topic][o.Partition] = o.Offset
	})
	if len(want) == 0 {
		return nil, nil
	}
	// Control records are kept so that the position is known exactly: a
	// partition is done when a record (data or transaction marker) at or
	// past the last stable offset minus one has been seen.
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.ConsumePartitions(want),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
	}, opts...)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var out []*kgo.Record
	for len(remaining) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return out, fmt.Errorf("readback: %d topics not read to the end: %w", len(remaining), err)
		}
		// franz-go retries a fetch's transient errors (a refused dial,
		// a moved leader, a topic not known yet) by itself and returns
		// only what it will not get past: lost data (a reset), a topic
		// recreated under the read, a refusal.
		var ferr error
		fs.EachError(func(topic string, p int32, err error) {
			ferr = fmt.Errorf("readback: fetching %s/%d: %w", topic, p, err)
		})
		if ferr != nil {
			return out, ferr
		}
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := remaining[r.Topic][r.Partition]
			if !ok || r.Offset >= end {
				return
			}
			if !r.Attrs.IsControl() {
				out = append(out, r)
			}
			if r.Offset+1 >= end {
				delete(remaining[r.Topic], r.Partition)
				if len(remaining[r.Topic]) == 0 {
					delete(remaining, r.Topic)
				}
			}
		})
	}
	return out, nil
}
