package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/onceflow/onceflow/internal/offsetmeta"
)

// description is describe's answer, as printed with -json.
type description struct {
	Group      string          `json:"group"`
	Protocol   string          `json:"protocol"`
	State      string          `json:"state"`
	Members    []member        `json:"members"`
	Partitions []partitionInfo `json:"partitions"`
	Instances  []instanceInfo  `json:"instances"`
	// Problems are what describe found wrong (corrupt commit metadata,
	// missing topics, calls that failed): each is also on the partition
	// or instance it concerns, and makes the exit status 1.
	Problems []string `json:"problems,omitempty"`
}

// partitionInfo is one input partition.
type partitionInfo struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Committed is the group's committed offset: the lowest record not
	// finished (-1: none committed).
	Committed int64 `json:"committed"`
	// Finished are the records above Committed that are finished
	// (offsetmeta ranges, end exclusive), FinishedRecords their count.
	Finished        []offsetmeta.Range `json:"finished_above,omitempty"`
	FinishedRecords int64              `json:"finished_above_records"`
	// Metadata says what the commit metadata is: "onceflow", "none",
	// "foreign" (not written by onceflow) or "corrupt".
	Metadata      string `json:"metadata"`
	MetadataError string `json:"metadata_error,omitempty"`
	LogStart      int64  `json:"log_start"`
	// LastStable is the last stable offset (what read_committed
	// consumers reach), End the high watermark.
	LastStable int64 `json:"last_stable"`
	End        int64 `json:"end"`
	// Lag is LastStable minus Committed (or minus LogStart when nothing
	// is committed): offsets not yet committed, finished ones included.
	Lag        int64  `json:"lag"`
	Member     string `json:"member,omitempty"`
	InstanceID string `json:"instance_id,omitempty"`
	// LSOHolder is the open transaction holding LastStable below End,
	// if any.
	LSOHolder *lsoHolder `json:"lso_held_by,omitempty"`
}

// lsoHolder is a producer whose open transaction holds a partition's
// last stable offset.
type lsoHolder struct {
	ProducerID      int64  `json:"producer_id"`
	TransactionalID string `json:"transactional_id,omitempty"` // when it is one of the group's
	TxnStartOffset  int64  `json:"txn_start_offset"`
}

// instanceInfo is one instance: a member of the group, the owner of
// transactional IDs of the group, or both.
type instanceInfo struct {
	InstanceID   string    `json:"instance_id"`
	Member       string    `json:"member,omitempty"`
	Host         string    `json:"host,omitempty"`
	Transactions []txnInfo `json:"transactions"`
}

// txnInfo is one transactional ID and its state (DescribeTransactions).
type txnInfo struct {
	TransactionalID string        `json:"transactional_id"`
	State           string        `json:"state"`
	Open            bool          `json:"open"`
	ProducerID      int64         `json:"producer_id"`
	ProducerEpoch   int16         `json:"producer_epoch"`
	Timeout         time.Duration `json:"timeout_ns"`
	Started         *time.Time    `json:"started,omitempty"`
	Age             time.Duration `json:"age_ns,omitempty"`
	Partitions      []string      `json:"partitions,omitempty"` // topic/partition
	// HoldsLSO are the partitions whose last stable offset this
	// transaction holds: its first record there is the oldest open one.
	HoldsLSO []string `json:"holds_lso_of,omitempty"`
	Error    string   `json:"error,omitempty"`
}

// openStates are the transaction states in which a transaction holds
// last stable offsets.
var openStates = []string{"Ongoing", "PrepareCommit", "PrepareAbort"}

// describe gathers the description of a group; extra names input topics
// to show beside those the group committed or is assigned.
func describe(ctx context.Context, adm admin, group string, extra []string, now time.Time) (*description, error) {
	g, err := describeGroup(ctx, adm, group)
	if err != nil {
		return nil, err
	}
	d := &description{Group: group, Protocol: g.Protocol, State: g.State, Members: g.Members}
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return nil, fmt.Errorf("fetching the committed offsets of %s: %w", group, err)
	}
	topics := inputTopics(committed, g, extra)
	if err := d.addPartitions(ctx, adm, topics, committed, g); err != nil {
		return nil, err
	}
	if err := d.addTransactions(ctx, adm, g, now); err != nil {
		return nil, err
	}
	if err := d.addLSOHolders(ctx, adm); err != nil {
		d.Problems = append(d.Problems, fmt.Sprintf("describing producers: %v", err))
	}
	return d, nil
}

// inputTopics are the topics the group committed offsets for or is
// assigned, and the extra ones.
func inputTopics(committed kadm.OffsetResponses, g groupInfo, extra []string) []string {
	set := map[string]bool{}
	for t := range committed {
		set[t] = true
	}
	for _, m := range g.Members {
		for t := range m.Assigned {
			set[t] = true
		}
	}
	for _, t := range extra {
		set[t] = true
	}
	return slices.Sorted(func(yield func(string) bool) {
		for t := range set {
			if !yield(t) {
				return
			}
		}
	})
}

// addPartitions fills Partitions: offsets, finished records, owners.
func (d *description) addPartitions(ctx context.Context, adm admin, topics []string, committed kadm.OffsetResponses, g groupInfo) error {
	if len(topics) == 0 {
		return nil
	}
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		return fmt.Errorf("listing start offsets: %w", err)
	}
	lsos, err := adm.ListCommittedOffsets(ctx, topics...)
	if err != nil {
		return fmt.Errorf("listing last stable offsets: %w", err)
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return fmt.Errorf("listing end offsets: %w", err)
	}
	ends.Each(func(e kadm.ListedOffset) {
		if e.Err != nil {
			d.Problems = append(d.Problems, fmt.Sprintf("%s/%d: listing offsets: %v", e.Topic, e.Partition, e.Err))
			return
		}
		p := partitionInfo{Topic: e.Topic, Partition: e.Partition, Committed: -1, End: e.Offset, Metadata: "none"}
		if s, ok := starts.Lookup(e.Topic, e.Partition); ok && s.Err == nil {
			p.LogStart = s.Offset
		}
		p.LastStable = p.End
		if l, ok := lsos.Lookup(e.Topic, e.Partition); ok && l.Err == nil {
			p.LastStable = l.Offset
		}
		if o, ok := committed.Lookup(e.Topic, e.Partition); ok {
			if o.Err != nil {
				d.Problems = append(d.Problems, fmt.Sprintf("%s/%d: committed offset: %v", e.Topic, e.Partition, o.Err))
			} else if o.At >= 0 {
				p.Committed = o.At
				d.decodeMetadata(&p, o.Metadata)
			}
		}
		from := p.Committed
		if from < 0 {
			from = p.LogStart
		}
		p.Lag = max(p.LastStable-from, 0)
		if m, ok := g.owner(e.Topic, e.Partition); ok {
			p.Member, p.InstanceID = m.MemberID, m.InstanceID
		}
		d.Partitions = append(d.Partitions, p)
	})
	slices.SortFunc(d.Partitions, func(a, b partitionInfo) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return nil
}

// decodeMetadata reads the finished records above the committed offset
// from the commit metadata. Corrupt metadata is reported, never dropped:
// the processor refuses to run on it (processor.ErrCorruptMetadata).
func (d *description) decodeMetadata(p *partitionInfo, meta string) {
	done, err := offsetmeta.Decode(p.Committed, meta)
	switch {
	case meta == "":
	case errors.Is(err, offsetmeta.ErrForeign):
		p.Metadata = "foreign"
	case err != nil:
		p.Metadata, p.MetadataError = "corrupt", err.Error()
		d.Problems = append(d.Problems, fmt.Sprintf("%s/%d: corrupt commit metadata at offset %d: %v (%q)", p.Topic, p.Partition, p.Committed, err, meta))
	default:
		p.Metadata, p.Finished = "onceflow", done
		for _, r := range done {
			p.FinishedRecords += r.End - r.Start
		}
	}
}

// addTransactions fills Instances: the group's members and the owners of
// transactional IDs "<group>/...", found by listing every transaction and
// matching the prefix (an instance may have several: a ring of producers,
// see instanceOf).
func (d *description) addTransactions(ctx context.Context, adm admin, g groupInfo, now time.Time) error {
	byInstance := map[string]*instanceInfo{}
	get := func(id string) *instanceInfo {
		if in, ok := byInstance[id]; ok {
			return in
		}
		in := &instanceInfo{InstanceID: id}
		byInstance[id] = in
		return in
	}
	for _, m := range g.Members {
		if m.InstanceID != "" {
			in := get(m.InstanceID)
			in.Member, in.Host = m.MemberID, m.Host
		}
	}
	listed, err := adm.ListTransactions(ctx, nil, nil)
	if err != nil {
		// Partial answers (a broker down) still name transactions.
		d.Problems = append(d.Problems, fmt.Sprintf("listing transactions: %v", err))
	}
	prefix := d.Group + "/"
	var ids []string
	for id := range listed {
		if strings.HasPrefix(id, prefix) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	if len(ids) > 0 {
		described, err := adm.DescribeTransactions(ctx, ids...)
		if err != nil {
			d.Problems = append(d.Problems, fmt.Sprintf("describing transactions: %v", err))
		}
		for _, id := range ids {
			in := get(instanceOf(strings.TrimPrefix(id, prefix)))
			t := txnInfo{TransactionalID: id, State: listed[id].State, ProducerID: listed[id].ProducerID}
			if dt, ok := described[id]; ok {
				if dt.Err != nil {
					t.Error = dt.Err.Error()
					d.Problems = append(d.Problems, fmt.Sprintf("transaction %s: %v", id, dt.Err))
				} else {
					t.State, t.ProducerID, t.ProducerEpoch = dt.State, dt.ProducerID, dt.ProducerEpoch
					t.Timeout = time.Duration(dt.TimeoutMillis) * time.Millisecond
					for _, tp := range dt.Topics.Sorted() {
						for _, p := range tp.Partitions {
							t.Partitions = append(t.Partitions, fmt.Sprintf("%s/%d", tp.Topic, p))
						}
					}
					if dt.StartTimestamp > 0 {
						started := time.UnixMilli(dt.StartTimestamp)
						// Clocks differ: a transaction begun a moment ago may
						// look as if it had begun in the future.
						t.Started, t.Age = &started, max(now.Sub(started), 0)
					}
				}
			}
			t.Open = slices.Contains(openStates, t.State)
			if !t.Open {
				t.Started, t.Age = nil, 0
			}
			in.Transactions = append(in.Transactions, t)
		}
	}
	for _, in := range byInstance {
		d.Instances = append(d.Instances, *in)
	}
	slices.SortFunc(d.Instances, func(a, b instanceInfo) int { return cmp.Compare(a.InstanceID, b.InstanceID) })
	return nil
}

// instanceOf maps what follows "<group>/" in a transactional ID to its
// instance ID: a ring of producers (the processor's pipelined
// transactions) gives producer k > 0 of an instance the ID
// "<group>/<instance ID>#k", producer 0 the plain "<group>/<instance ID>"
// (txn.ID), so a trailing "#<digits>" is the producer's place in the ring.
func instanceOf(rest string) string {
	if i := strings.LastIndexByte(rest, '#'); i > 0 && i < len(rest)-1 && strings.Trim(rest[i+1:], "0123456789") == "" {
		return rest[:i]
	}
	return rest
}

// addLSOHolders finds, for the input partitions whose last stable offset
// is below their end and for the partitions of the group's open
// transactions, the producer whose open transaction started at the last
// stable offset (DescribeProducers): the one holding it.
func (d *description) addLSOHolders(ctx context.Context, adm admin) error {
	byPID := map[int64]*txnInfo{}
	set := kadm.TopicsSet{}
	for i := range d.Instances {
		for j := range d.Instances[i].Transactions {
			t := &d.Instances[i].Transactions[j]
			if !t.Open {
				continue
			}
			byPID[t.ProducerID] = t
			for _, tp := range t.Partitions {
				topic, p, ok := splitTP(tp)
				if ok {
					set.Add(topic, p)
				}
			}
		}
	}
	for _, p := range d.Partitions {
		if p.LastStable < p.End {
			set.Add(p.Topic, p.Partition)
		}
	}
	if len(set) == 0 {
		return nil
	}
	lsos, err := adm.ListCommittedOffsets(ctx, set.Topics()...)
	if err != nil {
		return err
	}
	producers, err := adm.DescribeProducers(ctx, set)
	if err != nil {
		return err
	}
	holders := map[string]lsoHolder{}
	producers.EachPartition(func(dp kadm.DescribedProducersPartition) {
		l, ok := lsos.Lookup(dp.Topic, dp.Partition)
		if !ok || l.Err != nil || dp.Err != nil {
			return
		}
		for _, pr := range dp.ActiveProducers {
			if pr.CurrentTxnStartOffset >= 0 && pr.CurrentTxnStartOffset == l.Offset {
				h := lsoHolder{ProducerID: pr.ProducerID, TxnStartOffset: pr.CurrentTxnStartOffset}
				if t, ok := byPID[pr.ProducerID]; ok {
					h.TransactionalID = t.TransactionalID
					t.HoldsLSO = append(t.HoldsLSO, fmt.Sprintf("%s/%d", dp.Topic, dp.Partition))
				}
				holders[fmt.Sprintf("%s/%d", dp.Topic, dp.Partition)] = h
			}
		}
	})
	for i := range d.Partitions {
		p := &d.Partitions[i]
		if h, ok := holders[fmt.Sprintf("%s/%d", p.Topic, p.Partition)]; ok && p.LastStable < p.End {
			p.LSOHolder = &h
		}
	}
	for _, t := range byPID {
		slices.Sort(t.HoldsLSO)
	}
	return nil
}

// splitTP parses "topic/partition".
func splitTP(s string) (string, int32, bool) {
	i := strings.LastIndexByte(s, '/')
	if i < 0 {
		return "", 0, false
	}
	var p int32
	if _, err := fmt.Sscan(s[i+1:], &p); err != nil {
		return "", 0, false
	}
	return s[:i], p, true
}
