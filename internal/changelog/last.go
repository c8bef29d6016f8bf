package changelog

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// lastWindow is how many offsets Last reads first below the last stable
// offset. A committed transaction that wrote one record takes two offsets
// (the record and its marker), so this covers several aborted ones too;
// a window without a committed record grows eightfold.
const lastWindow = 16

// Last returns the last committed record of each given partition of topic
// that is below its last stable offset (nil where there is none, or if the
// topic does not exist). It reads no further: a record committed after a
// transaction that is still open is missed, and an earlier one returned
// instead. One case waits for the open transaction to end (at most its
// timeout): when the offsets right below it hold an aborted transaction's
// records, which read_committed drops, so nothing shows that the stable
// offset was reached until later offsets become readable.
func Last(ctx context.Context, brokers []string, opts []kgo.Opt, topic string, partitions []int32) (map[int32]*kgo.Record, error) {
	adm, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	ac := kadm.NewClient(adm)
	out := make(map[int32]*kgo.Record, len(partitions))
	for _, p := range partitions {
		out[p] = nil
	}
	starts, err := listed(ac.ListStartOffsets(ctx, topic))
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("changelog: start offsets of %s: %w", topic, err)
	}
	stable, err := listed(ac.ListCommittedOffsets(ctx, topic))
	if err != nil {
		return nil, fmt.Errorf("changelog: last stable offsets of %s: %w", topic, err)
	}
	lo := make(map[int32]int64, len(partitions))
	hi := make(map[int32]int64, len(partitions))
	for _, p := range partitions {
		s, _ := starts.Lookup(topic, p)
		e, _ := stable.Lookup(topic, p)
		if e.Offset > s.Offset {
			lo[p], hi[p] = s.Offset, e.Offset
		}
	}
	for window := int64(lastWindow); len(hi) > 0; window *= 8 {
		from := make(map[int32]kgo.Offset, len(hi))
		for p, e := range hi {
			from[p] = kgo.NewOffset().At(max(lo[p], e-window))
		}
		found, err := readLast(ctx, brokers, opts, topic, from, hi)
		if err != nil {
			return nil, err
		}
		for p, e := range hi {
			if r := found[p]; r != nil || e-window <= lo[p] {
				out[p] = r
				delete(hi, p)
			}
		}
	}
	return out, nil
}

// readLast reads each partition from its offset in from up to its offset
// in hi, read_committed, and returns the last data record of each.
func readLast(ctx context.Context, brokers []string, opts []kgo.Opt, topic string, from map[int32]kgo.Offset, hi map[int32]int64) (map[int32]*kgo.Record, error) {
	cl, err := committedReader(brokers, opts, topic, from)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	last := make(map[int32]*kgo.Record, len(from))
	left := maps.Clone(hi)
	for len(left) > 0 {
		fs, err := poll(ctx, cl, topic)
		if err != nil {
			return nil, err
		}
		fs.EachRecord(func(r *kgo.Record) {
			e, ok := left[r.Partition]
			if !ok || r.Offset >= e {
				delete(left, r.Partition)
				return
			}
			if !r.Attrs.IsControl() {
				last[r.Partition] = r
			}
			if r.Offset+1 >= e {
				delete(left, r.Partition)
			}
		})
	}
	return last, nil
}
