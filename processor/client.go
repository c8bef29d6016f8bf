package processor

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/internal/txncore"
)

// txnClient is what the loop needs of its transactional session: a
// txncore.Session in production (sessionClient), a fake in the loop's
// broker-free tests (fakeclient_internal_test.go).
type txnClient interface {
	// Poll fetches up to maxRecords; rebalances wait for AllowRebalance.
	Poll(ctx context.Context, maxRecords int) kgo.Fetches
	AllowRebalance()
	PauseFetchPartitions(map[string][]int32)
	ResumeFetchPartitions(map[string][]int32)
	// Rewind moves consumption back to the last committed offsets;
	// RewindPartitions only some partitions' (nil: all).
	Rewind()
	RewindPartitions(map[string][]int32)

	// Pipeline is how many transactions may be open at once.
	Pipeline() int
	// Begin opens a transaction on the ring's next producer.
	Begin() (txnHandle, error)

	// CheckFenced classifies errors seen outside a commit.
	CheckFenced(ctx context.Context, op string, err error) *txncore.Error
}

// txnHandle is one open transaction (a txncore.Txn).
type txnHandle interface {
	Produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error))
	// Flush waits until every produced record is acknowledged or failed.
	Flush(ctx context.Context) error
	// Commit commits the offsets rewrite puts into the request and ends
	// the transaction; false: aborted, rewind and go on.
	Commit(ctx context.Context, rewrite func(*kmsg.TxnOffsetCommitRequest) error) (bool, error)
	Abort(ctx context.Context) error
	// FlushFailed classifies a failed Flush.
	FlushFailed(ctx context.Context, err error) *txncore.Error
}

// sessionClient is a txncore.Session as the loop's client.
type sessionClient struct{ *txncore.Session }

func (c sessionClient) Begin() (txnHandle, error) {
	t, err := c.Session.Begin()
	if err != nil {
		return nil, err
	}
	return t, nil
}

func (c sessionClient) PauseFetchPartitions(m map[string][]int32) { c.Client().PauseFetchPartitions(m) }

func (c sessionClient) ResumeFetchPartitions(m map[string][]int32) {
	c.Client().ResumeFetchPartitions(m)
}
