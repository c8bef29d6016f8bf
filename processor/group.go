package processor

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/internal/offsetmeta"
)

// handleEvents applies what the group callbacks reported.
func (l *lifetime) handleEvents(ctx context.Context) error {
	l.mu.Lock()
	fatal, revoked := l.fatal, l.revoked
	l.revoked = nil
	rebalanced := l.rebalanced
	l.rebalanced = false
	l.mu.Unlock()
	if fatal != nil {
		return fatal
	}
	if err := l.takeRestored(); err != nil {
		return err
	}
	resume := make(map[string][]int32)
	for _, k := range revoked {
		l.cfg.logger.Debug("revoked", "partition", k.partition)
		l.p.metrics.unpublish(k)
		l.cancelRestore(k)
		if p := l.parts[k]; p != nil {
			p.gen.Store(0)
			delete(l.parts, k)
			if p.paused {
				resume[k.topic] = append(resume[k.topic], k.partition)
			}
		}
	}
	if len(resume) > 0 {
		l.s.ResumeFetchPartitions(resume)
	}
	if rebalanced {
		l.p.stats.rebalances.Add(1)
		l.cfg.logger.Debug("rebalanced", "in_txn", l.s.InTxn())
	}
	if rebalanced && !l.s.InTxn() {
		// The session marks any rebalance so that the next commit
		// aborts. Nothing is open: clear the mark with an empty abort
		// (its rewind is harmless, refetched records are filtered).
		return l.s.Abort(ctx)
	}
	return nil
}

func (l *lifetime) onRevoked(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for t, ps := range revoked {
		for _, p := range ps {
			l.revoked = append(l.revoked, tp{t, p})
			delete(l.fetched, tp{t, p})
		}
	}
	l.rebalanced = true
}

func (l *lifetime) onRebalanceWanted(context.Context, *kgo.Client) {
	l.pendingRebalance.Store(true)
	l.p.wakePoll()
}

// onOffsetsFetched decodes the committed metadata of newly assigned
// partitions. Corrupt onceflow metadata stops the processor; foreign
// metadata (another tool's, or franz-go's default member ID) is taken to
// mean nothing above the committed offset is done, and logged.
func (l *lifetime) onOffsetsFetched(_ context.Context, _ *kgo.Client, resp *kmsg.OffsetFetchResponse) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rebalanced = true
	add := func(topic string, p kmsg.OffsetFetchResponseTopicPartition) {
		info := committedInfo{offset: p.Offset}
		if p.Offset >= 0 && p.Metadata != nil {
			done, err := offsetmeta.Decode(p.Offset, *p.Metadata)
			switch {
			case errors.Is(err, offsetmeta.ErrForeign):
				l.cfg.logger.Info("commit metadata not written by onceflow; resuming from the committed offset alone",
					"topic", topic, "partition", p.Partition, "offset", p.Offset)
			case err != nil:
				l.fatal = fmt.Errorf("partition %s/%d at offset %d: %w", topic, p.Partition, p.Offset, err)
			default:
				info.done = done
			}
		}
		l.fetched[tp{topic, p.Partition}] = info
		l.cfg.logger.Debug("offsets fetched", "topic", topic, "partition", p.Partition, "offset", info.offset, "done", info.done)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			add(t.Topic, p)
		}
	}
	for _, g := range resp.Groups {
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				add(t.Topic, kmsg.OffsetFetchResponseTopicPartition{Partition: p.Partition, Offset: p.Offset, Metadata: p.Metadata})
			}
		}
	}
	return nil
}

// shutdown finishes in-flight records (bounded), commits and returns.
func (l *lifetime) shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.txnTimeout)
	defer cancel()
	if err := l.waitInFlight(ctx, ctx); err != nil {
		return err
	}
	err := l.commit(ctx)
	l.publish()
	if err != nil {
		l.cfg.logger.Warn("final commit failed; the next start resumes from what is committed", "err", err)
		if errors.Is(err, ErrFenced) {
			return err
		}
	}
	return nil
}

func headerValue(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}
