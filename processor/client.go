package processor

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/txn"
)

// txnClient is what the loop needs of its transactional client: a
// txn.Session in production (sessionClient), a fake in the loop's
// broker-free tests (loop_internal_test.go).
type txnClient interface {
	// Poll fetches up to maxRecords; rebalances wait for AllowRebalance.
	Poll(ctx context.Context, maxRecords int) kgo.Fetches
	AllowRebalance()
	PauseFetchPartitions(map[string][]int32)
	ResumeFetchPartitions(map[string][]int32)

	InTxn() bool
	Begin() error
	Produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error))
	// Flush waits until every produced record is acknowledged or failed.
	Flush(ctx context.Context) error
	// Commit commits the offsets rewrite puts into the request and ends
	// the transaction; false: aborted, rewind and go on.
	Commit(ctx context.Context, rewrite func(*kmsg.TxnOffsetCommitRequest) error) (bool, error)
	Abort(ctx context.Context) error

	// FlushFailed and CheckFenced classify errors seen outside Commit.
	FlushFailed(ctx context.Context, err error) *txn.Error
	CheckFenced(ctx context.Context, op string, err error) *txn.Error
	// CheckReplaced judges UNRELEASED_INSTANCE_ID (KIP-848).
	CheckReplaced(ctx context.Context, now time.Time, op string, err error, ours []string, w *txn.HolderWait) *txn.Error
}

// sessionClient is a txn.Session as the loop's client.
type sessionClient struct{ *txn.Session }

func (c sessionClient) Flush(ctx context.Context) error { return c.Client().Flush(ctx) }

func (c sessionClient) PauseFetchPartitions(m map[string][]int32) { c.Client().PauseFetchPartitions(m) }

func (c sessionClient) ResumeFetchPartitions(m map[string][]int32) {
	c.Client().ResumeFetchPartitions(m)
}
