// Package changelog mirrors a local keyspace to a compacted Kafka topic
// partition. Writes go to the topic inside the processor's transaction and
// are applied locally only after it commits, with a checkpoint; Restore
// brings a keyspace up to the topic's committed end. The state store and
// the dedupe marks share this one mechanism.
package changelog

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Target is a local keyspace mirrored from one changelog partition.
type Target interface {
	// Checkpoint returns the changelog topic ID and next offset applied.
	Checkpoint() (topicID [16]byte, next int64, ok bool, err error)
	// Reset drops the keyspace and its checkpoint.
	Reset() error
	// Apply applies changelog records (a nil value deletes) and sets the
	// checkpoint, atomically.
	Apply(recs []*kgo.Record, topicID [16]byte, next int64) error
}

// Stats describes one restore.
type Stats struct {
	Records int
	Rebuilt bool // replayed from the start: no valid checkpoint
	Took    time.Duration
}

// Restore replays the committed tail of topic/partition into t: from the
// checkpoint when it belongs to this topic (same ID) and lies within the
// log, else from the start after a reset. It reads read_committed, so it
// never applies an open or aborted transaction's writes, up to the log end
// offset as of its start: a transaction still open then (a zombie's, which
// the coordinator aborts at the latest after its timeout) is waited for,
// because writes committed after it by the partition's later owners lie
// beyond the last stable offset until it ends. Stopping at the last stable
// offset instead would leave those writes out and the keyspace behind.
func Restore(ctx context.Context, brokers []string, opts []kgo.Opt, topic string, partition int32, t Target, log *slog.Logger) (Stats, error) {
	start := time.Now()
	var st Stats
	adm, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		return st, err
	}
	defer adm.Close()
	ac := kadm.NewClient(adm)
	td, err := ac.ListTopics(ctx, topic)
	if err == nil {
		err = td.Error()
	}
	if err != nil {
		return st, fmt.Errorf("changelog: describing %s: %w", topic, err)
	}
	id := td[topic].ID
	starts, err := listedRetrying(ctx, func() (kadm.ListedOffsets, error) { return ac.ListStartOffsets(ctx, topic) })
	if err != nil {
		return st, fmt.Errorf("changelog: start offsets of %s: %w", topic, err)
	}
	ends, err := listedRetrying(ctx, func() (kadm.ListedOffsets, error) { return ac.ListEndOffsets(ctx, topic) })
	if err != nil {
		return st, fmt.Errorf("changelog: end offsets of %s: %w", topic, err)
	}
	lo, _ := starts.Lookup(topic, partition)
	hi, _ := ends.Lookup(topic, partition)

	cpID, next, ok, err := t.Checkpoint()
	if err != nil {
		return st, err
	}
	if !ok || cpID != [16]byte(id) || next < lo.Offset || next > hi.Offset {
		if ok {
			log.Warn("state checkpoint does not match the changelog; rebuilding from its start",
				"topic", topic, "partition", partition, "checkpoint", next, "log_start", lo.Offset, "log_end", hi.Offset,
				"same_topic_id", cpID == [16]byte(id))
		}
		if err := t.Reset(); err != nil {
			return st, err
		}
		st.Rebuilt, next = true, lo.Offset
	}
	if next >= hi.Offset {
		st.Took = time.Since(start)
		return st, nil
	}
	cl, err := committedReader(brokers, opts, topic, map[int32]kgo.Offset{partition: kgo.NewOffset().At(next)})
	if err != nil {
		return st, err
	}
	defer cl.Close()
	var batch []*kgo.Record
	lastLog := time.Now()
	for next < hi.Offset {
		fs, err := poll(ctx, cl, topic)
		if err != nil {
			return st, err
		}
		batch = batch[:0]
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= hi.Offset {
				// Read_committed returns a record only once every
				// transaction before it has ended: all committed
				// writes below hi have been read.
				next = hi.Offset
				return
			}
			next = r.Offset + 1
			if !r.Attrs.IsControl() {
				batch = append(batch, r)
			}
		})
		if err := t.Apply(batch, [16]byte(id), next); err != nil {
			return st, err
		}
		st.Records += len(batch)
		if time.Since(lastLog) > 5*time.Second {
			lastLog = time.Now()
			log.Info("restoring state", "topic", topic, "partition", partition, "records", st.Records,
				"per_second", int(float64(st.Records)/time.Since(start).Seconds()), "at", next, "end", hi.Offset)
		}
	}
	st.Took = time.Since(start)
	return st, nil
}

// committedReader returns a client reading topic's partitions from the
// given offsets, read_committed, with transaction markers (they move the
// reader past the end of an aborted transaction).
func committedReader(brokers []string, opts []kgo.Opt, topic string, from map[int32]kgo.Offset) (*kgo.Client, error) {
	return kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
	}, opts...)...)
}

// poll returns the next fetches, or ctx's error or the first fetch error.
func poll(ctx context.Context, cl *kgo.Client, topic string) (kgo.Fetches, error) {
	fs := cl.PollFetches(ctx)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var ferr error
	fs.EachError(func(_ string, _ int32, err error) { ferr = err })
	if ferr != nil {
		return nil, fmt.Errorf("changelog: reading %s: %w", topic, ferr)
	}
	return fs, nil
}

// listed folds a listing's per-partition errors into its error.
func listed(lo kadm.ListedOffsets, err error) (kadm.ListedOffsets, error) {
	if err == nil {
		err = lo.Error()
	}
	return lo, err
}

// listRetryFor bounds how long listedRetrying asks again.
const listRetryFor = 30 * time.Second

// listedRetrying asks again while the answer carries a retriable error: on
// a cluster, a topic just created is in the metadata before every partition
// leader hosts it, and the leader answers UNKNOWN_TOPIC_OR_PARTITION
// meanwhile (a restore right after the processor created its changelog).
func listedRetrying(ctx context.Context, ask func() (kadm.ListedOffsets, error)) (kadm.ListedOffsets, error) {
	deadline := time.Now().Add(listRetryFor)
	for backoff := 20 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		lo, err := listed(ask())
		if err == nil || !kerr.IsRetriable(err) || time.Now().Add(backoff).After(deadline) {
			return lo, err
		}
		select {
		case <-ctx.Done():
			return lo, err
		case <-time.After(backoff):
		}
	}
}
