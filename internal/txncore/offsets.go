package txncore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// The ring's producers are not group members, so a Session sends their
// offset commits itself, as franz-go's GroupTransactSession does inside
// End: an AddOffsetsToTxn where transactions predate KIP-890 part 2, then
// the TxnOffsetCommit with the member's group metadata. What franz-go
// decides per producer (transactions v2 or not) is decided here the same
// way, from the brokers' finalized transaction.version and API versions.
//
// The commits go through a client of their own, capped at the last
// versions that name topics rather than topic IDs (TxnOffsetCommit v5,
// OffsetCommit v9): a request that names topics sent at a version that
// reads only IDs would commit to no topic, inside an otherwise committed
// transaction. Below transactions v2 TxnOffsetCommit is capped at v4, as
// franz-go pins it.

// offsetClients sends a Session's offset commits.
type offsetClients struct {
	cfg *Options

	mu  sync.Mutex
	cl  *kgo.Client // built at the first commit, once tv2 is known
	tv2 bool
}

func (o *offsetClients) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cl != nil {
		o.cl.Close()
	}
}

// client returns the commit client, building it on first use from what
// ref (a client of the Session's, with its options) learns of the brokers.
func (o *offsetClients) client(ctx context.Context, ref *kgo.Client) (*kgo.Client, bool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cl != nil {
		return o.cl, o.tv2, nil
	}
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, ref)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		return nil, false, fmt.Errorf("asking the brokers for their versions: %w", err)
	}
	brokers := kversion.FromApiVersionsResponse(resp)
	capped := kversion.Stable()
	if user, ok := ref.OptValue(kgo.MaxVersions).(*kversion.Versions); ok && user != nil {
		capped = user
	}
	at := func(vs *kversion.Versions, k kmsg.Key) int16 {
		v, ok := vs.LookupMaxKeyVersion(int16(k))
		if !ok {
			return -1
		}
		return v
	}
	supports := func(k kmsg.Key, v int16) bool { return at(brokers, k) >= v && at(capped, k) >= v }
	var txnVersion int16
	brokers.EachFinalizedFeature(func(name string, level int16) {
		if name == "transaction.version" {
			txnVersion = level
		}
	})
	o.tv2 = txnVersion >= 2 && supports(kmsg.Produce, 12) && supports(kmsg.EndTxn, 5) && supports(kmsg.TxnOffsetCommit, 5)
	versions := new(kversion.Versions)
	capped.EachMaxKeyVersion(versions.SetMaxKeyVersion)
	txnCommitMax := int16(5)
	if !o.tv2 {
		txnCommitMax = 4
	}
	versions.SetMaxKeyVersion(int16(kmsg.TxnOffsetCommit), min(txnCommitMax, at(capped, kmsg.TxnOffsetCommit)))
	versions.SetMaxKeyVersion(int16(kmsg.OffsetCommit), min(9, at(capped, kmsg.OffsetCommit)))
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(o.cfg.Brokers...)},
		append(o.cfg.ClientOpts, kgo.MaxVersions(versions))...)...)
	if err != nil {
		return nil, false, fmt.Errorf("building the offset commit client: %w", err)
	}
	o.cl = cl
	return cl, o.tv2, nil
}

// commitTxn adds the offsets to p's open transaction.
func (o *offsetClients) commitTxn(ctx context.Context, p *producer, req *kmsg.TxnOffsetCommitRequest) error {
	if len(req.Topics) == 0 {
		return nil
	}
	cl, tv2, err := o.client(ctx, p.cl)
	if err != nil {
		return err
	}
	id, epoch, err := p.cl.ProducerID(ctx)
	if err != nil {
		return err
	}
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = p.id, id, epoch
	if !tv2 {
		add := kmsg.NewPtrAddOffsetsToTxnRequest()
		add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = p.id, id, epoch, req.Group
		if err := retryConcurrent(ctx, func() error {
			resp, err := add.RequestWith(ctx, cl)
			if err != nil {
				return err
			}
			return kerr.ErrorForCode(resp.ErrorCode)
		}); err != nil {
			return fmt.Errorf("AddOffsetsToTxn: %w", err)
		}
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("TxnOffsetCommit: %w", err)
	}
	var errs []error
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				errs = append(errs, fmt.Errorf("TxnOffsetCommit %s/%d: %w", t.Topic, p.Partition, err))
			}
		}
	}
	return errors.Join(errs...)
}

// commitPlain commits the offsets of a transaction that produced nothing
// as the member's own offset commit: with its generation or member epoch
// and instance ID, fenced as a TxnOffsetCommit is.
func (o *offsetClients) commitPlain(ctx context.Context, member *kgo.Client, treq *kmsg.TxnOffsetCommitRequest) error {
	if len(treq.Topics) == 0 {
		return nil
	}
	cl, _, err := o.client(ctx, member)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation, req.MemberID, req.InstanceID = treq.Group, treq.Generation, treq.MemberID, treq.InstanceID
	for _, t := range treq.Topics {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("OffsetCommit: %w", err)
	}
	var errs []error
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				errs = append(errs, fmt.Errorf("OffsetCommit %s/%d: %w", t.Topic, p.Partition, err))
			}
		}
	}
	return errors.Join(errs...)
}

// retryConcurrent retries fn while the coordinator answers
// CONCURRENT_TRANSACTIONS (it still ends the producer's previous
// transaction), as franz-go does for its own transaction requests.
func retryConcurrent(ctx context.Context, fn func() error) error {
	backoff := 2 * time.Millisecond
	for {
		err := fn()
		if !errors.Is(err, kerr.ConcurrentTransactions) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 200*time.Millisecond)
	}
}

// offsetRequest is the offset commit of the member's polled positions,
// with its group metadata (member ID, generation or member epoch,
// instance ID) as it is now.
func (s *Session) offsetRequest() *kmsg.TxnOffsetCommitRequest {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Group = s.cfg.Group
	req.MemberID, req.Generation = s.cl.GroupMetadata()
	req.InstanceID = &s.cfg.InstanceID
	for topic, ps := range s.cl.UncommittedOffsets() {
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = topic
		for partition, eo := range ps {
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = partition, eo.Offset, eo.Epoch
			rp.Metadata = &req.MemberID
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// positions is where Rewind takes each partition: what this Session's
// transactions committed, else the group's commit the member fetched at
// assignment, else the first offset polled (where consuming began). The
// group's client knows only its own commits, and the ring's are not its.
type positions struct {
	committed map[string]map[int32]kgo.EpochOffset
	started   map[string]map[int32]kgo.EpochOffset
}

func setPos(m *map[string]map[int32]kgo.EpochOffset, topic string, partition int32, eo kgo.EpochOffset) {
	if *m == nil {
		*m = make(map[string]map[int32]kgo.EpochOffset)
	}
	if (*m)[topic] == nil {
		(*m)[topic] = make(map[int32]kgo.EpochOffset)
	}
	(*m)[topic][partition] = eo
}

// polled records where consuming began, for partitions never committed.
func (p *positions) polled(fs kgo.Fetches) {
	fs.EachPartition(func(fp kgo.FetchTopicPartition) {
		if len(fp.Records) == 0 {
			return
		}
		if _, ok := p.started[fp.Topic][fp.Partition]; !ok {
			r := fp.Records[0]
			setPos(&p.started, fp.Topic, fp.Partition, kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset})
		}
	})
}

// forget drops what is known of partitions the member no longer owns.
func (p *positions) forget(parts map[string][]int32) {
	for topic, ps := range parts {
		for _, partition := range ps {
			delete(p.committed[topic], partition)
			delete(p.started[topic], partition)
		}
	}
}

// committed records the offsets a transaction committed.
func (s *Session) committed(req *kmsg.TxnOffsetCommitRequest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			setPos(&s.pos.committed, t.Topic, p.Partition, kgo.EpochOffset{Epoch: p.LeaderEpoch, Offset: p.Offset})
		}
	}
}

// Rewind moves the member's consumption back to the last committed
// offsets, after an abort: the records since are fetched again. Call it
// from the goroutine that polls, between polls: what a poll returns
// afterwards comes from the rewound positions.
func (s *Session) Rewind() { s.RewindPartitions(nil) }

// RewindPartitions is Rewind for some partitions only (nil: all).
func (s *Session) RewindPartitions(only map[string][]int32) {
	to := s.cl.CommittedOffsets()
	s.mu.Lock()
	for topic, ps := range s.pos.started {
		for partition, eo := range ps {
			if _, ok := to[topic][partition]; !ok {
				setPos(&to, topic, partition, eo)
			}
		}
	}
	for topic, ps := range s.pos.committed {
		for partition, eo := range ps {
			setPos(&to, topic, partition, eo)
		}
	}
	s.mu.Unlock()
	if only != nil {
		keep := make(map[string]map[int32]kgo.EpochOffset)
		for topic, ps := range only {
			for _, p := range ps {
				if eo, ok := to[topic][p]; ok {
					setPos(&keep, topic, p, eo)
				}
			}
		}
		to = keep
	}
	s.cl.SetOffsets(to)
}
