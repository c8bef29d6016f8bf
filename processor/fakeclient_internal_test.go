package processor

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/internal/txncore"
)

// fakeClient is the loop's client without a broker: Poll returns the
// fetches a test queued, produced records wait for their transaction's
// Flush, and Commit keeps the offsets the loop's rewrite put into the
// request.
type fakeClient struct {
	mu       sync.Mutex
	fetches  []kgo.Fetches
	fetched  chan struct{} // signaled by fetch: a waiting Poll returns it, as kgo's does
	pipeline int

	open map[*fakeTxn]bool // begun, not ended

	// abortNext makes the next Commit abort (a rebalance or a refused
	// offset commit); failNext fails the next produced record; a Commit
	// waits for ending, when set, before it ends the transaction; the
	// next Flush waits for flushing, when set.
	abortNext   bool
	failNext    error
	ending      chan struct{}
	flushing    chan struct{}
	commitDelay time.Duration // each Commit's offset commit and EndTxn

	outputs []*kgo.Record // records of committed transactions, in commit order
	// txnBytes are the bytes of each committed transaction's records.
	txnBytes []int64
	offsets  map[tp]kmsg.TxnOffsetCommitRequestTopicPartition
	// named are the partitions the last committed offset commit named.
	named []tp
	// violations are what the pipeline's invariants forbid, as the fake
	// saw them: a record produced while another transaction's records
	// were unacknowledged (they could reach a partition out of order), a
	// commit started while another was still committing.
	violations []string
	committing bool
	commits    int
	aborts     int
	rewinds    int
	paused     map[tp]bool
	// onAllow, when set, runs once at the next AllowRebalance: a
	// rebalance that waited for it (franz-go's revoke runs then).
	onAllow func()
}

// fakeTxn is one transaction of a fakeClient.
type fakeTxn struct {
	c        *fakeClient
	records  []produced // in produce order
	promised []produced // produced, promise not yet called
}

type produced struct {
	r       *kgo.Record
	promise func(*kgo.Record, error)
	err     error
}

func newFakeClient() *fakeClient {
	return &fakeClient{fetched: make(chan struct{}, 1), pipeline: defaultPipeline, open: make(map[*fakeTxn]bool),
		offsets: make(map[tp]kmsg.TxnOffsetCommitRequestTopicPartition), paused: make(map[tp]bool)}
}

// fetch queues records of one partition for the next Poll.
func (c *fakeClient) fetch(topic string, partition int32, recs ...*kgo.Record) {
	for _, r := range recs {
		r.Topic, r.Partition = topic, partition
	}
	c.mu.Lock()
	c.fetches = append(c.fetches, fetchesOf(topic, partition, recs))
	c.mu.Unlock()
	select {
	case c.fetched <- struct{}{}:
	default:
	}
}

func fetchesOf(topic string, partition int32, recs []*kgo.Record) kgo.Fetches {
	return kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: topic, Partitions: []kgo.FetchPartition{{Partition: partition, Records: recs, HighWatermark: -1}}}}}}
}

func (c *fakeClient) Poll(ctx context.Context, _ int) kgo.Fetches {
	for {
		c.mu.Lock()
		if len(c.fetches) > 0 {
			fs := c.fetches[0]
			c.fetches = c.fetches[1:]
			c.mu.Unlock()
			return fs
		}
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil
		case <-c.fetched:
		}
	}
}

func (c *fakeClient) commitCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.commits
}

func (c *fakeClient) AllowRebalance() {
	c.mu.Lock()
	fn := c.onAllow
	c.onAllow = nil
	c.mu.Unlock()
	if fn != nil {
		fn()
	}
}

func (c *fakeClient) PauseFetchPartitions(m map[string][]int32) { c.setPaused(m, true) }

func (c *fakeClient) ResumeFetchPartitions(m map[string][]int32) { c.setPaused(m, false) }

func (c *fakeClient) setPaused(m map[string][]int32, paused bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for t, ps := range m {
		for _, p := range ps {
			c.paused[tp{t, p}] = paused
		}
	}
}

func (c *fakeClient) isPaused(topic string, partition int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.paused[tp{topic, partition}]
}

func (c *fakeClient) Pipeline() int { return c.pipeline }

func (c *fakeClient) Rewind() { c.RewindPartitions(nil) }

func (c *fakeClient) RewindPartitions(map[string][]int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rewinds++
}

// inTxn reports whether a transaction is open.
func (c *fakeClient) inTxn() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.open) > 0
}

func (c *fakeClient) Begin() (txnHandle, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.open) >= c.pipeline {
		return nil, txncore.ErrPipelineFull
	}
	t := &fakeTxn{c: c}
	c.open[t] = true
	return t, nil
}

func (t *fakeTxn) Produce(_ context.Context, r *kgo.Record, promise func(*kgo.Record, error)) {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	p := produced{r: r, promise: promise, err: c.failNext}
	c.failNext = nil
	for o := range c.open {
		if o != t && len(o.promised) > 0 {
			c.violations = append(c.violations, fmt.Sprintf("%q produced while another transaction had %d records unacknowledged", r.Value, len(o.promised)))
		}
	}
	t.records = append(t.records, p)
	t.promised = append(t.promised, p)
}

func (t *fakeTxn) Flush(context.Context) error {
	c := t.c
	c.mu.Lock()
	if hold := c.flushing; hold != nil {
		c.flushing = nil
		c.mu.Unlock()
		<-hold
		c.mu.Lock()
	}
	ps := t.promised
	c.mu.Unlock()
	for _, p := range ps {
		if p.promise != nil {
			p.promise(p.r, p.err)
		}
	}
	c.mu.Lock()
	t.promised = t.promised[len(ps):] // acknowledged only now
	c.mu.Unlock()
	return nil
}

func (t *fakeTxn) Commit(ctx context.Context, rewrite func(*kmsg.TxnOffsetCommitRequest) error) (bool, error) {
	c := t.c
	c.mu.Lock()
	if c.committing {
		c.violations = append(c.violations, "a commit started while another was committing")
	}
	c.committing = true
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.committing = false
		c.mu.Unlock()
	}()
	if err := t.Flush(ctx); err != nil {
		return false, err
	}
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	if err := rewrite(req); err != nil {
		return false, err
	}
	if c.ending != nil {
		<-c.ending
	}
	time.Sleep(c.commitDelay)
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.open, t)
	if c.abortNext {
		c.abortNext = false
		c.aborts++
		return false, nil
	}
	var bytes int64
	for _, p := range t.records {
		c.outputs = append(c.outputs, p.r)
		bytes += recordBytes(p.r)
	}
	c.txnBytes = append(c.txnBytes, bytes)
	c.named = c.named[:0]
	for _, tt := range req.Topics {
		for _, p := range tt.Partitions {
			c.offsets[tp{tt.Topic, p.Partition}] = p
			c.named = append(c.named, tp{tt.Topic, p.Partition})
		}
	}
	c.commits++
	return true, nil
}

func (t *fakeTxn) Abort(context.Context) error {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.open, t)
	c.aborts++
	return nil
}

func (t *fakeTxn) FlushFailed(_ context.Context, err error) *txncore.Error {
	return &txncore.Error{Class: txncore.ClassReset, Op: "flush", Err: err}
}

func (c *fakeClient) CheckFenced(_ context.Context, op string, err error) *txncore.Error {
	return &txncore.Error{Class: txncore.ClassAbortable, Op: op, Err: err}
}

// committed returns the offset and metadata committed for a partition.
func (c *fakeClient) committed(topic string, partition int32) (int64, string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.offsets[tp{topic, partition}]
	if !ok {
		return 0, "", false
	}
	meta := ""
	if p.Metadata != nil {
		meta = *p.Metadata
	}
	return p.Offset, meta, true
}
