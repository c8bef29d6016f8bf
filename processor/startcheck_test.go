package processor_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/processor"
)

// runBounded runs a processor of opts with context.Background() and
// requires that Run returns within bound plus some slack.
func runBounded(t *testing.T, bound time.Duration, opts ...processor.Opt) error {
	t.Helper()
	p, err := processor.New(append(opts, processor.WithStartTimeout(bound))...)
	require.NoError(t, err)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- p.Run(context.Background()) }()
	select {
	case err := <-done:
		took := time.Since(start)
		require.Less(t, took, bound+5*time.Second, "Run took %v", took)
		return err
	case <-time.After(bound + 60*time.Second):
		t.Fatalf("Run did not return within %v of its start timeout %v", bound+60*time.Second, bound)
		return nil
	}
}

// TestStartBrokersUnreachable: with brokers that do not answer, Run
// returns ErrBrokersUnreachable naming each address and its dial error
// within WithStartTimeout, even with context.Background() (issue 33,
// finding 2: it waited in silence, forever with that context).
func TestStartBrokersUnreachable(t *testing.T) {
	kafkatest.ProtocolIndependent(t)
	opts := func(brokers ...string) []processor.Opt {
		return []processor.Opt{processor.WithBrokers(brokers...), processor.WithGroup("g"), processor.WithInstanceID("i"),
			processor.WithInputTopics("in"), processor.WithOutputTopic("out"), processor.WithHandler(copyHandler),
			processor.WithLogger(testLogger(t))}
	}
	for name, tc := range map[string]struct {
		brokers []string
		want    []string
	}{
		"refused":    {[]string{"127.0.0.1:1"}, []string{"processor: no broker answered within ", "127.0.0.1:1: unable to dial: dial tcp 127.0.0.1:1: connect: connection refused"}},
		"unresolved": {[]string{"no-such-broker.invalid:9092"}, []string{"processor: no broker answered within ", "no-such-broker.invalid:9092"}},
		"both": {[]string{"127.0.0.1:1", "no-such-broker.invalid:9092"}, []string{"127.0.0.1:1: unable to dial: dial tcp 127.0.0.1:1: connect: connection refused",
			"no-such-broker.invalid:9092: "}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := runBounded(t, 2*time.Second, opts(tc.brokers...)...)
			require.ErrorIs(t, err, processor.ErrBrokersUnreachable)
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}
}

// TestStartKeepsItsTimeout: the start check (access, brokers, topics) has
// one deadline, WithStartTimeout: with brokers that refuse every dial, Run
// returns ErrBrokersUnreachable within it, with a second's slack for the
// last dial. Its steps once had a timeout each, and Run took twice as long
// (issue 45).
func TestStartKeepsItsTimeout(t *testing.T) {
	kafkatest.ProtocolIndependent(t)
	const timeout = 3 * time.Second
	p, err := processor.New(processor.WithBrokers("127.0.0.1:1"), processor.WithGroup("g"), processor.WithInstanceID("i"),
		processor.WithInputTopics("in"), processor.WithOutputTopic("out"), processor.WithHandler(copyHandler),
		processor.WithLogger(testLogger(t)), processor.WithStartTimeout(timeout))
	require.NoError(t, err)
	start := time.Now()
	err = p.Run(context.Background())
	took := time.Since(start)
	require.ErrorIs(t, err, processor.ErrBrokersUnreachable)
	require.Contains(t, err.Error(), "127.0.0.1:1: unable to dial")
	require.Less(t, took, timeout+time.Second, "Run took %v with a start timeout of %v", took, timeout)
}

// TestStartTopicMissing: a missing input, output or dead-letter topic
// makes Run return ErrTopicNotFound naming the topic and its option
// within WithStartTimeout (issue 33, finding 3: a missing input made Run
// return nil at its deadline, a missing output aborted a transaction
// about once a second). Nothing is consumed meanwhile.
func TestStartTopicMissing(t *testing.T) {
	c := kafkatest.New(t)
	for name, tc := range map[string]struct {
		opt  func(pl *pipeline) processor.Opt
		want string
	}{
		"input":  {func(*pipeline) processor.Opt { return processor.WithInputTopics("no-such-input") }, "input topic no-such-input (WithInputTopics)"},
		"output": {func(*pipeline) processor.Opt { return processor.WithOutputTopic("no-such-output") }, "output topic no-such-output (WithOutputTopic)"},
		"dlq":    {func(*pipeline) processor.Opt { return processor.WithDLQTopic("no-such-dlq") }, "dead-letter topic no-such-dlq (WithDLQTopic)"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			pl := newPipeline(t, c, 1, 10, 1)
			pl.produce(t, 0, pl.inputs)
			err := runBounded(t, 2*time.Second, append(pl.opts("i1", copyHandler), tc.opt(pl))...)
			require.ErrorIs(t, err, processor.ErrTopicNotFound)
			require.EqualError(t, err, "processor: topic not found: "+tc.want+" on brokers "+strings.Join(c.Brokers, ","))
			require.Empty(t, c.ReadCommitted(t, pl.out))
		})
	}
}

// TestTopicDeletedWhileRunning: an input or dead-letter topic deleted
// while Run runs stops it with ErrTopicNotFound naming the topic and its
// option (the topic watch), and what was committed before stays
// committed, exactly once.
func TestTopicDeletedWhileRunning(t *testing.T) {
	c := kafkatest.New(t)
	for _, which := range []string{"input", "dlq"} {
		t.Run(which, func(t *testing.T) {
			pl := newPipeline(t, c, 2, 200, 20)
			pl.produce(t, 0, pl.inputs)
			r := start(t, append(pl.opts("i1", copyHandler), processor.WithTopicWatchInterval(200*time.Millisecond))...)
			rep := pl.waitDone(t, 60*time.Second)
			require.True(t, rep.ExactlyOnce(), rep.String())
			topic, role := pl.in, "input topic "+pl.in+" (WithInputTopics)"
			if which == "dlq" {
				topic, role = pl.dlq, "dead-letter topic "+pl.dlq+" (WithDLQTopic)"
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := c.Admin.DeleteTopics(ctx, topic)
			require.NoError(t, err)
			err = r.wait(t, 30*time.Second)
			require.ErrorIs(t, err, processor.ErrTopicNotFound)
			require.ErrorContains(t, err, role)
			got := pl.c.ReadCommitted(t, pl.out)
			require.Len(t, got, pl.inputs, "committed outputs stay, once each")
			ids := map[string]bool{}
			for _, r := range got {
				require.False(t, ids[string(r.Value)], "duplicate output")
				ids[string(r.Value)] = true
			}
		})
	}
}

// TestStartAdvertisedUnreachable: the seed answers, but every broker it
// advertises is at an address this process cannot reach (a misconfigured
// advertised.listeners): Run fails at start with ErrBrokersUnreachable
// rather than wait for fetches that never come.
func TestStartAdvertisedUnreachable(t *testing.T) {
	kafkatest.ProtocolIndependent(t)
	if kafkatest.Real() {
		t.Skip("needs kfake's request control")
	}
	c := kafkatest.New(t)
	pl := newPipeline(t, c, 1, 1, 1)
	c.Fake.ControlKey(int16(kmsg.Metadata), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake.KeepControl()
		mreq := req.(*kmsg.MetadataRequest)
		resp := mreq.ResponseKind().(*kmsg.MetadataResponse)
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = 0, "127.0.0.1", 1 // advertised, and unreachable
		resp.Brokers = append(resp.Brokers, b)
		for _, rt := range mreq.Topics {
			t := kmsg.NewMetadataResponseTopic()
			t.Topic = rt.Topic
			p := kmsg.NewMetadataResponseTopicPartition()
			p.Replicas, p.ISR = []int32{0}, []int32{0}
			t.Partitions = append(t.Partitions, p)
			resp.Topics = append(resp.Topics, t)
		}
		return resp, nil, true
	})
	err := runBounded(t, 3*time.Second, pl.opts("i1", copyHandler)...)
	require.ErrorIs(t, err, processor.ErrBrokersUnreachable)
	require.ErrorContains(t, err, "processor: no broker answered: the seed brokers answer but none of the brokers they advertise does (check advertised.listeners): broker 0 at 127.0.0.1:1: ")
}

// TestStopDuringStartCheck: a Run whose context ends while the start check
// waits for the brokers' answer returns nil, as on any stop: the brokers
// did not fail (a worker SIGTERMed 4 ms after its start returned "no
// broker answered within 0s: context canceled").
func TestStopDuringStartCheck(t *testing.T) {
	if kafkatest.Real() {
		t.Skip("holds the embedded cluster's answer")
	}
	c := kafkatest.New(t)
	in := c.CreateTopic(t, "in", 1, nil)
	out := c.CreateTopic(t, "out", 1, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var held atomic.Bool
	release := make(chan struct{})
	c.Fake.ControlKey(kmsg.Metadata.Int16(), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake.KeepControl()
		for _, rt := range kr.(*kmsg.MetadataRequest).Topics {
			// The start check's question names the input; the stop
			// comes while its answer is held.
			if rt.Topic != nil && *rt.Topic == in && held.CompareAndSwap(false, true) {
				cancel()
				c.Fake.SleepControl(func() { <-release })
			}
		}
		return nil, nil, false
	})
	p, err := processor.New(processor.WithBrokers(c.Brokers...), processor.WithGroup(kafkatest.Name(t, "app")),
		processor.WithInstanceID("i1"), processor.WithInputTopics(in), processor.WithOutputTopic(out),
		processor.WithHandler(copyHandler), processor.WithLogger(testLogger(t)))
	require.NoError(t, err)
	err = p.Run(ctx)
	close(release)
	require.NoError(t, err)
	require.True(t, held.Load(), "the start check's question was not seen")
}
