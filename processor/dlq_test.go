package processor_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/internal/verify"
	"github.com/onceflow/onceflow/processor"
	"github.com/onceflow/onceflow/statestore"
)

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// TestPoisonToDLQ: permanent errors and exhausted retries go to the
// dead-letter topic in the same transaction, with headers saying why;
// inputs = outputs + dead letters.
func TestPoisonToDLQ(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		pl := newPipeline(t, c, 2, 2000, 100)
		pl.produce(t, 0, pl.inputs)
		h := func(ctx context.Context, r *kgo.Record, out processor.Emitter) error {
			p, err := verify.Decode(r.Value)
			if err != nil {
				return processor.Permanent(err)
			}
			switch {
			case p.ID%97 == 0:
				return processor.Permanent(errors.New("poison"))
			case p.ID%89 == 0:
				return errors.New("always failing")
			}
			return copyHandler(ctx, r, out)
		}
		opts := append(pl.opts("i1", h), processor.WithRetryPolicy(processor.RetryPolicy{
			Initial: time.Millisecond, Max: time.Millisecond, Multiplier: 1, Jitter: -1, MaxAttempts: 3,
		}))
		r := start(t, opts...)
		pl.waitDone(t, 60*time.Second)
		require.NoError(t, r.stop(t))
		rep := pl.read(t)
		require.True(t, rep.ExactlyOnce(), rep.String())
		poison, exhausted := 0, 0
		for id := 0; id < pl.inputs; id++ {
			if id%97 == 0 {
				poison++
			} else if id%89 == 0 {
				exhausted++
			}
		}
		require.Equal(t, poison+exhausted, rep.DLQ)
		require.Equal(t, pl.inputs, rep.Outputs+rep.DLQ)

		for _, d := range c.ReadCommitted(t, pl.dlq) {
			p, err := verify.Decode(d.Value)
			require.NoError(t, err)
			require.Equal(t, pl.in, header(d, processor.HeaderSourceTopic))
			off, err := strconv.ParseInt(header(d, processor.HeaderSourceOffset), 10, 64)
			require.NoError(t, err)
			require.GreaterOrEqual(t, off, int64(0))
			_, err = strconv.Atoi(header(d, processor.HeaderSourcePartition))
			require.NoError(t, err)
			_, err = time.Parse(time.RFC3339Nano, header(d, processor.HeaderFirstFailure))
			require.NoError(t, err)
			if p.ID%97 == 0 {
				require.Equal(t, "permanent", header(d, processor.HeaderReason))
				require.Equal(t, "1", header(d, processor.HeaderAttempts))
				require.Contains(t, header(d, processor.HeaderError), "poison")
			} else {
				require.Equal(t, "retries-exhausted", header(d, processor.HeaderReason))
				require.Equal(t, "3", header(d, processor.HeaderAttempts))
				require.Contains(t, header(d, processor.HeaderError), "always failing")
			}
		}
	})
}

// TestStuckRecord: a record whose handler never finishes is dead-lettered
// after the stuck timeout and its partition's commits move on.
func TestStuckRecord(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		pl := newPipeline(t, c, 1, 500, 20)
		pl.produce(t, 0, pl.inputs)
		h := func(ctx context.Context, r *kgo.Record, out processor.Emitter) error {
			if p, _ := verify.Decode(r.Value); p.ID == 7 {
				<-ctx.Done() // stuck until the processor gives up on it
				return ctx.Err()
			}
			return copyHandler(ctx, r, out)
		}
		r := start(t, append(pl.opts("i1", h), processor.WithStuckTimeout(time.Second))...)
		rep := pl.waitDone(t, 60*time.Second)
		require.NoError(t, r.stop(t))
		rep = pl.read(t)
		require.True(t, rep.ExactlyOnce(), rep.String())
		require.Equal(t, 1, rep.DLQ)
		require.Equal(t, pl.inputs-1, rep.Outputs)
		d := c.ReadCommitted(t, pl.dlq)[0]
		require.Equal(t, "stuck", header(d, processor.HeaderReason))
	})
}

// TestNoDLQStops: without a dead-letter topic a poison record stops Run
// with ErrNoDLQ instead of being dropped, and nothing past it is committed
// as done.
func TestNoDLQStops(t *testing.T) {
	c := kafkatest.New(t)
	pl := newPipeline(t, c, 1, 100, 10)
	pl.produce(t, 0, pl.inputs)
	h := func(ctx context.Context, r *kgo.Record, out processor.Emitter) error {
		if p, _ := verify.Decode(r.Value); p.ID == 50 {
			return processor.Permanent(errors.New("poison"))
		}
		return copyHandler(ctx, r, out)
	}
	opts := append(pl.opts("i1", h), processor.WithDLQTopic(""))
	r := start(t, opts...)
	require.ErrorIs(t, r.wait(t, 30*time.Second), processor.ErrNoDLQ)
	rep := pl.read(t)
	require.Zero(t, rep.Duplicates)
	require.Zero(t, rep.DLQ)
}

// validOpts is a valid configuration that contacts nothing until Run.
func validOpts() []processor.Opt {
	return []processor.Opt{
		processor.WithBrokers("127.0.0.1:9092"),
		processor.WithGroup("g"),
		processor.WithInstanceID("i"),
		processor.WithInputTopics("in"),
		processor.WithOutputTopic("out"),
		processor.WithHandler(copyHandler),
	}
}

func TestInvalidOptions(t *testing.T) {
	base := validOpts()
	_, err := processor.New(base...)
	require.NoError(t, err)
	cases := map[string]processor.Opt{
		"WithBrokers":             processor.WithBrokers(),
		"WithGroup":               processor.WithGroup(""),
		"WithInstanceID":          processor.WithInstanceID(""),
		"WithInputTopics":         processor.WithInputTopics(),
		"WithHandler":             processor.WithHandler(nil),
		"WithCommitInterval":      processor.WithCommitInterval(0),
		"WithTransactionTimeout":  processor.WithTransactionTimeout(time.Millisecond),
		"shorter than":            processor.WithCommitInterval(time.Minute),
		"WithStuckTimeout needs":  processor.WithStuckTimeout(time.Second),
		"WithMaxBuffered":         processor.WithMaxBuffered(10, 5),
		"Multiplier":              processor.WithRetryPolicy(processor.RetryPolicy{Initial: 1, Max: 2, Multiplier: 0.5}),
		"WithOrdering":            processor.WithOrdering(processor.Ordering(9)),
		"also an input topic":     processor.WithOutputTopic("in"),
		"WithMaxCommitMetadataBy": processor.WithMaxCommitMetadataBytes(10),
		"WithDrainTimeout":        processor.WithDrainTimeout(time.Hour),
		"WithStateStore: statestore: invalid options: CacheSize": processor.WithStateStore("state", &statestore.Options{CacheSize: -1}),
	}
	// Issue 33, finding 8: empty addresses and topic names, and a job
	// without an output topic that did not say so, were accepted.
	for want, bad := range map[string]processor.Opt{
		"WithBrokers: address 2 of 2 is empty":      processor.WithBrokers("127.0.0.1:9092", ""),
		"WithBrokers: address 1 of 1 is empty":      processor.WithBrokers(" "),
		"WithInputTopics: a topic name is empty":    processor.WithInputTopics(""),
		`WithInputTopics: topic name "a b" has ' '`: processor.WithInputTopics("a b"),
		"WithOutputTopic: the topic name is empty":  processor.WithOutputTopic(""),
		`WithDLQTopic: topic name ".." is not`:      processor.WithDLQTopic(".."),
		"longer than Kafka's 249":                   processor.WithOutputTopic(strings.Repeat("x", 250)),
	} {
		cases[want] = bad
	}
	for want, bad := range cases {
		_, err := processor.New(append(base[:len(base):len(base)], bad)...)
		require.ErrorIs(t, err, processor.ErrInvalidOption, want)
		require.Contains(t, err.Error(), want)
	}
}

// TestOutputTopicRequired: New refuses a job with no output topic unless
// WithoutDefaultOutput says its handler names the topic of every record;
// the later of WithOutputTopic and WithoutDefaultOutput wins (issue 33,
// finding 8).
func TestOutputTopicRequired(t *testing.T) {
	noOutput := []processor.Opt{
		processor.WithBrokers("127.0.0.1:9092"),
		processor.WithGroup("g"),
		processor.WithInstanceID("i"),
		processor.WithInputTopics("in"),
		processor.WithHandler(copyHandler),
	}
	_, err := processor.New(noOutput...)
	require.ErrorIs(t, err, processor.ErrInvalidOption)
	require.EqualError(t, err, "processor: invalid option: WithOutputTopic: an output topic is required, or WithoutDefaultOutput for a handler that names the topic of every record it emits")
	_, err = processor.New(append(noOutput, processor.WithoutDefaultOutput())...)
	require.NoError(t, err)
	_, err = processor.New(append(noOutput, processor.WithOutputTopic("out"), processor.WithoutDefaultOutput())...)
	require.NoError(t, err)
	_, err = processor.New(append(noOutput, processor.WithoutDefaultOutput(), processor.WithOutputTopic(""))...)
	require.ErrorContains(t, err, "WithOutputTopic: the topic name is empty")
	// The changelog topics' names come from the group's.
	_, err = processor.New(append(noOutput, processor.WithOutputTopic("out"), processor.WithGroup("my app"),
		processor.WithStateStore(t.TempDir(), nil))...)
	require.ErrorContains(t, err, `WithGroup "my app": its changelog topic for input in: topic name "my app-in-changelog" has ' '`)
}
