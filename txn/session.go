package txn

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ID returns the transactional ID of an application instance. It is stable
// across restarts, so a restarted instance fences its predecessor.
func ID(app, instanceID string) string { return app + "/" + instanceID }

// Config describes a transactional group session.
type Config struct {
	Brokers    []string
	Group      string // the application; also the consumer group
	InstanceID string // stable per instance; group.instance.id
	Topics     []string

	TransactionTimeout time.Duration // transaction.timeout.ms
	SessionTimeout     time.Duration // session.timeout.ms
	RebalanceTimeout   time.Duration // max.poll.interval.ms for rebalances

	// Incarnation identifies this process among processes with the same
	// instance ID: its start time (Unix nanoseconds), the same for every
	// session the process builds. The JoinGroup metadata carries it (see
	// incarnationBalancer) unless ClientOpts set kgo.Balancers. 0:
	// unknown, any other member with our instance ID counts as newer.
	Incarnation int64

	// ClientOpts are appended last: callbacks, TLS, SASL, logging.
	ClientOpts []kgo.Opt
}

// Session is one transactional client lifetime. After an error of class
// ClassReset, ClassFenced or ClassOutcomeUnknown it must be closed and, if
// the caller goes on, replaced by a new Session.
type Session struct {
	cfg    Config
	gts    *kgo.GroupTransactSession
	inTxn  bool
	member string // group member ID when the open transaction began
}

// NewSession builds the client. Nothing is contacted until the first poll.
func NewSession(cfg Config) (*Session, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topics...),
		kgo.InstanceID(cfg.InstanceID),
		kgo.TransactionalID(ID(cfg.Group, cfg.InstanceID)),
		kgo.TransactionTimeout(cfg.TransactionTimeout),
		kgo.SessionTimeout(cfg.SessionTimeout),
		// The Java default is 3s against a 45s session; keep the same
		// ratio for short sessions, or members expire between heartbeats.
		kgo.HeartbeatInterval(min(3*time.Second, cfg.SessionTimeout/3)),
		kgo.RebalanceTimeout(cfg.RebalanceTimeout),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.DisableAutoCommit(),
		// Rebalances wait until the loop has committed: see Poll.
		kgo.BlockRebalanceOnPoll(),
		// As the Java client's fetch.max.wait.ms: a partition resumed after
		// backpressure waits at most this for a fetch already in flight.
		kgo.FetchMaxWait(500 * time.Millisecond),
		// franz-go retries a produce refused with a retriable error
		// (CONCURRENT_TRANSACTIONS while the coordinator ends the last
		// transaction) only after a metadata refresh, at most one per
		// min age: its default of 5s held a commit up for seconds. As
		// the Java client's retry.backoff.ms.
		kgo.MetadataMinAge(100 * time.Millisecond),
	}
	if cfg.Incarnation > 0 {
		// franz-go's default balancer, with the incarnation appended;
		// before ClientOpts, so that a user's kgo.Balancers wins.
		opts = append(opts, kgo.Balancers(incarnationBalancer{kgo.CooperativeStickyBalancer(), incarnationTrailer(cfg.Incarnation)}))
	}
	gts, err := kgo.NewGroupTransactSession(append(opts, cfg.ClientOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("txn: building client: %w", err)
	}
	return &Session{cfg: cfg, gts: gts}, nil
}

// Client is the underlying client, for pausing, resuming and metadata. Do
// not use it to manage transactions.
func (s *Session) Client() *kgo.Client { return s.gts.Client() }

// Poll fetches records. Rebalances are blocked from Poll until
// AllowRebalance, so offsets are committed while the generation that
// fetched them is still current.
func (s *Session) Poll(ctx context.Context, maxRecords int) kgo.Fetches {
	return s.gts.PollRecords(ctx, maxRecords)
}

// AllowRebalance lets a pending rebalance run; call it after Commit.
func (s *Session) AllowRebalance() { s.gts.AllowRebalance() }

// InTxn reports whether a transaction is open.
func (s *Session) InTxn() bool { return s.inTxn }

// Begin opens a transaction if none is open.
func (s *Session) Begin() error {
	if s.inTxn {
		return nil
	}
	if err := s.gts.Begin(); err != nil {
		return classifyProduceErr("begin", err)
	}
	s.inTxn = true
	// The group loop cannot rejoin until the transaction ends
	// (BlockRebalanceOnPoll): this member ID stays ours until then.
	s.member, _ = s.gts.Client().GroupMetadata()
	return nil
}

// FlushFailed classifies a failed flush of the open transaction's records
// (nothing was committed): ClassFenced if it timed out or was fenced while
// a newer process holds our instance ID (see endFenced), else ClassReset.
func (s *Session) FlushFailed(ctx context.Context, err error) *Error {
	if s.endFenced(ctx, s.member, err) {
		return &Error{ClassFenced, "flush", err}
	}
	return &Error{ClassReset, "flush", err}
}

// Produce sends r in the open transaction.
func (s *Session) Produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error)) {
	s.gts.Produce(ctx, r, promise)
}

// Commit flushes, commits offsets as rewritten by rewrite (KIP-447: with the
// group's member ID, generation and instance ID) and ends the transaction.
// It returns (false, nil) when the transaction was aborted because the
// group rebalanced or the offset commit was refused for a retriable reason:
// the caller rewinds to its last committed state and goes on.
func (s *Session) Commit(ctx context.Context, rewrite func(*kmsg.TxnOffsetCommitRequest) error) (bool, error) {
	return s.end(ctx, kgo.TryCommit, rewrite)
}

// Abort aborts the open transaction (or, with none open, only rewinds the
// consumer to the last committed offsets and clears a pending rebalance
// mark, so that the next transaction can commit).
func (s *Session) Abort(ctx context.Context) error {
	_, err := s.end(ctx, kgo.TryAbort, nil)
	return err
}

func (s *Session) end(ctx context.Context, how kgo.TransactionEndTry, rewrite func(*kmsg.TxnOffsetCommitRequest) error) (bool, error) {
	s.inTxn = false
	defer func() { s.member = "" }()
	ectx := ctx
	if rewrite != nil {
		ectx = kgo.PreTxnCommitFnContext(ctx, rewrite)
	}
	// The member ID the transaction ran under: the group loop cannot rejoin
	// before End returns (BlockRebalanceOnPoll), so another member ID under
	// our instance ID afterwards is another process.
	member := s.member
	if member == "" {
		member, _ = s.gts.Client().GroupMetadata()
	}
	committed, err := s.gts.End(ectx, how)
	if err == nil {
		return committed, nil
	}
	// Any End error may come after an EndTxn(commit) reached the
	// coordinator: never assume either outcome.
	if s.endFenced(ctx, member, err) {
		return false, &Error{ClassFenced, "commit", err}
	}
	return false, &Error{ClassOutcomeUnknown, "commit", err}
}

// endFenced judges an End error. Besides fencing errors it asks the group
// after a timeout: a zombie (stopped past its session while a newer
// process took its instance ID) wakes with End waiting for a heartbeat
// that its blocked group loop never sends, so its End times out instead of
// failing with FENCED_INSTANCE_ID. Rebuilding would then rejoin under the
// instance ID and fence the newer process in turn (seen in the soak on
// Kafka 4.2.0: the replacement exited fenced, the zombie ran on).
func (s *Session) endFenced(ctx context.Context, member string, err error) bool {
	if errors.Is(err, kerr.FencedInstanceID) {
		return s.otherHolder(ctx, member) != holderOlder
	}
	if !isFencing(err) && !errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	return s.otherHolder(ctx, member) == holderNewer
}

// CheckFenced turns an error seen outside Commit (a failed produce, a
// fatal poll error) into a classified *Error.
func (s *Session) CheckFenced(ctx context.Context, op string, err error) *Error {
	if s.fencedByNewer(ctx, err) {
		return &Error{ClassFenced, op, err}
	}
	return classifyProduceErr(op, err)
}

// fencedByNewer tells a newer holder of our identity (stop) from other
// fencing (timeouts, rebalance races: rebuild and go on). The group is the
// judge: a static member with our instance ID but another member ID has
// replaced us, unless its incarnation is older than ours.
func (s *Session) fencedByNewer(ctx context.Context, err error) bool {
	if !isFencing(err) {
		return false // FENCED_INSTANCE_ID is fencing
	}
	ourMember, _ := s.gts.Client().GroupMetadata()
	return s.endFenced(ctx, ourMember, err)
}

// holder is what the group says about who holds our instance ID.
type holder int

const (
	holderUnknown holder = iota // nobody else, or the group could not be asked
	holderNewer                 // another member ID, not known to be older: we were replaced
	holderOlder                 // an older process that rejoined after we were expelled
)

// otherHolder asks the group who holds our instance ID. A holder with an
// older incarnation than ours is a zombie that came back while we were
// expelled (finding 8): we rejoin, static membership replaces its member,
// and its next commit or heartbeat finds it fenced. Any other holder under
// a member ID other than ourMember (known, non-empty) is newer. Kafka
// reports member metadata, and so incarnations, only while the group is
// Stable: during a rebalance the group is asked again until it settles,
// for up to 10 s, after which an unreadable holder counts as newer.
func (s *Session) otherHolder(ctx context.Context, ourMember string) holder {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	// Raw DescribeGroups: kadm parses the metadata and drops the trailer.
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{s.cfg.Group}
	for {
		resp, err := req.RequestWith(ctx, s.gts.Client())
		if err != nil {
			return holderUnknown
		}
		h, settled := s.judgeHolder(resp, ourMember)
		if settled {
			return h
		}
		select {
		case <-ctx.Done():
			return h
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// judgeHolder reads otherHolder's answer from a DescribeGroups response.
// It is not settled when another member holds our instance ID but the
// group, rebalancing, does not report that member's metadata.
func (s *Session) judgeHolder(resp *kmsg.DescribeGroupsResponse, ourMember string) (h holder, settled bool) {
	for _, g := range resp.Groups {
		if g.ErrorCode != 0 {
			continue
		}
		for _, m := range g.Members {
			if m.InstanceID == nil || *m.InstanceID != s.cfg.InstanceID {
				continue
			}
			switch {
			case !holderIsNewer(s.cfg.Incarnation, m.ProtocolMetadata):
				return holderOlder, true
			case ourMember != "" && m.MemberID != ourMember:
				return holderNewer, g.State == "Stable" || len(m.ProtocolMetadata) > 0
			}
		}
	}
	return holderUnknown, true
}

// Close closes the client. A static member does not leave the group on
// close: a restart with the same instance ID reclaims its partitions.
func (s *Session) Close() { s.gts.CloseAllowingRebalance() }
