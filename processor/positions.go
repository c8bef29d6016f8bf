package processor

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/changelog"
	"github.com/onceflow/onceflow/internal/offsetmeta"
)

// The position guard keeps a second copy of each input partition's
// committed position (offset and finished records above it) in a compacted
// topic, written in the transaction that commits the offsets, and so
// committed or aborted with them. On assignment the processor compares the
// offset the group coordinator serves with the last committed position:
// if the coordinator serves an older position, or none, it resumes from
// the position log. A coordinator serving stale offsets otherwise
// makes the new owner redo, and re-emit, everything since (finding 7 in
// docs/reliability.md: Kafka 4.2.0 after a broker restart).

// positionLog is the position guard as a keyspace (see keyspace): it
// keeps nothing per partition, writes the positions a commit plans, and
// restores through the client, which reads the log as partitions are
// assigned (adjustOffsets).
type positionLog struct {
	cfg         *config
	group       *groupEvents
	regressions *atomic.Int64 // Stats.PositionRegressions
}

func (g *positionLog) part(*partition) keyspacePart { return nil }

// clientOpts has the client ask adjustOffsets where newly assigned
// partitions resume.
func (g *positionLog) clientOpts() []kgo.Opt {
	return []kgo.Opt{kgo.AdjustFetchOffsetsFn(g.adjustOffsets)}
}

// planned writes, in the open transaction, the position each partition
// commits, where it moved since the last commit.
func (g *positionLog) planned(t *transaction, parts map[tp]*partition, plans map[tp]commitPlan) {
	for k, pl := range plans {
		p := parts[k]
		if pl.base < 0 || pl.base == p.committed && slices.Equal(pl.done, p.committedDone) {
			continue
		}
		t.produceChangelog(positionsTopic(g.cfg.group, k.topic), k.partition, positionKey(k.partition), encodePosition(pl.base, pl.done))
	}
}

// apply has nothing to do: the log is read back only at assignment.
func (g *positionLog) apply(*transaction, map[tp]*partition) error { return nil }

// positionVersion is the first byte of a position record's value.
const positionVersion = 1

// encodePosition is a position record's value: the version, the committed
// offset, and the finished ranges above it, if any, in offsetmeta's binary
// form.
func encodePosition(base int64, done []offsetmeta.Range) []byte {
	b := make([]byte, 9, 9+offsetmeta.BinaryLen(base, done))
	b[0] = positionVersion
	binary.BigEndian.PutUint64(b[1:], uint64(base))
	if len(done) == 0 {
		return b
	}
	return offsetmeta.AppendBinary(b, base, done)
}

func decodePosition(v []byte) (int64, []offsetmeta.Range, error) {
	if len(v) < 9 || v[0] != positionVersion {
		return 0, nil, fmt.Errorf("%w: position record of %d bytes, version %d", ErrCorruptMetadata, len(v), firstByte(v))
	}
	base := int64(binary.BigEndian.Uint64(v[1:]))
	if base < 0 {
		return 0, nil, fmt.Errorf("%w: position record with offset %d", ErrCorruptMetadata, base)
	}
	if len(v) == 9 {
		return base, nil, nil
	}
	done, err := offsetmeta.DecodeBinary(base, v[9:])
	if err != nil {
		return 0, nil, err
	}
	return base, done, nil
}

func firstByte(b []byte) int {
	if len(b) == 0 {
		return -1
	}
	return int(b[0])
}

func positionKey(partition int32) []byte {
	return binary.BigEndian.AppendUint32(nil, uint32(partition))
}

// adjustOffsets runs after the group served the committed offsets of newly
// assigned partitions (onOffsetsFetched has recorded them) and before
// fetching starts: where the position log is ahead of the offset the group
// served, or the group has none, fetching starts at the logged position
// instead (see takePosition).
func (g *positionLog) adjustOffsets(ctx context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	for topic, parts := range offsets {
		ids := make([]int32, 0, len(parts))
		for p := range parts {
			ids = append(ids, p)
		}
		name := positionsTopic(g.cfg.group, topic)
		start := time.Now()
		last, err := changelog.Last(ctx, g.cfg.brokers, g.cfg.clientOpts(), name, ids)
		if err != nil {
			g.cfg.logger.Warn("cannot read the position log; rejoining the group to try again", "topic", name, "err", err)
			return nil, err
		}
		g.cfg.logger.Info("position log read", "topic", name, "partitions", len(ids), "took", time.Since(start))
		for id, r := range last {
			if r == nil {
				continue
			}
			base, done, err := decodePosition(r.Value)
			if err != nil {
				g.group.fail(fmt.Errorf("position log %s/%d at offset %d: %w", name, id, r.Offset, err))
				continue
			}
			if g.takePosition(tp{topic, id}, base, done) {
				parts[id] = kgo.NewOffset().At(base).WithEpoch(-1)
			}
		}
	}
	return offsets, nil
}

// takePosition decides whether a partition resumes from its logged
// position rather than from what the group served, and records it: the
// later offset wins, and the finished ranges of both are merged (each was
// committed, so each record in them is done).
func (g *positionLog) takePosition(k tp, base int64, done []offsetmeta.Range) bool {
	taken := g.group.update(k, func(served committedInfo, ok bool) (committedInfo, bool) {
		if !ok {
			served.offset = -1
		}
		if served.offset > base {
			return served, false // the log is behind (written while the guard was off)
		}
		merged := mergeRanges(done, served.done, base)
		if served.offset == base && slices.Equal(merged, served.done) {
			return served, false
		}
		log := g.cfg.logger.With("topic", k.topic, "partition", k.partition, "served", served.offset, "served_done", served.done,
			"logged", base, "logged_done", done)
		if served.offset < 0 {
			log.Warn("the group has no committed offset but the position log has one; resuming from the log")
		} else {
			log.Warn("the group coordinator served a position older than the committed position log; resuming from the log (the stale one would redo and re-emit what was committed since)")
		}
		return committedInfo{offset: base, done: merged}, true
	})
	if taken {
		g.regressions.Add(1)
	}
	return taken
}

// mergeRanges returns the union of two sorted range lists, from offset
// from on, sorted and coalesced.
func mergeRanges(a, b []offsetmeta.Range, from int64) []offsetmeta.Range {
	all := append(slices.Clone(a), b...)
	slices.SortFunc(all, func(x, y offsetmeta.Range) int { return cmp.Compare(x.Start, y.Start) })
	var out []offsetmeta.Range
	for _, r := range all {
		r.Start = max(r.Start, from)
		if r.End <= r.Start {
			continue
		}
		if n := len(out); n > 0 && r.Start <= out[n-1].End {
			out[n-1].End = max(out[n-1].End, r.End)
			continue
		}
		out = append(out, r)
	}
	return out
}
