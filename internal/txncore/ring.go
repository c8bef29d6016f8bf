package txncore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// MaxPipeline bounds Options.Pipeline. A Session's Claim also fences the
// ring IDs above its own up to this bound, which a predecessor with a
// larger ring may have left with open transactions.
const MaxPipeline = 8

// RingID is the transactional ID of producer k of an instance's ring: the
// instance's ID (see ID) for k = 0, so a ring of one is the layout of a
// single producer, and ID(app, instanceID)+"#k" above. Grant them all in
// the brokers' ACLs (a TransactionalId prefix ACL on ID(app, instanceID)).
func RingID(app, instanceID string, k int) string {
	if k == 0 {
		return ID(app, instanceID)
	}
	return ID(app, instanceID) + "#" + strconv.Itoa(k)
}

// producer is one transactional client of the ring. Its transactions run
// one at a time: busy from Begin until the Txn ends.
type producer struct {
	id   string
	cl   *kgo.Client
	busy bool // under Session.mu
}

func (s *Session) buildRing() error {
	for k := range s.cfg.Pipeline {
		id := RingID(s.cfg.Group, s.cfg.InstanceID, k)
		opts := append([]kgo.Opt{
			kgo.SeedBrokers(s.cfg.Brokers...),
			kgo.TransactionalID(id),
			kgo.TransactionTimeout(s.cfg.TransactionTimeout),
			// franz-go retries a produce refused with a retriable error
			// (CONCURRENT_TRANSACTIONS while the coordinator ends the
			// producer's last transaction) only after a metadata refresh,
			// at most one per min age: its default of 5s held a commit up
			// for seconds. As the Java client's retry.backoff.ms.
			kgo.MetadataMinAge(100 * time.Millisecond),
			// A transaction's first produce right after the producer's
			// previous one ended is refused with CONCURRENT_TRANSACTIONS
			// until the coordinator has written the markers: a
			// millisecond or two on one broker. franz-go's default backoff
			// of 20ms (as the Java client's) added 20ms to every
			// transaction's latency with a single producer.
			kgo.ConcurrentTransactionsBackoff(2 * time.Millisecond),
		}, s.cfg.ClientOpts...)
		cl, err := kgo.NewClient(append(opts, s.cfg.ProducerOpts...)...)
		if err != nil {
			for _, p := range s.ring {
				p.cl.Close()
			}
			return fmt.Errorf("txn: building producer %s: %w", id, err)
		}
		s.ring = append(s.ring, &producer{id: id, cl: cl})
	}
	return nil
}

// ErrPipelineFull is returned by Begin when the producer the next
// transaction would take is still ending an earlier one: end it first.
var ErrPipelineFull = errors.New("txn: every producer of the ring has a transaction open or ending")

// Begin opens a transaction on the ring's next producer. With a ring of
// n, up to n transactions may be open at once; end them in the order
// they began, each after the one before it committed (see Txn.Commit).
// The Session's first transaction on a producer initializes its producer
// ID unless Claim did (InitProducerID), which bumps the epoch of its
// transactional ID: a predecessor's open transaction is aborted and the
// predecessor fenced.
func (s *Session) Begin() (*Txn, error) {
	s.mu.Lock()
	p := s.ring[s.next]
	if p.busy {
		s.mu.Unlock()
		return nil, ErrPipelineFull
	}
	p.busy = true
	s.next = (s.next + 1) % len(s.ring)
	s.mu.Unlock()
	if err := p.cl.BeginTransaction(); err != nil {
		s.mu.Lock()
		p.busy = false
		s.mu.Unlock()
		return nil, classifyProduceErr("begin", err)
	}
	t := &Txn{s: s, p: p}
	// The group loop cannot rejoin until the loop allows a rebalance
	// (BlockRebalanceOnPoll): this member ID stays ours until then.
	t.member, _ = s.cl.GroupMetadata()
	return t, nil
}

// initRing initializes every producer of the ring (InitProducerID), in
// parallel, and fences the ring IDs above it that a predecessor with a
// larger ring may hold open transactions under (fenceAbove). Only the
// first producer's error is returned: its initialization is the claim
// (claim.go). The others are a head start: a producer that could not be
// initialized now (its coordinator's node down, say) initializes at its
// first transaction, which aborts a predecessor's open one just the same;
// a ring ID above the ring that could not be fenced is aborted by the
// coordinator at its transaction timeout.
func (s *Session) initRing(ctx context.Context) error {
	errs := make([]error, len(s.ring))
	var wg sync.WaitGroup
	for i, p := range s.ring {
		wg.Go(func() {
			if _, _, err := p.cl.ProducerID(ctx); err != nil {
				errs[i] = fmt.Errorf("initializing %s: %w", p.id, err)
			}
		})
	}
	wg.Go(func() { _ = s.fenceAbove(ctx) })
	wg.Wait()
	return errs[0]
}

// fenceAbove aborts the open transactions of the ring IDs from the
// Session's ring size up to MaxPipeline: an instance restarted with a
// smaller ring (or a single producer, after a ring) would otherwise leave
// them holding its output partitions' last stable offset until the
// transaction timeout. An InitProducerID bumps the epoch, which aborts an
// open transaction and fences the producer that held it.
func (s *Session) fenceAbove(ctx context.Context) error {
	var ids []string
	for k := len(s.ring); k < MaxPipeline; k++ {
		ids = append(ids, RingID(s.cfg.Group, s.cfg.InstanceID, k))
	}
	described, err := kadm.NewClient(s.cl).DescribeTransactions(ctx, ids...)
	if err != nil {
		return fmt.Errorf("describing ring IDs above %d: %w", len(s.ring), err)
	}
	for _, id := range ids {
		d, ok := described[id]
		if !ok || d.Err != nil || d.State != "Ongoing" {
			continue // unknown (never used), or nothing open
		}
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = &id
		req.TransactionTimeoutMillis = int32(s.cfg.TransactionTimeout.Milliseconds())
		req.ProducerID, req.ProducerEpoch = -1, -1
		resp, err := req.RequestWith(ctx, s.cl)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		// CONCURRENT_TRANSACTIONS: it is ending by itself.
		if err != nil && !errors.Is(err, kerr.ConcurrentTransactions) {
			return fmt.Errorf("fencing %s: %w", id, err)
		}
	}
	return nil
}
