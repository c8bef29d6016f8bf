package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/internal/verify"
	"github.com/onceflow/onceflow/txn"
)

// pidNames maps producer IDs to the instances whose transactional IDs hold
// them now (after a restart with the same ID the producer ID stays, the
// epoch grows).
func (e *env) pidNames() map[int64]string {
	ids := e.txnIDs()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	names := make(map[int64]string)
	var described kadm.DescribedTransactions
	var err error
	for try := 0; try < 3; try++ { // the first request after a broker restart may meet a dead connection
		if described, err = e.c.Admin.DescribeTransactions(ctx, ids...); err == nil {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err != nil {
		e.t.Logf("describe transactions: %v", err)
	}
	for id, d := range described {
		if d.Err == nil {
			names[d.ProducerID] = strings.TrimPrefix(id, e.group+"/")
		}
	}
	return names
}

// describe renders one read-back record for evidence.
func (e *env) describe(r *kgo.Record, p verify.Payload) string {
	return fmt.Sprintf("id=%d session=%s seq=%d at %s/%d@%d producer=%d/%d written=%+.3fs input=%v",
		p.ID, r.Key, p.Seq, shortTopic(r.Topic), r.Partition, r.Offset, r.ProducerID, r.ProducerEpoch,
		r.Timestamp.Sub(e.t0).Seconds(), e.feed.loc(p.ID))
}

func shortTopic(t string) string {
	if i := strings.LastIndex(t, "-"); i > 0 {
		if j := strings.LastIndex(t[:i], "-"); j >= 0 {
			return t[j+1 : i]
		}
	}
	return t
}

// evidence logs which IDs broke which guarantee, where they are, and which
// instance's producer wrote them.
func (e *env) evidence(produced int, outs, dlqs []*kgo.Record) {
	t := e.t
	names := e.pidNames()
	who := func(r *kgo.Record) string {
		if n, ok := names[r.ProducerID]; ok {
			return n
		}
		return "?"
	}
	type seen struct {
		r *kgo.Record
		p verify.Payload
	}
	byID := make(map[uint64][]seen)
	for _, rs := range [][]*kgo.Record{outs, dlqs} {
		for _, r := range rs {
			if p, err := verify.Decode(r.Value); err == nil {
				byID[p.ID] = append(byID[p.ID], seen{r, p})
			}
		}
	}
	var b strings.Builder
	dupIDs := 0
	for id := range uint64(produced) {
		if len(byID[id]) > 1 {
			dupIDs++
			if dupIDs <= 15 {
				fmt.Fprintf(&b, "  id %d (input %v) appears %d times:\n", id, e.feed.loc(id), len(byID[id]))
				for _, s := range byID[id] {
					fmt.Fprintf(&b, "    %s instance=%s\n", e.describe(s.r, s.p), who(s.r))
				}
			}
		}
	}
	if dupIDs > 0 {
		t.Logf("DUPLICATES: %d IDs\n%s", dupIDs, b.String())
		// The log around the first duplicate's copies, markers included.
		for id := range uint64(produced) {
			if len(byID[id]) > 1 {
				for _, s := range byID[id] {
					t.Log(e.rawLog(s.r.Topic, s.r.Partition, s.r.Offset-10, s.r.Offset+25))
				}
				break
			}
		}
	}
	b.Reset()
	lost := 0
	for id := range uint64(produced) {
		if len(byID[id]) == 0 {
			lost++
			if lost <= 15 {
				fmt.Fprintf(&b, "  id %d session=%s input=%v\n", id, sessionKey(id, e.cfg.sessions), e.feed.loc(id))
			}
		}
	}
	if lost > 0 {
		t.Logf("LOST: %d IDs\n%s", lost, b.String())
		e.groupState()
	}
	b.Reset()
	last := make(map[string]seen)
	viol := 0
	for _, r := range outs {
		p, err := verify.Decode(r.Value)
		if err != nil {
			continue
		}
		k := string(r.Key)
		if prev, ok := last[k]; ok && p.Seq < prev.p.Seq {
			viol++
			if viol <= 15 {
				fmt.Fprintf(&b, "  session %s: %s instance=%s\n    came after %s instance=%s\n",
					k, e.describe(r, p), who(r), e.describe(prev.r, prev.p), who(prev.r))
			}
		}
		if prev, ok := last[k]; !ok || p.Seq > prev.p.Seq {
			last[k] = seen{r, p}
		}
	}
	if viol > 0 {
		t.Logf("ORDER VIOLATIONS: %d\n%s", viol, b.String())
	}
	t.Logf("producer IDs of the instances' transactional IDs: %v", names)
}

// hangEvidence logs what is missing and where the group and transactions
// stand, before the workers are SIGQUIT.
func (e *env) hangEvidence(produced int) {
	t := e.t
	distinct, dups, records := e.track.status()
	t.Logf("HANG: %d of %d inputs accounted for (%d records, %d duplicates)", distinct, produced, records, dups)
	var b strings.Builder
	for _, id := range e.track.missing(produced, 20) {
		fmt.Fprintf(&b, "  id %d session=%s input=%v\n", id, sessionKey(id, e.cfg.sessions), e.feed.loc(id))
	}
	t.Logf("first missing IDs:\n%s", b.String())
	e.groupState()
}

// groupState logs committed input offsets, output stable offsets, group
// members and the instances' transactions.
func (e *env) groupState() {
	t := e.t
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adm := e.c.Admin
	var b strings.Builder
	ends, err1 := adm.ListEndOffsets(ctx, e.in, e.out, e.dlq)
	stable, err2 := adm.ListCommittedOffsets(ctx, e.out, e.dlq)
	committed, err3 := adm.FetchOffsets(ctx, e.group)
	if err := firstErr(err1, err2, err3); err != nil {
		t.Logf("group state: %v", err)
	}
	for p := range e.cfg.partitions {
		end, _ := ends.Lookup(e.in, p)
		c, _ := committed.Lookup(e.in, p)
		fmt.Fprintf(&b, "  input %d: end %d committed %d (metadata %d bytes, err %v)\n", p, end.Offset, c.At, len(c.Metadata), c.Err)
	}
	for _, topic := range []string{e.out, e.dlq} {
		ends.Each(func(o kadm.ListedOffset) {
			if o.Topic != topic {
				return
			}
			s, _ := stable.Lookup(topic, o.Partition)
			fmt.Fprintf(&b, "  %s %d: end %d last stable %d\n", shortTopic(topic), o.Partition, o.Offset, s.Offset)
		})
	}
	t.Logf("offsets:\n%s", b.String())
	b.Reset()
	// Open transactions on the outputs: who holds each last stable offset.
	names := e.pidNames()
	prods, err := adm.DescribeProducers(ctx, kadm.TopicsSet{e.out: nil, e.dlq: nil})
	if err != nil {
		t.Logf("describe producers: %v", err)
	}
	prods.EachProducer(func(d kadm.DescribedProducer) {
		if d.CurrentTxnStartOffset >= 0 {
			fmt.Fprintf(&b, "  %s %d: producer %d/%d (%s) open transaction from offset %d, last write %+.3fs, coordinator epoch %d\n",
				shortTopic(d.Topic), d.Partition, d.ProducerID, d.ProducerEpoch, nameOr(names, d.ProducerID), d.CurrentTxnStartOffset,
				time.UnixMilli(d.LastTimestamp).Sub(e.t0).Seconds(), d.CoordinatorEpoch)
		}
	})
	if b.Len() > 0 {
		t.Logf("open transactions on output partitions:\n%s", b.String())
	}
	b.Reset()
	state, members, err := e.c.DescribeGroup(ctx, e.group)
	if err != nil {
		t.Logf("describe group: %v", err)
	}
	fmt.Fprintf(&b, "  group state %s (%s protocol), %d members\n", state, kafkatest.GroupProtocol(), len(members))
	for _, m := range members {
		var assigned []string
		for topic, ps := range m.Assigned {
			assigned = append(assigned, fmt.Sprintf("%s%v", shortTopic(topic), ps))
		}
		slices.Sort(assigned)
		fmt.Fprintf(&b, "    %s (%s) %v\n", m.InstanceID, m.MemberID, assigned)
	}
	t.Logf("group:\n%s", b.String())
	b.Reset()
	ids := e.txnIDs()
	txns, err := adm.DescribeTransactions(ctx, ids...)
	if err != nil {
		t.Logf("describe transactions: %v", err)
	}
	for _, id := range ids {
		d := txns[id]
		start := ""
		if d.StartTimestamp > 0 {
			start = fmt.Sprintf(" started %+.3fs", time.UnixMilli(d.StartTimestamp).Sub(e.t0).Seconds())
		}
		fmt.Fprintf(&b, "  %s: %s producer %d/%d%s partitions %v err %v\n",
			strings.TrimPrefix(id, e.group+"/"), d.State, d.ProducerID, d.ProducerEpoch, start, d.Topics, d.Err)
	}
	t.Logf("transactions:\n%s", b.String())
}

// txnIDs returns the transactional IDs of every instance ID used, sorted.
func (e *env) txnIDs() []string {
	e.fleet.mu.Lock()
	defer e.fleet.mu.Unlock()
	ids := make([]string, 0, len(e.fleet.instances))
	for inst := range e.fleet.instances {
		ids = append(ids, txn.ID(e.group, inst))
	}
	slices.Sort(ids)
	return ids
}

func nameOr(names map[int64]string, pid int64) string {
	if n, ok := names[pid]; ok {
		return n
	}
	return "unknown producer"
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
