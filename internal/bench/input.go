package bench

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/brokerretry"
	"github.com/onceflow/onceflow/internal/verify"
)

// SessionKey is the key of session s: every record of a session has it,
// so the default partitioner keeps a session in one partition.
func SessionKey(s int) []byte { return fmt.Appendf(nil, "s%06d", s) }

// inputRecord builds input record id: session id%sessions, Seq id/sessions
// (its position within the session, as records are produced in ID order).
func inputRecord(id, sessions, size int, now time.Time) *kgo.Record {
	p := verify.Payload{ID: uint64(id), Seq: uint64(id / sessions), ProducedAt: now}
	return &kgo.Record{Key: SessionKey(id % sessions), Value: verify.Append(make([]byte, 0, size), p, size)}
}

// producer writes a run's input in ID order, which is per-partition
// offset order too, so that Seq is the order a session's outputs must keep.
type producer struct {
	cl       *kgo.Client
	sessions int
	size     int
	dups     *dupSchedule // nil: every event once, without event IDs

	mu       sync.Mutex
	err      error
	first    time.Time // ProducedAt of the first record run produced (after any primer)
	produced int
}

// newProducer's records ride out the brokers' hiccups until the context
// given to run ends (the run's deadline): franz-go retries a record
// through refused dials and moved leaders by itself, idempotently, so
// nothing is written twice; the hiccups go to log, the first of each kind.
func newProducer(brokers []string, opts []kgo.Opt, topic string, sessions, size int, log *slog.Logger) (*producer, error) {
	hiccups := &brokerretry.Hiccups{Log: log, What: "producing the input to " + topic}
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.DefaultProduceTopic(topic),
		// Paced runs hand over a few records at a time: do not hold them
		// back for a batch, or the linger shows up as latency.
		kgo.ProducerLinger(0),
		// franz-go gives up after 4 UNKNOWN_TOPIC_OR_PARTITION answers;
		// brokers that have not learned of a new topic yet give more
		// (issues 42 and 45).
		kgo.UnknownTopicRetries(-1),
		kgo.WithLogger(hiccups.KgoLogger()),
	}, opts...)...)
	if err != nil {
		return nil, err
	}
	return &producer{cl: cl, sessions: sessions, size: size}, nil
}

func (p *producer) close() { p.cl.Close() }

func (p *producer) promise(_ *kgo.Record, err error) {
	if err != nil {
		p.mu.Lock()
		if p.err == nil {
			p.err = err
		}
		p.mu.Unlock()
	}
}

// produce writes IDs [from, to) now; a primer's records (see primerSize)
// do not start the timed window.
func (p *producer) produce(ctx context.Context, from, to int, primer bool) {
	now := time.Now()
	p.mu.Lock()
	if p.first.IsZero() && !primer {
		p.first = now
	}
	p.mu.Unlock()
	for id := from; id < to; id++ {
		r := inputRecord(id, p.sessions, p.size, now)
		if p.dups == nil {
			p.cl.Produce(ctx, r, p.promise)
			continue
		}
		r.Headers = append(r.Headers, eventIDHeader(id))
		p.cl.Produce(ctx, r, p.promise)
		for _, j := range p.dups.at[id] {
			d := inputRecord(j, p.sessions, p.size, now)
			d.Headers = append(d.Headers, eventIDHeader(j))
			p.cl.Produce(ctx, d, p.promise)
		}
	}
	p.mu.Lock()
	p.produced = to
	p.mu.Unlock()
}

// run writes IDs [from, n) at rate records/s (as fast as possible when
// rate is 0) and waits until all are acknowledged.
func (p *producer) run(ctx context.Context, from, n int, rate float64) error {
	if rate <= 0 {
		p.produce(ctx, from, n, false)
	} else {
		// Catch up to rate×elapsed every tick rather than sleeping per
		// record: timers cannot wake 50,000 times a second.
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		start, sent := time.Now(), from
		for sent < n {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-tick.C:
			}
			due := min(n, from+int(rate*time.Since(start).Seconds())+1)
			if due > sent {
				p.produce(ctx, sent, due, false)
				sent = due
			}
		}
	}
	if err := p.cl.Flush(ctx); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// prime writes the primer, IDs [0, k), at once and waits until they are
// acknowledged.
func (p *producer) prime(ctx context.Context, k int) error {
	p.produce(ctx, 0, k, true)
	if err := p.cl.Flush(ctx); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// status returns the time of the first timed record (after the primer)
// and how many were handed to the client so far.
func (p *producer) status() (first time.Time, produced int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.first, p.produced
}

// primerSize is how many inputs a paced run produces before its clock
// starts (the fair-start rule, docs/benchmarks.md): the shortest prefix of
// IDs 0..n-1 whose sessions reach every input partition that any session
// reaches (under the producer's key hashing, Kafka's murmur2), so that every
// partition, and every task or stream thread that owns one, has produced
// output before timed input arrives. It is at most a tenth of the inputs
// (at least 1): the rest are what the run measures.
func primerSize(n, sessions, partitions int) int {
	if n <= 0 || partitions <= 0 {
		return 0
	}
	limit := max(1, n/10)
	part := kgo.StickyKeyPartitioner(nil).ForTopic("")
	reachable := map[int]bool{}
	for s := range min(sessions, n) {
		reachable[part.Partition(&kgo.Record{Key: SessionKey(s)}, partitions)] = true
	}
	seen := map[int]bool{}
	for id := range min(n, limit) {
		seen[part.Partition(&kgo.Record{Key: SessionKey(id % sessions)}, partitions)] = true
		if len(seen) == len(reachable) {
			return id + 1
		}
	}
	return limit
}
