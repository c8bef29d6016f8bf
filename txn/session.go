package txn

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ID returns the transactional ID of an application instance:
// "<app>/<instanceID>". It is stable across restarts, so a restarted
// instance fences its predecessor. Grant it in the brokers' ACLs
// (TransactionalId resource) when they are enabled.
func ID(app, instanceID string) string { return app + "/" + instanceID }

// Config describes a transactional group session. Brokers, Group,
// InstanceID and Topics are required; zero durations take the defaults
// given on each field (the processor's defaults, see package processor).
type Config struct {
	// Brokers are the seed brokers: bootstrap.servers.
	Brokers []string
	// Group is the application: the consumer group (group.id) and the
	// prefix of the transactional ID (see ID).
	Group string
	// InstanceID is stable per instance (a pod name, say) and unique
	// among live instances: the static member ID (group.instance.id) and,
	// with Group, the transactional ID.
	InstanceID string
	// Topics are the input topics, consumed read_committed.
	Topics []string

	// TransactionTimeout is transaction.timeout.ms. Default 10s, as
	// Kafka Streams sets it under exactly-once.
	TransactionTimeout time.Duration
	// SessionTimeout is the group's session.timeout.ms. Default 45s.
	SessionTimeout time.Duration
	// RebalanceTimeout is the group rebalance timeout, the role of the
	// Java client's max.poll.interval.ms. Default 60s.
	RebalanceTimeout time.Duration

	// GroupProtocol is the group protocol: GroupProtocolClassic (the
	// default, "") or GroupProtocolConsumer (KIP-848). Under the consumer
	// protocol the broker sets the session timeout and heartbeat interval
	// (group.consumer.session.timeout.ms, group.consumer.heartbeat.interval.ms,
	// or the group's consumer.session.timeout.ms): SessionTimeout is not
	// sent, and Incarnation is not needed.
	GroupProtocol GroupProtocol

	// Incarnation identifies this process among processes with the same
	// instance ID: its start time (time.Now().UnixNano() once, at
	// start-up), the same for every Session the process builds. The
	// JoinGroup metadata carries it unless ClientOpts set kgo.Balancers,
	// so that a process can tell a newer holder of its instance ID (it
	// was replaced: ClassFenced) from an older one that came back after
	// this process was expelled (not fenced: rebuild and rejoin). 0:
	// unknown, any other member with our instance ID counts as newer.
	Incarnation int64

	// ClientOpts are appended last: callbacks, TLS, SASL, logging. They
	// may override the options the session sets; the consumer group,
	// transactional ID and isolation level must stay as they are.
	ClientOpts []kgo.Opt
}

// Defaults of Config's durations.
const (
	defaultTransactionTimeout = 10 * time.Second
	defaultSessionTimeout     = 45 * time.Second
	defaultRebalanceTimeout   = 60 * time.Second
)

// withDefaults returns c with its zero durations defaulted.
func (c Config) withDefaults() Config {
	if c.TransactionTimeout == 0 {
		c.TransactionTimeout = defaultTransactionTimeout
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = defaultSessionTimeout
	}
	if c.RebalanceTimeout == 0 {
		c.RebalanceTimeout = defaultRebalanceTimeout
	}
	return c
}

func (c Config) validate() error {
	switch {
	case len(c.Brokers) == 0:
		return fmt.Errorf("%w: Brokers: at least one seed broker is required", ErrInvalidConfig)
	case c.Group == "":
		return fmt.Errorf("%w: Group is required", ErrInvalidConfig)
	case c.InstanceID == "":
		return fmt.Errorf("%w: InstanceID is required", ErrInvalidConfig)
	case len(c.Topics) == 0:
		return fmt.Errorf("%w: Topics: at least one input topic is required", ErrInvalidConfig)
	case c.TransactionTimeout < 0 || c.SessionTimeout < 0 || c.RebalanceTimeout < 0:
		return fmt.Errorf("%w: timeouts must not be negative", ErrInvalidConfig)
	case !c.GroupProtocol.valid():
		return fmt.Errorf("%w: GroupProtocol %q: want %q or %q", ErrInvalidConfig, c.GroupProtocol, GroupProtocolClassic, GroupProtocolConsumer)
	}
	return nil
}

// Session is one transactional client lifetime: a franz-go
// GroupTransactSession configured for exactly-once (read_committed,
// KIP-447 offset commits, static membership, rebalances blocked while the
// loop works). After an error of class ClassReset, ClassFenced or
// ClassOutcomeUnknown it must be closed and, if the caller goes on,
// replaced by a new Session with the same Config. A Session is used by one
// goroutine, except that Produce may be called from several between Begin
// and Commit.
type Session struct {
	cfg     Config
	gts     *kgo.GroupTransactSession
	inTxn   bool
	member  string // group member ID when the open transaction began
	claimed bool   // see Claim
	// joined is done once the client consumes its topics, which makes
	// franz-go join the group. Under the consumer protocol that waits for
	// Claim or the first Poll (see join).
	joined sync.Once
}

// NewSession builds the client. Under the classic protocol it joins the
// group as soon as it has the topics' metadata; under the consumer
// protocol at Claim or the first Poll, whichever comes first. An invalid
// cfg fails with an error matching ErrInvalidConfig.
func NewSession(cfg Config) (*Session, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ConsumerGroup(cfg.Group),
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
		// The Java client's fetch.max.wait.ms (default 500ms). A partition
		// resumed after backpressure waits at most this for a fetch already
		// in flight to its broker, which does not name it: when the
		// broker's other partitions have nothing new (at the end of a
		// backlog, or beside a hot partition), the broker holds that fetch
		// for all of it. At 500ms such waits took up to 0.5s of a 2.5s
		// embedded 1M-record run; 100ms costs an idle consumer ten empty
		// fetches a second per broker.
		kgo.FetchMaxWait(100 * time.Millisecond),
		// franz-go retries a produce refused with a retriable error
		// (CONCURRENT_TRANSACTIONS while the coordinator ends the last
		// transaction) only after a metadata refresh, at most one per
		// min age: its default of 5s held a commit up for seconds. As
		// the Java client's retry.backoff.ms.
		kgo.MetadataMinAge(100 * time.Millisecond),
		// A transaction's first produce right after the previous one
		// ended is refused with CONCURRENT_TRANSACTIONS until the
		// coordinator has written the markers: a millisecond or two on
		// one broker. franz-go's default backoff of 20ms (as the Java
		// client's) added 20ms to every transaction's latency.
		kgo.ConcurrentTransactionsBackoff(2 * time.Millisecond),
	}
	opts = append(opts, cfg.groupOpts()...)
	if cfg.GroupProtocol != GroupProtocolConsumer {
		opts = append(opts, kgo.ConsumeTopics(cfg.Topics...))
	}
	gts, err := kgo.NewGroupTransactSession(append(opts, cfg.ClientOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("txn: building client: %w", err)
	}
	return &Session{cfg: cfg, gts: gts}, nil
}

// join gives a consumer-protocol client its topics, and so its group
// membership. franz-go joins as soon as the client's metadata names the
// topics, before any poll; a client built with them would hold the
// instance ID while Claim waits for an unreachable transaction
// coordinator, and, with rebalances blocked until the first poll, stop
// heartbeating until the group expelled it (a KIP-848 cluster soak,
// w90#176: a replacement expelled that way lost the ID to the zombie it
// replaced).
func (s *Session) join() {
	s.joined.Do(func() {
		if s.cfg.GroupProtocol == GroupProtocolConsumer {
			s.gts.Client().AddConsumeTopics(s.cfg.Topics...)
		}
	})
}

// Client is the underlying client, for pausing and resuming partitions,
// flushing (see FlushFailed), admin requests and metadata. Do not use it to
// begin or end transactions, commit offsets or produce outside Produce.
func (s *Session) Client() *kgo.Client { return s.gts.Client() }

// Poll fetches up to maxRecords records (maxRecords <= 0: any number),
// waiting until some arrive or ctx is done. Rebalances are blocked from
// Poll until AllowRebalance, so offsets are committed while the generation
// that fetched them is still current: call AllowRebalance after every
// Poll, once the records it returned are committed or aborted. A fatal
// fetch error (see kgo.Fetches.EachError) goes through CheckFenced.
func (s *Session) Poll(ctx context.Context, maxRecords int) kgo.Fetches {
	s.join()
	return s.gts.PollRecords(ctx, maxRecords)
}

// AllowRebalance lets a pending rebalance run; call it after Commit or
// Abort (or after a Poll that returned nothing to process).
func (s *Session) AllowRebalance() { s.gts.AllowRebalance() }

// InTxn reports whether a transaction is open.
func (s *Session) InTxn() bool { return s.inTxn }

// Begin opens a transaction if none is open. Call it before Produce. The
// Session's first transaction initializes its producer ID
// (InitProducerID), which bumps the epoch of the transactional ID: a
// predecessor's open transaction is aborted and the predecessor fenced.
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

// FlushFailed classifies the error of a caller's own flush of the open
// transaction's records (Client().Flush, with a deadline of the caller's
// choosing, before Commit; nothing was committed): ClassFenced if it timed
// out or was fenced while a newer process holds our instance ID, else
// ClassReset. Commit flushes too: callers that do not flush first do not
// need it.
func (s *Session) FlushFailed(ctx context.Context, err error) *Error {
	if s.endFenced(ctx, s.member, err) {
		return &Error{ClassFenced, "flush", err}
	}
	return &Error{ClassReset, "flush", err}
}

// Produce sends r in the open transaction; promise (which may be nil)
// gets its result. A failed record dooms the transaction: Abort it, and
// pass the error to CheckFenced to learn whether to go on.
func (s *Session) Produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error)) {
	s.gts.Produce(ctx, r, promise)
}

// Commit flushes, commits the offsets after the records Poll returned
// (KIP-447: with the group's member ID, generation and instance ID) in the
// transaction and ends it. rewrite, if not nil, may change the offset
// commit before it is sent (the processor adds its metadata there); nil
// commits the polled offsets as they are. It returns (false, nil) when the
// transaction was aborted because the group rebalanced or the offset commit
// was refused for a retriable reason: the consumer is rewound to the last
// committed offsets, and the caller drops what it did since and goes on.
// Errors are a *Error: ClassFenced or ClassOutcomeUnknown.
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
// fatal poll error) into a classified *Error; op names what failed, as
// Error.Op. ClassAbortable: Abort and go on with this Session; other
// classes as on Error.
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
	if s.cfg.GroupProtocol == GroupProtocolConsumer {
		return s.otherHolder848(ctx, ourMember)
	}
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
