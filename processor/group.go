package processor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/internal/offsetmeta"
	"github.com/onceflow/onceflow/internal/txncore"
)

// groupEvents is what the client's group callbacks report to the loop.
// The callbacks run on the client's goroutines; the loop takes the news
// between polls (handleEvents).
type groupEvents struct {
	log  *slog.Logger
	wake func() // interrupts the loop's poll

	// rebalanceWanted: a rebalance waits for the loop to commit (see
	// txncore.Session.Poll).
	rebalanceWanted atomic.Bool
	// held records the member IDs partitions were assigned under
	// (txncore.Instance.Held); nil in tests.
	held func(member string)
	// yield, under the consumer protocol, holds back franz-go's rejoin
	// after the member was expelled (see onLost); nil under classic.
	yield func(ctx context.Context, cl *kgo.Client) error
	// health learns of losses; nil in tests.
	health *healthState
	// losses counts the member's losses (onLost): franz-go rejoins after
	// each, under a new member ID or, after a network failure, its old
	// one (see txncore.Instance.Recheck).
	losses atomic.Int64

	mu         sync.Mutex
	assigned   map[tp]committedInfo // the committed position of each assigned partition
	revoked    []tp
	fatal      error
	rebalanced bool // a rebalance ran since the last take
	// endDone is closed when the last transaction's end that started is
	// over (startEnd); a revoke waits for it.
	endDone <-chan struct{}
}

type committedInfo struct {
	offset int64
	done   []offsetmeta.Range
}

func newGroupEvents(log *slog.Logger, wake func()) *groupEvents {
	return &groupEvents{log: log, wake: wake, assigned: make(map[tp]committedInfo)}
}

// take returns and clears what happened since the last take.
func (g *groupEvents) take() (fatal error, revoked []tp, rebalanced bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	fatal, revoked, rebalanced = g.fatal, g.revoked, g.rebalanced
	g.revoked, g.rebalanced = nil, false
	return fatal, revoked, rebalanced
}

// committed returns the committed position of an assigned partition.
func (g *groupEvents) committed(k tp) (committedInfo, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	info, ok := g.assigned[k]
	return info, ok
}

// update replaces an assigned partition's committed position with what fn
// returns, if fn says so.
func (g *groupEvents) update(k tp, fn func(served committedInfo, ok bool) (committedInfo, bool)) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	served, ok := g.assigned[k]
	info, replace := fn(served, ok)
	if replace {
		g.assigned[k] = info
	}
	return replace
}

// assignedList returns the assigned partitions.
func (g *groupEvents) assignedList() []tp {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]tp, 0, len(g.assigned))
	for k := range g.assigned {
		out = append(out, k)
	}
	return out
}

func (g *groupEvents) assignedCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.assigned)
}

// fail makes the loop stop with err.
func (g *groupEvents) fail(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.fatal == nil {
		g.fatal = err
	}
}

// startEnd records that a transaction's end starts, done being closed
// when it is over, unless the group revoked partitions that the loop has
// not taken yet (take): then nothing starts, and the loop takes the news
// and judges the transaction again. With onRevoked's wait, an offset
// commit never names a partition that its member gave up: a revoke waits
// for an end that started before it, and franz-go rejoins, and the
// partition goes to another member, only once the callback returns. A
// commit sent after that rejoin would carry the new generation, which the
// group accepts whatever partitions it names, while the new owner may
// have read the partition's older offset: its records would be done and
// committed twice (issue 42).
func (g *groupEvents) startEnd(done <-chan struct{}) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.revoked) > 0 {
		return false
	}
	g.endDone = done
	return true
}

// onRevoked records revoked partitions for the loop, then waits for a
// transaction's end that is running (see startEnd).
func (g *groupEvents) onRevoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	g.mu.Lock()
	n := 0
	for t, ps := range revoked {
		for _, p := range ps {
			g.revoked = append(g.revoked, tp{t, p})
			delete(g.assigned, tp{t, p})
			n++
		}
	}
	g.rebalanced = true
	done := g.endDone
	g.mu.Unlock()
	if n == 0 || done == nil {
		return
	}
	g.wake() // the loop collects the end, and takes the revoke
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// onLost is onRevoked for partitions lost without a revoke: the member
// was expelled (its session expired while the process was stopped or cut
// off) or fenced. franz-go rejoins as soon as this returns, so under the
// consumer protocol it first yields the instance ID to a newer process
// that may be waiting for it (txncore.Instance.YieldOnLost); the loop stops fenced if
// one takes it.
func (g *groupEvents) onLost(ctx context.Context, cl *kgo.Client, lost map[string][]int32) {
	g.losses.Add(1)
	g.log.Info(lostMsg, "partitions", lost)
	if g.health != nil {
		_, epoch := cl.GroupMetadata()
		g.health.lost(epoch)
	}
	g.onRevoked(ctx, cl, lost)
	if g.yield == nil {
		return
	}
	if err := g.yield(ctx, cl); err != nil {
		g.fail(err)
		g.wake()
	}
}

// lostMsg is the log line of a loss (at Info).
const lostMsg = "partitions lost: the group expelled or fenced this member, or its heartbeats failed"

func (g *groupEvents) onRebalanceWanted(context.Context, *kgo.Client) {
	g.rebalanceWanted.Store(true)
	g.wake()
}

// classicJoinGuard fails the processor when its client, asked for the
// consumer protocol, sends a JoinGroup: franz-go falls back to the classic
// protocol without an error when a broker refuses KIP-848's heartbeat.
type classicJoinGuard struct{ g *groupEvents }

func (c classicJoinGuard) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, _ error) {
	if key == int16(kmsg.JoinGroup) {
		c.g.fail(fmt.Errorf("%w: the client fell back to the classic protocol (the group coordinator refused KIP-848's ConsumerGroupHeartbeat)", ErrGroupProtocolUnsupported))
		c.g.wake()
	}
}

// checkGroupProtocol fails for brokers that do not offer the consumer
// protocol. A check that cannot reach the brokers (within 10s) is not an
// answer: the client then retries as usual, and classicJoinGuard still
// catches a fallback.
func checkGroupProtocol(ctx context.Context, s *txncore.Session, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := s.CheckGroupProtocol(ctx)
	if err != nil && !errors.Is(err, ErrGroupProtocolUnsupported) {
		log.Warn("could not check the brokers for the consumer group protocol", "err", err)
		return nil
	}
	return err
}

// onOffsetsFetched decodes the committed metadata of newly assigned
// partitions. Corrupt onceflow metadata stops the processor; foreign
// metadata (another tool's, or franz-go's default member ID) is taken to
// mean nothing above the committed offset is done, and logged.
func (g *groupEvents) onOffsetsFetched(_ context.Context, cl *kgo.Client, resp *kmsg.OffsetFetchResponse) error {
	if g.held != nil {
		member, _ := cl.GroupMetadata()
		g.held(member)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.rebalanced = true
	add := func(topic string, p kmsg.OffsetFetchResponseTopicPartition) {
		info := committedInfo{offset: p.Offset}
		if p.Offset >= 0 && p.Metadata != nil {
			done, err := offsetmeta.Decode(p.Offset, *p.Metadata)
			switch {
			case errors.Is(err, offsetmeta.ErrForeign):
				g.log.Info("commit metadata not written by onceflow; resuming from the committed offset alone",
					"topic", topic, "partition", p.Partition, "offset", p.Offset)
			case err != nil:
				if g.fatal == nil {
					g.fatal = fmt.Errorf("partition %s/%d at offset %d: %w", topic, p.Partition, p.Offset, err)
				}
			default:
				info.done = done
			}
		}
		g.assigned[tp{topic, p.Partition}] = info
		g.log.Debug("offsets fetched", "topic", topic, "partition", p.Partition, "offset", info.offset, "done", info.done)
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
