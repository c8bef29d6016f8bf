package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/internal/brokerretry"
)

// warmUpTimeout bounds a warm-up. A fresh real broker creates
// __transaction_state (50 partitions by default) and __consumer_offsets
// on first use, which takes seconds, not minutes.
const warmUpTimeout = 2 * time.Minute

// warmUp readies, before a phase's first timed run, what all its runs
// share, so that no mode pays for another's setup: on a fresh real broker
// franz-gts run first made 18,079 rec/s against about 400,000 warm, having
// waited in its window for __transaction_state to be created and for its
// new topics to reach every broker. The Env's first warm-up commits one
// transaction and one group offset (the coordinators' topics then exist
// and are loaded); every warm-up waits until every broker knows every
// topic of the phase with a leader for each partition, and asks each
// partition's leader for its end offset. The topics the processor creates
// itself (changelog, dedupe) belong to one run each and are not warmed.
// One line on r.Stderr says what it took.
func (r *Runner) warmUp(ctx context.Context, scenario string, topics []string) error {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, warmUpTimeout)
	defer cancel()
	stop := r.Progress.Start(func() string {
		return fmt.Sprintf("%s: warming up %.1fs", scenario, time.Since(start).Seconds())
	})
	defer stop()
	var did []string
	if !r.Env.coordinatorsWarm {
		if err := r.Env.warmCoordinators(ctx); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
		r.Env.coordinatorsWarm = true
		did = append(did, "a committed transaction and a group commit")
	}
	brokers, err := r.Env.awaitTopics(ctx, topics)
	if err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	took := time.Since(start)
	stop()
	noun := "topics"
	if len(topics) == 1 {
		noun = "topic"
	}
	did = append(did, fmt.Sprintf("%d %s known to every broker (%d) and listed by each partition's leader", len(topics), noun, brokers))
	r.Log.Info("warmed up", "scenario", scenario, "took", took)
	if r.Stderr != nil {
		fmt.Fprintf(r.Stderr, "eosbench: %s: warm-up took %v: %s\n", scenario, took.Round(time.Millisecond), strings.Join(did, "; "))
	}
	return nil
}

// warmCoordinators commits one transaction, with its own transactional ID
// and a record on a topic of its own, and one simple (memberless) offset
// commit of a group of its own: the transaction and group coordinators
// of every mode's run then exist and are loaded.
func (e *Env) warmCoordinators(ctx context.Context) error {
	topic, err := e.Topic(ctx, "warmup", 1)
	if err != nil {
		return err
	}
	if _, err := e.awaitTopics(ctx, []string{topic}); err != nil {
		return err
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(e.Brokers...),
		kgo.TransactionalID(e.Name("warmup")),
		kgo.TransactionTimeout(10 * time.Second),
		kgo.DefaultProduceTopic(topic),
	}, e.opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := cl.BeginTransaction(); err != nil {
		return fmt.Errorf("beginning the transaction: %w", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("warm-up")}).FirstErr(); err != nil {
		return errors.Join(fmt.Errorf("producing in the transaction: %w", err), cl.EndTransaction(ctx, kgo.TryAbort))
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return fmt.Errorf("committing the transaction: %w", err)
	}
	var offsets kadm.Offsets
	offsets.AddOffset(topic, 0, 1, -1)
	resp, err := e.adm.CommitOffsets(ctx, e.Group("warmup"), offsets)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return fmt.Errorf("committing a group offset: %w", err)
	}
	return nil
}

// awaitTopics waits until every broker's metadata has every topic with a
// leader for each partition (a topic just created reaches the brokers one
// by one), then until each partition's leader answers a ListOffsets. It
// returns the number of brokers. The brokers' hiccups are retried until
// ctx ends; a refusal (authorization) fails at once.
func (e *Env) awaitTopics(ctx context.Context, topics []string) (int, error) {
	var brokers kadm.BrokerDetails
	err := brokerretry.Do(ctx, e.log, "listing the brokers", func() error {
		var err error
		brokers, err = e.adm.ListBrokers(ctx)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("listing the brokers: %w", err)
	}
	for _, b := range brokers {
		what := fmt.Sprintf("waiting for broker %d to know the topics", b.NodeID)
		if err := brokerretry.Do(ctx, e.log, what, func() error { return e.brokerKnows(ctx, b.NodeID, topics) }); err != nil {
			return 0, fmt.Errorf("%s: %w", what, err)
		}
	}
	err = brokerretry.Do(ctx, e.log, "listing end offsets", func() error {
		listed, err := e.adm.ListEndOffsets(ctx, topics...)
		if err == nil {
			err = listed.Error()
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("listing end offsets: %w", err)
	}
	return len(brokers), nil
}

// brokerKnows asks one broker for the topics' metadata: nil when it has
// each of them with a leader for every partition; what it lacks yet is
// brokerretry.NotYet.
func (e *Env) brokerKnows(ctx context.Context, broker int32, topics []string) error {
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = false // waiting, not creating
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	kresp, err := e.cl.Broker(int(broker)).Request(ctx, req)
	if err != nil {
		return err
	}
	resp := kresp.(*kmsg.MetadataResponse)
	known := 0
	for _, t := range resp.Topics {
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		}
		if !slices.Contains(topics, name) {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return fmt.Errorf("topic %s: %w", name, err)
		}
		if len(t.Partitions) == 0 {
			return brokerretry.NotYet(fmt.Errorf("topic %s: no partitions yet", name))
		}
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("topic %s partition %d: %w", name, p.Partition, err)
			}
			if p.Leader < 0 {
				return brokerretry.NotYet(fmt.Errorf("topic %s partition %d: no leader yet", name, p.Partition))
			}
		}
		known++
	}
	if known < len(topics) {
		return brokerretry.NotYet(fmt.Errorf("%d of %d topics known", known, len(topics)))
	}
	return nil
}
