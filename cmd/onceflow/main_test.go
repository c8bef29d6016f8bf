package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/processor"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// app is one test's application: topics, group, instance.
type app struct {
	c       *kafkatest.Cluster
	in, out string
	group   string
}

func newApp(t *testing.T, c *kafkatest.Cluster, partitions int32) *app {
	a := &app{c: c, group: kafkatest.Name(t, "app")}
	c.ConsumerGroupTimeouts(t, a.group, 6*time.Second, 500*time.Millisecond)
	a.in = c.CreateTopic(t, "in", partitions, nil)
	a.out = c.CreateTopic(t, "out", partitions, nil)
	return a
}

// produce writes n keyed records, each with an event ID.
func (a *app) produce(t *testing.T, from, to int) {
	t.Helper()
	cl := a.c.Client(t, kgo.DefaultProduceTopic(a.in))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var rs []*kgo.Record
	for i := from; i < to; i++ {
		rs = append(rs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%7), Value: fmt.Appendf(nil, "v%d", i),
			Headers: []kgo.RecordHeader{{Key: processor.HeaderEventID, Value: fmt.Appendf(nil, "ev-%05d", i)}}})
	}
	require.NoError(t, cl.ProduceSync(ctx, rs...).FirstErr())
}

// opts are a processor's options: a copy job keeping a count per key.
func (a *app) opts(instance string, extra ...processor.Opt) []processor.Opt {
	h := func(ctx context.Context, r *kgo.Record, out processor.Emitter) error {
		if st := processor.StateFrom(ctx); st != nil {
			st.Set(r.Key, r.Value)
		}
		out.Emit(&kgo.Record{Value: r.Value})
		return nil
	}
	return append([]processor.Opt{
		processor.WithBrokers(a.c.Brokers...), processor.WithGroup(a.group), processor.WithInstanceID(instance),
		processor.WithInputTopics(a.in), processor.WithOutputTopic(a.out), processor.WithHandler(h),
		processor.WithSessionTimeout(6 * time.Second), processor.WithDrainTimeout(2 * time.Second),
		processor.WithLogger(slog.New(slog.DiscardHandler)),
		processor.WithGroupProtocol(processor.GroupProtocol(kafkatest.GroupProtocol())),
		processor.WithKgoOpts(a.c.ClientOpts...),
	}, extra...)
}

// runBounded runs a processor until the group is done.
func (a *app) runBounded(t *testing.T, instance string, extra ...processor.Opt) {
	t.Helper()
	p, err := processor.New(a.opts(instance, append(extra, processor.WithStopAtEnd())...)...)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, p.Run(ctx))
	a.awaitEmpty(t)
}

// cmd runs onceflow with args and returns its status, stdout and stderr.
func cmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	st := run(context.Background(), args, &out, &errb)
	return st, out.String(), errb.String()
}

// clusterArgs are the flags that reach the test's cluster.
func clusterArgs(c *kafkatest.Cluster, group string) []string {
	args := []string{"-brokers", strings.Join(c.Brokers, ","), "-group", group, "-timeout", "20s"}
	if s := c.Security; s.Secured() {
		if s.TLS || s.CAFile != "" {
			args = append(args, "-tls")
		}
		if s.CAFile != "" {
			args = append(args, "-tls-ca", s.CAFile)
		}
		if s.Mechanism != "" {
			args = append(args, "-sasl-mechanism", s.Mechanism, "-sasl-user", s.User, "-sasl-password", s.Password)
		}
	}
	return args
}

// describeJSON runs describe -json and decodes it.
func describeJSON(t *testing.T, c *kafkatest.Cluster, group string, extra ...string) (int, description, string) {
	t.Helper()
	st, out, errOut := cmd(t, append(append([]string{"describe", "-json"}, clusterArgs(c, group)...), extra...)...)
	var d description
	if out != "" {
		require.NoError(t, json.Unmarshal([]byte(out), &d), out)
	}
	return st, d, errOut
}

func findPartition(t *testing.T, d description, topic string, p int32) partitionInfo {
	t.Helper()
	for _, pi := range d.Partitions {
		if pi.Topic == topic && pi.Partition == p {
			return pi
		}
	}
	t.Fatalf("no %s/%d in %+v", topic, p, d.Partitions)
	return partitionInfo{}
}

func findInstance(t *testing.T, d description, id string) instanceInfo {
	t.Helper()
	for _, in := range d.Instances {
		if in.InstanceID == id {
			return in
		}
	}
	t.Fatalf("no instance %s in %+v", id, d.Instances)
	return instanceInfo{}
}

// awaitEmpty waits until the group has no members: a stopped static
// member stays until its session times out (6s here).
func (a *app) awaitEmpty(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, members, err := a.c.DescribeGroup(ctx, a.group)
		return err == nil && len(members) == 0
	}, 30*time.Second, 100*time.Millisecond, "the group kept members")
}

// commit commits an offset with metadata for a stopped group.
func (a *app) commit(t *testing.T, partition int32, at int64, meta string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: a.in, Partition: partition, At: at, LeaderEpoch: -1, Metadata: meta})
	resps, err := a.c.Admin.CommitOffsets(ctx, a.group, os)
	require.NoError(t, err)
	require.NoError(t, resps.Error())
}

// committed returns the group's committed offset and metadata.
func (a *app) committed(t *testing.T, partition int32) (int64, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs, err := a.c.Admin.FetchOffsets(ctx, a.group)
	require.NoError(t, err)
	o, ok := offs.Lookup(a.in, partition)
	if !ok {
		return -1, ""
	}
	return o.At, o.Metadata
}
