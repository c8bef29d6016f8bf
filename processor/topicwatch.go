package processor

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A topic of the job deleted while Run runs: franz-go drops a deleted
// input's partitions from the assignment without an error, and fails the
// produces to a deleted output or dead-letter topic, which aborts every
// transaction after it, again and again. Neither says which topic is gone,
// nor stops. The watch asks the brokers about the job's topics every
// topicWatchInterval and, once a topic is confirmed gone, stops Run as its
// context would (in-flight work drains and what finished commits, where
// it still can) and Run returns an error wrapping ErrTopicNotFound. What
// was committed stays committed.

// topicWatchInterval is how often the watch asks about the job's topics:
// one small metadata request, rare enough to cost nothing.
const topicWatchInterval = 10 * time.Second

// topicGoneConfirm is how long a topic must stay missing, asked again
// with backoff, before it counts as gone: a broker that restarted may not
// know every topic yet.
const topicGoneConfirm = 5 * time.Second

// watchTopics starts the watch. The returned context is ctx, canceled
// with a cause wrapping ErrTopicNotFound when a topic is gone; pass Run's
// result through stop, which ends the watch and returns that cause in
// place of the result.
func (p *Processor) watchTopics(ctx context.Context) (context.Context, func(error) error) {
	wctx, cancel := context.WithCancelCause(ctx)
	every := topicWatchInterval
	if d := p.hooks.topicWatch; d > 0 {
		every = d
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(p.cfg.brokers...)}, p.cfg.clientOpts()...)...)
		if err != nil {
			return // the start check built one with the same options
		}
		defer cl.Close()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-t.C:
			}
			if err := confirmTopicsGone(wctx, cl, &p.cfg, p.cfg.jobTopics()); err != nil {
				p.cfg.logger.Error("a topic of the job is gone; stopping (what was committed stays committed)", "err", err)
				cancel(err)
				return
			}
		}
	}()
	return wctx, func(runErr error) error {
		cause := context.Cause(wctx)
		cancel(nil)
		<-done
		if errors.Is(cause, ErrTopicNotFound) {
			return cause
		}
		return runErr
	}
}

// confirmTopicsGone returns an error wrapping ErrTopicNotFound, naming the
// topics, if the brokers say that some of topics do not exist and keep
// saying so for topicGoneConfirm; nil if they all exist or the brokers
// cannot tell (unreachable: the loop has its own ways with that). It is
// also the check to make where a fetch or a produce fails with an error
// for which topicGone is true.
func confirmTopicsGone(ctx context.Context, cl *kgo.Client, cfg *config, topics []string) error {
	deadline := time.Now().Add(topicGoneConfirm)
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		resp, err := metadataOf(ctx, cl, topics)
		if err != nil {
			return nil
		}
		missing, err := missingTopics(resp)
		if err != nil || len(missing) == 0 {
			return nil // present, or unknowable (unauthorized): not ours to judge here
		}
		if time.Now().Add(backoff).After(deadline) {
			return topicsNotFound(cfg, missing)
		}
		topics = missing
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
	}
}
