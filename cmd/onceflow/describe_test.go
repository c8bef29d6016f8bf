package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/internal/offsetmeta"
	"github.com/onceflow/onceflow/processor"
)

// TestDescribe: describe shows a running instance as the owner of every
// input partition; after it stopped, the committed offsets, the finished
// records above them decoded from the commit metadata, the lag to the last
// stable offset; and an instance's open transaction, its partitions, its
// age and the last stable offset it holds, found by the "<group>/" prefix
// among the cluster's transactional IDs (here the ID of a second producer
// of the instance's ring, "<group>/<instance>#1").
func TestDescribe(t *testing.T) {
	c := kafkatest.New(t)
	a := newApp(t, c, 2)
	a.produce(t, 0, 200)

	p, err := processor.New(a.opts("i1")...)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	require.Eventually(t, func() bool {
		st, d, _ := describeJSON(t, c, a.group)
		if st != exitOK || len(d.Partitions) != 2 {
			return false
		}
		var sum int64
		for _, pi := range d.Partitions {
			if pi.InstanceID != "i1" || pi.Member == "" {
				return false
			}
			sum += pi.Committed
		}
		if sum != 200 {
			return false
		}
		return len(d.Members) == 1 && d.Protocol == kafkatest.GroupProtocol()
	}, 30*time.Second, 200*time.Millisecond, "describe never showed i1 owning both partitions")
	cancel()
	require.NoError(t, <-done)
	a.awaitEmpty(t)

	// A stopped group with finished records above a committed offset,
	// and an open transaction of an instance of the group.
	a.commit(t, 0, 5, offsetmeta.Encode(5, []offsetmeta.Range{{Start: 7, End: 9}, {Start: 12, End: 13}}))
	txnID := a.group + "/i1#1" // producer 1 of i1's ring (txn.RingID)
	tcl := c.Client(t, kgo.TransactionalID(txnID), kgo.DefaultProduceTopic(a.out), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, tcl.BeginTransaction())
	pctx, pcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer pcancel()
	require.NoError(t, tcl.ProduceSync(pctx, &kgo.Record{Value: []byte("held"), Partition: 1}).FirstErr())
	defer func() { _ = tcl.EndTransaction(pctx, kgo.TryAbort) }()

	st, d, errOut := describeJSON(t, c, a.group, "-topics", a.out)
	require.Equal(t, exitOK, st, errOut)
	p0 := findPartition(t, d, a.in, 0)
	require.Equal(t, int64(5), p0.Committed)
	require.Equal(t, "onceflow", p0.Metadata)
	require.Equal(t, []offsetmeta.Range{{Start: 7, End: 9}, {Start: 12, End: 13}}, p0.Finished)
	require.Equal(t, int64(3), p0.FinishedRecords)
	require.Equal(t, p0.LastStable-5, p0.Lag)
	require.Empty(t, p0.InstanceID, "a stopped group owns nothing")
	held := findPartition(t, d, a.out, 1)
	require.Less(t, held.LastStable, held.End)
	require.NotNil(t, held.LSOHolder)
	require.Equal(t, txnID, held.LSOHolder.TransactionalID)

	in := findInstance(t, d, "i1")
	var open *txnInfo
	for i := range in.Transactions {
		if in.Transactions[i].TransactionalID == txnID {
			open = &in.Transactions[i]
		}
	}
	require.NotNil(t, open, "the suffixed transactional ID is not under instance i1: %+v", in)
	require.True(t, open.Open)
	require.Equal(t, "Ongoing", open.State)
	require.Contains(t, open.Partitions, a.out+"/1")
	require.Equal(t, []string{a.out + "/1"}, open.HoldsLSO)
	require.Positive(t, open.Age)
	var plain bool
	for _, tx := range in.Transactions {
		plain = plain || tx.TransactionalID == a.group+"/i1" && !tx.Open
	}
	require.True(t, plain, "the processor's own transactional ID is missing: %+v", in)

	// The text form names the same.
	st, text, errOut := cmd(t, append([]string{"describe"}, append(clusterArgs(c, a.group), "-topics", a.out)...)...)
	require.Equal(t, exitOK, st, errOut)
	t.Logf("describe:\n%s", text)
	require.Contains(t, text, "3 in 7-8,12")
	require.Contains(t, text, "held by the open transaction of "+txnID)
	require.Regexp(t, `i1\s+`+strings.ReplaceAll(txnID, ".", `\.`)+`\s+Ongoing`, text)
}

// TestDescribeErrors: unreachable brokers, an unknown group and corrupt
// commit metadata each fail with a clear error; the corrupt metadata is
// shown in the output, not dropped.
func TestDescribeErrors(t *testing.T) {
	c := kafkatest.New(t)
	a := newApp(t, c, 1)

	began := time.Now()
	st, _, errOut := cmd(t, "describe", "-brokers", "127.0.0.1:1", "-group", a.group, "-timeout", "2s")
	require.Equal(t, exitFail, st)
	require.Contains(t, errOut, "cannot reach the brokers 127.0.0.1:1 within 2s")
	require.Less(t, time.Since(began), 10*time.Second)

	st, _, errOut = describeJSON(t, c, a.group)
	require.Equal(t, exitFail, st)
	require.Contains(t, errOut, "unknown group")

	a.commit(t, 0, 3, offsetmeta.Prefix+"!!not base64")
	st, d, errOut := describeJSON(t, c, a.group)
	require.Equal(t, exitFail, st, "corrupt metadata must fail the command")
	require.Contains(t, errOut, "corrupt commit metadata")
	p := findPartition(t, d, a.in, 0)
	require.Equal(t, "corrupt", p.Metadata)
	require.NotEmpty(t, p.MetadataError)
	require.NotEmpty(t, d.Problems)

	a.commit(t, 0, 3, "some-member-id") // franz-go's default metadata
	st, d, errOut = describeJSON(t, c, a.group)
	require.Equal(t, exitOK, st, errOut)
	require.Equal(t, "foreign", findPartition(t, d, a.in, 0).Metadata)
}

// TestDescribeSecured: describe through a listener that requires TLS and
// SCRAM-SHA-512, with the flags; without them it fails at once with the
// reason.
func TestDescribeSecured(t *testing.T) {
	if kafkatest.Real() && !kafkatest.SecuredEnv() {
		t.Skip("needs a secured cluster (KAFKA_TLS_CA, KAFKA_SASL_*) or kfake")
	}
	c := kafkatest.New(t, kafkatest.Secured())
	a := newApp(t, c, 2)
	a.produce(t, 0, 50)
	a.runBounded(t, "i1")
	st, d, errOut := describeJSON(t, c, a.group)
	require.Equal(t, exitOK, st, errOut)
	require.Equal(t, int64(50), findPartition(t, d, a.in, 0).Committed+findPartition(t, d, a.in, 1).Committed)

	began := time.Now()
	st, _, errOut = cmd(t, "describe", "-brokers", strings.Join(c.Brokers, ","), "-group", a.group, "-timeout", "20s")
	require.Equal(t, exitFail, st)
	require.Contains(t, errOut, "refused")
	require.Less(t, time.Since(began), 10*time.Second, "no credentials: a clear error, not a wait")
}
