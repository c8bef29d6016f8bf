package processor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/internal/changelog"
	"github.com/onceflow/onceflow/internal/clientsec"
)

// WithStopAtEnd makes Run a bounded run, for loads and backfills: at start
// Run records the input partitions' end offsets as a read_committed
// consumer sees them (the last stable offsets), and returns nil once the
// group has committed every one of those partitions up to its recorded
// end. Records that arrive later are left for the next run, which
// resumes from the committed offsets, so a run that fails (a crash, a
// fenced instance) is rerun without duplicating anything. It holds with
// several instances in the group: each instance stops when the whole
// group is done, so an instance that owns no partition waits too, and
// partitions that move between instances are finished by their new owner.
// A partition is done when the group's committed offset (or, with
// WithPositionGuard, the logged position, if later) reaches the recorded
// end, or when nothing a read_committed consumer would see lies between
// them (the end is past a transaction marker or an aborted
// transaction, offsets that carry no record to commit after); a partition
// with nothing to read is done at once. Partitions added after the start
// are left for the next run. A second run right after a finished one
// returns at once, without joining the group. As Flink's bounded sources;
// Kafka Streams has no such mode (its users watch the lag from outside).
// Default: off (Run returns when its context ends).
func WithStopAtEnd() Opt { return opt(func(c *config) { c.stopAtEnd = true }) }

// endPollInterval is how often a bounded run asks the group coordinator
// for the committed offsets: one OffsetFetch per instance, so the run
// returns at most this long after its last commit.
var endPollInterval = 200 * time.Millisecond

// missingTopicGrace is how long an input topic may be unknown at start.
const missingTopicGrace = 10 * time.Second

// endFetchBytes bounds the records a check for visible records between a
// committed offset and the end reads per request: the first record found
// settles it, so one small batch is enough in the common case.
const endFetchBytes = 64 << 10

// endWatch is a bounded run's watcher: it owns a client of its own, apart
// from the transactional one, so that it sees the group as any instance
// does, and survives the client rebuilds of the loop.
type endWatch struct {
	cfg  *config
	cl   *kgo.Client
	adm  *kadm.Client
	ends map[tp]int64 // the recorded ends: last stable offsets at start
	// clear records, per partition, an offset from which nothing visible
	// lies below its end (checked by a fetch): a committed offset at or
	// past it is done.
	clear map[tp]int64
	// visible records, per partition, a record below its end that a
	// fetch found visible: until the committed offset passes it the
	// partition is not done, and no fetch is needed to know it.
	visible map[tp]int64
	// last is each partition's committed offset at the previous poll: a
	// partition still moving is not checked by fetching.
	last map[tp]int64
	// topics caches the inputs' metadata (IDs, leaders) for the fetches;
	// dropped after a failed one.
	topics kadm.TopicDetails
}

// startEndWatch records the end offsets and starts the watcher, which
// cancels the returned context once the group is done. done reports that
// Run has nothing to do: the group was done already (or ctx ended); stop
// ends the watcher and closes its client.
func startEndWatch(ctx context.Context, cfg *config) (_ context.Context, stop func(), done bool, err error) {
	cl, err := sideClient(cfg)
	if err != nil {
		return nil, nil, false, fmt.Errorf("%w: %v", ErrInvalidOption, err)
	}
	w := &endWatch{cfg: cfg, cl: cl, adm: kadm.NewClient(cl),
		clear: make(map[tp]int64), visible: make(map[tp]int64), last: make(map[tp]int64)}
	if w.ends, err = w.listEnds(ctx); err != nil {
		cl.Close()
		return nil, nil, false, err
	}
	if done, err = w.firstCheck(ctx); err != nil || done {
		cl.Close()
		return nil, nil, done, err
	}
	wctx, cancel := context.WithCancel(ctx)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		w.watch(wctx, cancel)
	}()
	return wctx, func() {
		cancel()
		<-exited
		cl.Close()
	}, false, nil
}

// listEnds lists the inputs' last stable offsets, retrying what may pass
// (a leader election, a broker restarting) until ctx ends.
func (w *endWatch) listEnds(ctx context.Context) (map[tp]int64, error) {
	// A topic created a moment ago may be missing from a broker's
	// metadata for a moment (a cluster applies it from its metadata log);
	// one missing for longer does not exist.
	unknownUntil := time.Now().Add(missingTopicGrace)
	for {
		listed, err := w.adm.ListCommittedOffsets(ctx, w.cfg.inputs...)
		if err == nil {
			err = listed.Error()
		}
		if err == nil {
			ends := make(map[tp]int64)
			listed.Each(func(o kadm.ListedOffset) { ends[tp{o.Topic, o.Partition}] = o.Offset })
			w.cfg.logger.Info("bounded run: recorded the input end offsets", "partitions", len(ends))
			return ends, nil
		}
		if !retriable(err) || errors.Is(err, kerr.UnknownTopicOrPartition) && time.Now().After(unknownUntil) {
			return nil, fmt.Errorf("processor: WithStopAtEnd: listing the end offsets of %v: %w", w.cfg.inputs, err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("processor: WithStopAtEnd: listing the end offsets of %v: %w (last error: %v)", w.cfg.inputs, ctx.Err(), err)
		case <-time.After(endPollInterval):
		}
	}
}

// retriable reports whether a failed admin request may succeed later.
// Refused credentials and authorization (clientsec.IsAuthError) do not
// pass by themselves: they stop the run with the error.
func retriable(err error) bool {
	if clientsec.IsAuthError(err) {
		return false
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Retriable
	}
	return true
}

// firstCheck asks whether the group is done before Run starts, retrying
// what may pass: on a fresh cluster the group coordinator answers
// COORDINATOR_NOT_AVAILABLE until its offsets topic exists (seen on a
// fresh 3-node cluster: the bounded run failed at once).
func (w *endWatch) firstCheck(ctx context.Context) (bool, error) {
	for {
		done, err := w.done(ctx, true)
		if err == nil || !retriable(err) {
			if err != nil {
				err = fmt.Errorf("processor: WithStopAtEnd: reading the group's committed offsets: %w", err)
			}
			return done, err
		}
		w.cfg.logger.Debug("bounded run: checking the group's progress failed; retrying", "err", err)
		select {
		case <-ctx.Done():
			return true, nil // Run returns nil on a stop
		case <-time.After(endPollInterval):
		}
	}
}

// watch polls the group until it is done, then cancels the run.
func (w *endWatch) watch(ctx context.Context, cancel context.CancelFunc) {
	every(ctx, endPollInterval, func() bool {
		done, err := w.done(ctx, false)
		if err != nil {
			if ctx.Err() == nil {
				w.cfg.logger.Debug("bounded run: checking the group's progress failed; retrying", "err", err)
			}
			return true
		}
		if done {
			w.cfg.logger.Info("bounded run: the group committed every input partition up to its recorded end; stopping")
			cancel()
		}
		return !done
	})
}

// done reports whether the group has committed every recorded partition up
// to its end. A partition committed short of its end is checked for
// visible records only the first time (first) or once its committed offset
// stopped moving: while it moves, the group is still at work on it.
func (w *endWatch) done(ctx context.Context, first bool) (bool, error) {
	committed, err := w.adm.FetchOffsets(ctx, w.cfg.group)
	if err != nil {
		if errors.Is(err, kerr.GroupIDNotFound) {
			committed = nil // a group that never committed
		} else {
			return false, err
		}
	}
	var starts kadm.ListedOffsets // listed only if some partition has no commit
	all := true
	for k, end := range w.ends {
		from, err := w.resumesAt(ctx, k, end, committed, &starts)
		if err != nil {
			return false, err
		}
		last, seen := w.last[k]
		w.last[k] = from
		switch c, cleared := w.clear[k]; {
		case from >= end, cleared && from >= c:
			continue
		case from <= w.visibleAt(k), !first && (!seen || last != from):
			all = false
			continue
		}
		if logged, err := w.loggedPosition(ctx, k); err != nil {
			return false, err
		} else if logged > from {
			// The position guard's log is ahead of the coordinator
			// (finding 7): the processor resumed from the log and
			// has nothing to commit to the coordinator.
			if from = logged; from >= end {
				continue
			}
		}
		v, err := w.firstVisible(ctx, k, from, end)
		if err != nil {
			w.topics = nil
			return false, err
		}
		if v >= 0 {
			w.visible[k] = v
			all = false
			continue
		}
		w.clear[k] = from
	}
	return all, nil
}

// resumesAt is where the processor resumes k, whose end is end: its
// committed offset, or, never committed, the log start (kgo's default
// reset), where there may be nothing left to read. starts is listed once,
// when first needed.
func (w *endWatch) resumesAt(ctx context.Context, k tp, end int64, committed kadm.OffsetResponses, starts *kadm.ListedOffsets) (int64, error) {
	from := int64(-1)
	if o, ok := committed.Lookup(k.topic, k.partition); ok && o.Err == nil && o.At >= 0 {
		from = o.At
	} else if ok && o.Err != nil {
		return 0, fmt.Errorf("committed offset of %s/%d: %w", k.topic, k.partition, o.Err)
	}
	if from >= 0 || from >= end {
		return from, nil
	}
	if *starts == nil {
		var err error
		if *starts, err = w.adm.ListStartOffsets(ctx, w.cfg.inputs...); err == nil {
			err = starts.Error()
		}
		if err != nil {
			return 0, err
		}
	}
	s, _ := starts.Lookup(k.topic, k.partition)
	return s.Offset, nil
}

// loggedPosition is the position the guard's log (WithPositionGuard)
// holds for k, -1 without one. The processor resumes from the log when the
// group coordinator serves an older offset, and then commits nothing to
// the coordinator until it has records to commit: without this a bounded
// run would wait for a commit that never comes.
func (w *endWatch) loggedPosition(ctx context.Context, k tp) (int64, error) {
	if !w.cfg.positionGuard {
		return -1, nil
	}
	last, err := changelog.Last(ctx, w.cfg.brokers, w.cfg.clientOpts(), positionsTopic(w.cfg.group, k.topic), []int32{k.partition})
	if err != nil {
		return -1, err
	}
	r := last[k.partition]
	if r == nil {
		return -1, nil
	}
	base, _, err := decodePosition(r.Value)
	if err != nil {
		return -1, fmt.Errorf("position log of %s/%d: %w", k.topic, k.partition, err)
	}
	return base, nil
}

// visibleAt is the offset of a visible record below the end of k found by
// an earlier check, or -1.
func (w *endWatch) visibleAt(k tp) int64 {
	if v, ok := w.visible[k]; ok {
		return v
	}
	return -1
}

// firstVisible returns the offset of the first record of partition k in
// [from, end) that a read_committed consumer would get, or -1 if there is
// none: the offsets there hold only transaction markers and records of
// aborted transactions, which the processor never sees and so never
// commits past. It reads with raw Fetch requests to the partition's
// leader, which franz-go's ProcessFetchPartition filters as its consumer
// does, and stops at the first visible record.
func (w *endWatch) firstVisible(ctx context.Context, k tp, from, end int64) (int64, error) {
	if w.topics == nil {
		md, err := w.adm.Metadata(ctx, w.cfg.inputs...)
		if err != nil {
			return 0, err
		}
		w.topics = md.Topics
	}
	td, ok := w.topics[k.topic]
	if !ok || td.Err != nil {
		return 0, fmt.Errorf("metadata of %s: %v", k.topic, td.Err)
	}
	pd, ok := td.Partitions[k.partition]
	if !ok || pd.Err != nil || pd.Leader < 0 {
		return 0, fmt.Errorf("no leader for %s/%d", k.topic, k.partition)
	}
	for from < end {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID = -1
		req.MaxBytes = endFetchBytes
		req.IsolationLevel = 1
		req.SessionEpoch = -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = k.topic, td.ID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = k.partition, from, endFetchBytes
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, w.cl.Broker(int(pd.Leader)))
		if err != nil {
			return 0, err
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return 0, err
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return 0, fmt.Errorf("fetch of %s/%d: unexpected response shape", k.topic, k.partition)
		}
		fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
			Offset: from, IsolationLevel: kgo.ReadCommitted(), Topic: k.topic, Partition: k.partition,
		}, &resp.Topics[0].Partitions[0], kgo.DefaultDecompressor(), nil)
		if fp.Err != nil {
			return 0, fp.Err
		}
		for _, r := range fp.Records {
			if r.Offset >= from && r.Offset < end {
				return r.Offset, nil
			}
		}
		if next <= from {
			return 0, fmt.Errorf("fetch of %s/%d at %d returned nothing below the end %d", k.topic, k.partition, from, end)
		}
		from = next
	}
	return -1, nil
}
