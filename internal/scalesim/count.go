package scalesim

import (
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Keys are the requests a commit is made of, in the order the tables
// print them: the transaction coordinator's (AddPartitionsToTxn,
// AddOffsetsToTxn, EndTxn), the group coordinator's (TxnOffsetCommit)
// and the partition leaders' (Produce).
var Keys = []int16{
	int16(kmsg.AddPartitionsToTxn), int16(kmsg.AddOffsetsToTxn), int16(kmsg.EndTxn),
	int16(kmsg.TxnOffsetCommit), int16(kmsg.Produce),
}

// Tally is one request kind's totals.
type Tally struct {
	Requests   int64 // requests the clients wrote
	Written    int64 // bytes written (HookBrokerWrite)
	Read       int64 // response bytes read (HookBrokerRead)
	Partitions int64 // partitions the requests named (kfake's view)
	MaxNamed   int   // most partitions one request named
}

// Counts is a snapshot of everything counted since the counter began.
type Counts struct {
	ByKey   map[int16]Tally
	Commits int64 // EndTxn requests with Commit set
	Aborts  int64 // EndTxn requests without
}

// Sub returns c minus an earlier snapshot (MaxNamed is not a sum and is
// taken from a fresh maximum since Reset, see counter.resetMax).
func (c Counts) Sub(before Counts) Counts {
	out := Counts{ByKey: make(map[int16]Tally, len(c.ByKey)), Commits: c.Commits - before.Commits, Aborts: c.Aborts - before.Aborts}
	for k, t := range c.ByKey {
		b := before.ByKey[k]
		out.ByKey[k] = Tally{Requests: t.Requests - b.Requests, Written: t.Written - b.Written,
			Read: t.Read - b.Read, Partitions: t.Partitions - b.Partitions, MaxNamed: t.MaxNamed}
	}
	return out
}

// counter counts the processors' requests from two sides: the client
// (franz-go hooks, the only place that sees bytes on the wire) and the
// cluster (kfake control functions, which see each request decoded and so
// the partitions it names). Only transactional requests are counted on the
// cluster's side, so the test's own feeder and readers do not show up;
// the hooks are only on the processors' clients.
type counter struct {
	mu    sync.Mutex
	tally map[int16]*Tally
	c     Counts
}

func newCounter() *counter {
	return &counter{tally: make(map[int16]*Tally)}
}

func (c *counter) get(key int16) *Tally {
	t := c.tally[key]
	if t == nil {
		t = new(Tally)
		c.tally[key] = t
	}
	return t
}

// OnBrokerWrite implements kgo.HookBrokerWrite.
func (c *counter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, n int, _, _ time.Duration, err error) {
	if err != nil {
		return
	}
	c.mu.Lock()
	t := c.get(key)
	t.Requests++
	t.Written += int64(n)
	c.mu.Unlock()
}

// OnBrokerRead implements kgo.HookBrokerRead.
func (c *counter) OnBrokerRead(_ kgo.BrokerMetadata, key int16, n int, _, _ time.Duration, err error) {
	if err != nil {
		return
	}
	c.mu.Lock()
	c.get(key).Read += int64(n)
	c.mu.Unlock()
}

var (
	_ kgo.HookBrokerWrite = (*counter)(nil)
	_ kgo.HookBrokerRead  = (*counter)(nil)
)

// named records one request's partitions.
func (c *counter) named(key int16, n int) {
	c.mu.Lock()
	t := c.get(key)
	t.Partitions += int64(n)
	t.MaxNamed = max(t.MaxNamed, n)
	c.mu.Unlock()
}

// resetMax starts a fresh maximum of partitions per request, for a phase.
func (c *counter) resetMax() {
	c.mu.Lock()
	for _, t := range c.tally {
		t.MaxNamed = 0
	}
	c.mu.Unlock()
}

func (c *counter) snapshot() Counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := Counts{ByKey: make(map[int16]Tally, len(c.tally)), Commits: c.c.Commits, Aborts: c.c.Aborts}
	for k, t := range c.tally {
		out.ByKey[k] = *t
	}
	return out
}

// watch installs the cluster-side counting: control functions that look
// and pass every request on (handled false), kept for the cluster's life.
func (c *counter) watch(fake *kfake.Cluster) {
	look := func(key int16, fn func(kmsg.Request)) {
		fake.ControlKey(key, func(req kmsg.Request) (kmsg.Response, error, bool) {
			fake.KeepControl()
			fn(req)
			return nil, nil, false
		})
	}
	look(int16(kmsg.AddPartitionsToTxn), func(r kmsg.Request) {
		req := r.(*kmsg.AddPartitionsToTxnRequest)
		n := 0
		for _, t := range req.Topics { // v0-v3
			n += len(t.Partitions)
		}
		for _, tx := range req.Transactions { // v4+ (brokers' batched form)
			for _, t := range tx.Topics {
				n += len(t.Partitions)
			}
		}
		c.named(int16(kmsg.AddPartitionsToTxn), n)
	})
	look(int16(kmsg.TxnOffsetCommit), func(r kmsg.Request) {
		n := 0
		for _, t := range r.(*kmsg.TxnOffsetCommitRequest).Topics {
			n += len(t.Partitions)
		}
		c.named(int16(kmsg.TxnOffsetCommit), n)
	})
	look(int16(kmsg.Produce), func(r kmsg.Request) {
		req := r.(*kmsg.ProduceRequest)
		if req.TransactionID == nil {
			return // the feeder's
		}
		n := 0
		for _, t := range req.Topics {
			n += len(t.Partitions)
		}
		c.named(int16(kmsg.Produce), n)
	})
	look(int16(kmsg.EndTxn), func(r kmsg.Request) {
		req := r.(*kmsg.EndTxnRequest)
		c.mu.Lock()
		if req.Commit {
			c.c.Commits++
		} else {
			c.c.Aborts++
		}
		c.mu.Unlock()
	})
}
