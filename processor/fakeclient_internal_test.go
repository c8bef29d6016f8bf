package processor

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/txn"
)

// fakeClient is the loop's client without a broker: Poll returns the
// fetches a test queued, produced records wait for Flush, and Commit keeps
// the offsets the loop's rewrite put into the request.
type fakeClient struct {
	mu      sync.Mutex
	fetches []kgo.Fetches
	polled  chan struct{} // signaled when Poll waits with nothing queued

	inTxn    bool
	open     []produced // the open transaction's records
	promised []produced // produced, promise not yet called

	// abortNext makes the next Commit abort (a rebalance or a refused
	// offset commit); failNext fails the next produced record; a Commit
	// waits for ending, when set, before it ends the transaction; the
	// next Flush waits for flushing, when set.
	abortNext bool
	failNext  error
	ending    chan struct{}
	flushing  chan struct{}

	outputs []*kgo.Record // records of committed transactions, in produce order
	offsets map[tp]kmsg.TxnOffsetCommitRequestTopicPartition
	commits int
	aborts  int
	paused  map[tp]bool
}

type produced struct {
	r       *kgo.Record
	promise func(*kgo.Record, error)
	err     error
}

func newFakeClient() *fakeClient {
	return &fakeClient{polled: make(chan struct{}, 1), offsets: make(map[tp]kmsg.TxnOffsetCommitRequestTopicPartition), paused: make(map[tp]bool)}
}

// fetch queues records of one partition for the next Poll.
func (c *fakeClient) fetch(topic string, partition int32, recs ...*kgo.Record) {
	for _, r := range recs {
		r.Topic, r.Partition = topic, partition
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fetches = append(c.fetches, fetchesOf(topic, partition, recs))
}

func fetchesOf(topic string, partition int32, recs []*kgo.Record) kgo.Fetches {
	return kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: topic, Partitions: []kgo.FetchPartition{{Partition: partition, Records: recs, HighWatermark: -1}}}}}}
}

func (c *fakeClient) Poll(ctx context.Context, _ int) kgo.Fetches {
	c.mu.Lock()
	if len(c.fetches) > 0 {
		fs := c.fetches[0]
		c.fetches = c.fetches[1:]
		c.mu.Unlock()
		return fs
	}
	c.mu.Unlock()
	select {
	case c.polled <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return nil
}

func (c *fakeClient) AllowRebalance() {}

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

func (c *fakeClient) InTxn() bool { return c.inTxn }

func (c *fakeClient) Begin() error {
	c.inTxn = true
	return nil
}

func (c *fakeClient) Produce(_ context.Context, r *kgo.Record, promise func(*kgo.Record, error)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := produced{r: r, promise: promise, err: c.failNext}
	c.failNext = nil
	c.open = append(c.open, p)
	c.promised = append(c.promised, p)
}

func (c *fakeClient) Flush(context.Context) error {
	c.mu.Lock()
	if hold := c.flushing; hold != nil {
		c.flushing = nil
		c.mu.Unlock()
		<-hold
		c.mu.Lock()
	}
	ps := c.promised
	c.promised = nil
	c.mu.Unlock()
	for _, p := range ps {
		if p.promise != nil {
			p.promise(p.r, p.err)
		}
	}
	return nil
}

func (c *fakeClient) Commit(ctx context.Context, rewrite func(*kmsg.TxnOffsetCommitRequest) error) (bool, error) {
	if err := c.Flush(ctx); err != nil {
		return false, err
	}
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	if err := rewrite(req); err != nil {
		return false, err
	}
	if c.ending != nil {
		<-c.ending
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inTxn = false
	open := c.open
	c.open = nil
	if c.abortNext {
		c.abortNext = false
		c.aborts++
		return false, nil
	}
	for _, p := range open {
		c.outputs = append(c.outputs, p.r)
	}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			c.offsets[tp{t.Topic, p.Partition}] = p
		}
	}
	c.commits++
	return true, nil
}

func (c *fakeClient) Abort(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inTxn = false
	c.open = nil
	c.aborts++
	return nil
}

func (c *fakeClient) FlushFailed(_ context.Context, err error) *txn.Error {
	return &txn.Error{Class: txn.ClassReset, Op: "flush", Err: err}
}

func (c *fakeClient) CheckFenced(_ context.Context, op string, err error) *txn.Error {
	return &txn.Error{Class: txn.ClassAbortable, Op: op, Err: err}
}

func (c *fakeClient) CheckReplaced(context.Context, time.Time, string, error, []string, *txn.HolderWait) *txn.Error {
	return nil
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
