package txncore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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

// Options is txn.Options, which documents each field and its default; the
// two must stay field for field the same (txn converts one to the other).
type Options struct {
	Brokers    []string
	Group      string
	InstanceID string
	Topics     []string

	TransactionTimeout time.Duration
	SessionTimeout     time.Duration
	RebalanceTimeout   time.Duration

	GroupProtocol GroupProtocol
	Incarnation   int64
	Pipeline      int

	ClientOpts, ConsumerOpts, ProducerOpts []kgo.Opt
	OnRevoked, OnLost                      func(context.Context, *kgo.Client, map[string][]int32)
}

// Defaults of Options' durations.
const (
	defaultTransactionTimeout = 10 * time.Second
	defaultSessionTimeout     = 45 * time.Second
	defaultRebalanceTimeout   = 60 * time.Second
)

// EnsureDefaults fills in zero fields with their defaults and returns o.
func (o *Options) EnsureDefaults() *Options {
	if o.TransactionTimeout == 0 {
		o.TransactionTimeout = defaultTransactionTimeout
	}
	if o.SessionTimeout == 0 {
		o.SessionTimeout = defaultSessionTimeout
	}
	if o.RebalanceTimeout == 0 {
		o.RebalanceTimeout = defaultRebalanceTimeout
	}
	if o.Pipeline == 0 {
		o.Pipeline = 1
	}
	return o
}

// Validate reports whether NewSession accepts o, with an error matching
// ErrInvalidOptions (and no Class) if it does not. Zero fields count as
// their defaults; o is not changed.
func (o *Options) Validate() error {
	c := *o
	c.EnsureDefaults()
	switch {
	case len(c.Brokers) == 0:
		return fmt.Errorf("%w: Brokers: at least one seed broker is required", ErrInvalidOptions)
	case c.Group == "":
		return fmt.Errorf("%w: Group is required", ErrInvalidOptions)
	case c.InstanceID == "":
		return fmt.Errorf("%w: InstanceID is required", ErrInvalidOptions)
	case len(c.Topics) == 0:
		return fmt.Errorf("%w: Topics: at least one input topic is required", ErrInvalidOptions)
	case c.TransactionTimeout < 0 || c.SessionTimeout < 0 || c.RebalanceTimeout < 0:
		return fmt.Errorf("%w: timeouts must not be negative", ErrInvalidOptions)
	case c.Pipeline < 0 || c.Pipeline > MaxPipeline:
		return fmt.Errorf("%w: Pipeline %d: want 1 to %d", ErrInvalidOptions, c.Pipeline, MaxPipeline)
	case !c.GroupProtocol.valid():
		return fmt.Errorf("%w: GroupProtocol %q: want %q or %q", ErrInvalidOptions, c.GroupProtocol, GroupProtocolClassic, GroupProtocolConsumer)
	}
	return nil
}

// Session is one transactional client lifetime: a group member that
// consumes read_committed (static membership, rebalances blocked while the
// loop works) and a ring of transactional producers (Options.Pipeline) whose
// transactions commit the member's offsets with its group metadata
// (KIP-447), so that while one transaction ends the next can fill on the
// next producer. After an error of class ClassReset, ClassFenced or
// ClassOutcomeUnknown it must be closed and, if the caller goes on,
// replaced by a new Session with the same Options. Poll, AllowRebalance and
// Begin are called from one goroutine; a Txn may be produced to and ended
// from another.
type Session struct {
	cfg     Options
	cl      *kgo.Client // the group member
	ring    []*producer
	next    int  // the ring index the next Begin takes
	claimed bool // see Claim
	// joined is done once the client consumes its topics, which makes
	// franz-go join the group. Under the consumer protocol that waits for
	// Claim or the first Poll (see join).
	joined sync.Once

	offsets offsetClients // sends offset commits (offsets.go)

	mu  sync.Mutex
	pos positions // where a rewind goes (offsets.go)
}

// NewSession builds the clients. Under the classic protocol the member
// joins the group as soon as it has the topics' metadata; under the
// consumer protocol at Claim or the first Poll, whichever comes first. An
// invalid cfg fails with an error matching ErrInvalidOptions.
func NewSession(cfg Options) (*Session, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.EnsureDefaults()
	s := &Session{cfg: cfg}
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ConsumerGroup(cfg.Group),
		kgo.InstanceID(cfg.InstanceID),
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
	}
	opts = append(opts, cfg.groupOpts()...)
	if cfg.GroupProtocol != GroupProtocolConsumer {
		opts = append(opts, kgo.ConsumeTopics(cfg.Topics...))
	}
	opts = append(opts, cfg.ClientOpts...)
	opts = append(opts, cfg.ConsumerOpts...)
	// Last, so that they win: the Session's own bookkeeping runs before
	// the caller's callbacks.
	opts = append(opts, kgo.OnPartitionsRevoked(s.onRevoked), kgo.OnPartitionsLost(s.onLost))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("txn: building the consumer: %w", err)
	}
	s.cl = cl
	if err := s.buildRing(); err != nil {
		cl.Close()
		return nil, err
	}
	s.offsets.cfg = &s.cfg
	return s, nil
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
			s.cl.AddConsumeTopics(s.cfg.Topics...)
		}
	})
}

// Client is the group member's client, for pausing and resuming
// partitions, admin requests and metadata. It produces nothing: records go
// through a Txn. Do not use it to commit offsets.
func (s *Session) Client() *kgo.Client { return s.cl }

// Poll fetches up to maxRecords records (maxRecords <= 0: any number),
// waiting until some arrive or ctx is done. Rebalances are blocked from
// Poll until AllowRebalance, so offsets are committed while the generation
// that fetched them is still current: call AllowRebalance after every
// Poll, once the records it returned are committed or aborted. A fatal
// fetch error (see kgo.Fetches.EachError) goes through CheckFenced.
func (s *Session) Poll(ctx context.Context, maxRecords int) kgo.Fetches {
	s.join()
	fs := s.cl.PollRecords(ctx, maxRecords)
	s.mu.Lock()
	s.pos.polled(fs)
	s.mu.Unlock()
	return fs
}

// AllowRebalance lets a pending rebalance run; call it after a commit or
// abort (or after a Poll that returned nothing to process). A transaction
// still open must not commit work of partitions a revoke or loss took
// (its offsets would not go with it): abort it, or commit only what the
// member still owns. A member that is no longer current cannot commit at
// all (KIP-447).
func (s *Session) AllowRebalance() { s.cl.AllowRebalance() }

// Pipeline is the number of producers in the ring: how many transactions
// can be open at once (one filling while others end).
func (s *Session) Pipeline() int { return len(s.ring) }

// onRevoked and onLost forget where a rewind takes the partitions the
// member gave up, then pass the news on.
func (s *Session) onRevoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	s.lose(revoked)
	if s.cfg.OnRevoked != nil {
		s.cfg.OnRevoked(ctx, cl, revoked)
	}
}

func (s *Session) onLost(ctx context.Context, cl *kgo.Client, lost map[string][]int32) {
	s.lose(lost)
	switch {
	case s.cfg.OnLost != nil:
		s.cfg.OnLost(ctx, cl, lost)
	case s.cfg.OnRevoked != nil:
		s.cfg.OnRevoked(ctx, cl, lost)
	}
}

func (s *Session) lose(parts map[string][]int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pos.forget(parts)
}

// FlushFailed classifies the error of a caller's own flush of a
// transaction's records (Txn.Flush, with a deadline of the caller's
// choosing, before Commit; nothing was committed): ClassFenced if it timed
// out or was fenced while a newer process holds our instance ID, else
// ClassReset. Commit flushes too: callers that do not flush first do not
// need it.
func (t *Txn) FlushFailed(ctx context.Context, err error) *Error {
	if fenced, why := t.s.endFenced(ctx, t.member, err); fenced {
		return fencedError("flush", err, why)
	}
	return &Error{ClassReset, "flush", err}
}

// endFenced judges an End error. Besides fencing errors it asks the group
// after a timeout: a zombie (stopped past its session while a newer
// process took its instance ID) wakes with End waiting for a heartbeat
// that its blocked group loop never sends, so its End times out instead of
// failing with FENCED_INSTANCE_ID. Rebuilding would then rejoin under the
// instance ID and fence the newer process in turn (seen in the soak on
// Kafka 4.2.0: the replacement exited fenced, the zombie ran on). why is
// what the group said of the holder, when it was asked.
func (s *Session) endFenced(ctx context.Context, member string, err error) (fenced bool, why string) {
	if !isFencing(err) && !errors.Is(err, context.DeadlineExceeded) {
		return false, "" // FENCED_INSTANCE_ID is fencing
	}
	h, why := s.otherHolder(ctx, member)
	if errors.Is(err, kerr.FencedInstanceID) {
		return instanceFenced(h), why
	}
	return h == holderNewer, why
}

// fencedError is the ClassFenced error of op's err, with what the group
// said of the holder of our instance ID: a process that stops as fenced
// says why it believed another one took over.
func fencedError(op string, err error, why string) *Error {
	return &Error{ClassFenced, op, fmt.Errorf("%w (the group: %s)", err, why)}
}

// instanceFenced judges FENCED_INSTANCE_ID, the group's word that another
// member holds our instance ID, by that holder: a newer process, or one
// the group could not name (stop); an older zombie, which static
// membership replaces when we rejoin; or our own client's member now,
// which rejoined after this one was expelled (rebuild: a classic soak's
// w145#289 stopped fenced with nobody else holding the ID).
func instanceFenced(h holder) bool { return h != holderOlder && h != holderOurs }

// CheckFenced turns an error seen outside Commit (a failed produce, a
// fatal poll error) into a classified *Error; op names what failed, as
// Error.Op. ClassAbortable: Abort and go on with this Session; other
// classes as on Error.
func (s *Session) CheckFenced(ctx context.Context, op string, err error) *Error {
	if fenced, why := s.fencedByNewer(ctx, err); fenced {
		return fencedError(op, err, why)
	}
	return classifyProduceErr(op, err)
}

// fencedByNewer tells a newer holder of our identity (stop) from other
// fencing (timeouts, rebalance races: rebuild and go on). The group is the
// judge: a static member with our instance ID but another member ID has
// replaced us, unless its incarnation is older than ours.
func (s *Session) fencedByNewer(ctx context.Context, err error) (fenced bool, why string) {
	if !isFencing(err) {
		return false, "" // FENCED_INSTANCE_ID is fencing
	}
	ourMember, _ := s.cl.GroupMetadata()
	return s.endFenced(ctx, ourMember, err)
}

// holder is what the group says about who holds our instance ID.
type holder int

const (
	holderUnknown holder = iota // nobody, or the group could not be asked
	holderNewer                 // another member ID, not known to be older: we were replaced
	holderOlder                 // an older process that rejoined after we were expelled
	holderOurs                  // only a member of ours: this process's client now, or before
)

// otherHolder asks the group who holds our instance ID. A holder with an
// older incarnation than ours is a zombie that came back while we were
// expelled (finding 8): we rejoin, static membership replaces its member,
// and its next commit or heartbeat finds it fenced. Any other holder under
// a member ID other than ourMember (known, non-empty) is newer. Kafka
// reports member metadata, and so incarnations, only while the group is
// Stable: during a rebalance, or while its coordinator loads or moves, the
// group is asked again until it settles, for up to 10 s, after which an
// unreadable holder counts as newer.
//
// The member our client holds now is ours too: a member that was expelled
// (stopped past its session) rejoins under a new member ID when it wakes,
// and its end, begun under the old one, meets FENCED_INSTANCE_ID from its
// own rejoin. Taken for a newer process, it stopped with nobody else
// holding the ID (7 times in a 20-minute soak of 12 instances, issue 42).
// So is any member with this process's incarnation: an earlier Session's,
// which the group may name again after a lost write (holderByIncarnation).
func (s *Session) otherHolder(ctx context.Context, ourMember string) (holder, string) {
	current := func() string { m, _ := s.cl.GroupMetadata(); return m }
	return awaitHolder(ctx, ourMember, current, s.askHolder)
}

// awaitHolder is otherHolder's loop: ask until the answer settles or 10 s
// pass. The client's member is read before every question, since the
// client may rejoin while we wait: read once, before the wait, its own
// rejoin looked like a newer process (w106#180 in a classic soak). It
// returns the last answer and what the group said in it.
func awaitHolder(ctx context.Context, ourMember string, current func() string,
	ask func(ctx context.Context, ours []string) (holder, bool, string),
) (holder, string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	ours := []string{ourMember}
	for {
		if ourMember != "" { // unknown stays unknown: nothing is judged
			if m := current(); !slices.Contains(ours, m) {
				ours = append(ours, m)
			}
		}
		h, settled, why := ask(ctx, ours)
		why = fmt.Sprintf("%s; our members %q", why, ours)
		if settled {
			return h, why
		}
		select {
		case <-ctx.Done():
			return h, why + "; not settled in 10s"
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// askHolder asks the group once; not settled: ask again. why says what
// the group answered.
func (s *Session) askHolder(ctx context.Context, ours []string) (h holder, settled bool, why string) {
	if s.cfg.GroupProtocol == GroupProtocolConsumer {
		h, _, err := holder848(ctx, s.cl, s.cfg.Group, s.cfg.InstanceID)
		if err != nil {
			return holderUnknown, !askAgain(err), "not answered: " + err.Error()
		}
		return judgeHolder848(h, ours...), true, fmt.Sprintf("holder %q", h)
	}
	// Raw DescribeGroups: kadm parses the metadata and drops the trailer.
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{s.cfg.Group}
	resp, err := req.RequestWith(ctx, s.cl)
	if err != nil {
		return holderUnknown, !askAgain(err), "not answered: " + err.Error()
	}
	h, settled = s.judgeHolder(resp, ours...)
	return h, settled, s.describeHolders(resp)
}

// describeHolders says which members of a DescribeGroups answer hold our
// instance ID, with their incarnations against ours.
func (s *Session) describeHolders(resp *kmsg.DescribeGroupsResponse) string {
	var b strings.Builder
	for _, g := range resp.Groups {
		if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
			fmt.Fprintf(&b, "group %s: %v", g.Group, err)
			continue
		}
		fmt.Fprintf(&b, "group %s, holders:", g.State)
		none := true
		for _, m := range g.Members {
			if s.holdsOurID(&m) {
				none = false
				fmt.Fprintf(&b, " %q (incarnation %d against ours %d)", m.MemberID, parseIncarnation(m.ProtocolMetadata), s.cfg.Incarnation)
			}
		}
		if none {
			b.WriteString(" none")
		}
	}
	return b.String()
}

// holdsOurID reports whether a group member holds our instance ID.
func (s *Session) holdsOurID(m *kmsg.DescribeGroupsResponseGroupMember) bool {
	return m.InstanceID != nil && *m.InstanceID == s.cfg.InstanceID
}

// askAgain: the group could not answer now but may soon (its coordinator
// loads or moves, a broker is down). Such an answer is no holder: taken as
// one nobody can name, it stopped the newer of two processes while the
// older ran on (w195#339 in a classic soak, COORDINATOR_LOAD_IN_PROGRESS).
func askAgain(err error) bool {
	var ke *kerr.Error
	return !errors.As(err, &ke) || ke.Retriable
}

// judgeHolder reads otherHolder's answer from a DescribeGroups response;
// ours are the member IDs this process held under the Session (the one
// its transaction began under, and its client's now); a member with this
// process's incarnation is ours as well. It is not settled when another
// member holds our instance ID but the group, rebalancing, does not report
// that member's metadata, or when the group's coordinator cannot answer
// yet.
func (s *Session) judgeHolder(resp *kmsg.DescribeGroupsResponse, ours ...string) (h holder, settled bool) {
	ours = slices.DeleteFunc(slices.Clone(ours), func(m string) bool { return m == "" })
	sawOurs := false
	for _, g := range resp.Groups {
		if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
			if askAgain(err) {
				return holderUnknown, false
			}
			continue
		}
		for _, m := range g.Members {
			if !s.holdsOurID(&m) {
				continue
			}
			byIncarnation := holderByIncarnation(s.cfg.Incarnation, m.ProtocolMetadata)
			if slices.Contains(ours, m.MemberID) || byIncarnation == holderOurs {
				sawOurs = true
				continue
			}
			switch {
			case byIncarnation == holderOlder:
				return holderOlder, true
			case len(ours) > 0:
				return holderNewer, g.State == "Stable" || len(m.ProtocolMetadata) > 0
			}
		}
	}
	if sawOurs {
		return holderOurs, true
	}
	return holderUnknown, true
}

// leaveStatic848 sends, under the consumer protocol, the static member's
// temporary leave that Kafka accepts. franz-go v1.22's own (member epoch
// -2, a temporary leave) leaves the instance ID out, which Kafka refuses
// (INVALID_REQUEST), and the member then held the ID until its session
// expired, keeping a replacement waiting (TestStaticLeave848). Sent after
// the member's client closed, so that no heartbeat of its rejoins; an
// error (the member already left, the brokers are gone) changes nothing.
func (s *Session) leaveStatic848(member string, epoch int32) {
	if s.cfg.GroupProtocol != GroupProtocolConsumer || member == "" || epoch <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch, req.InstanceID = s.cfg.Group, member, leftStaticEpoch, &s.cfg.InstanceID
	_, _ = req.RequestWith(ctx, s.ring[0].cl)
}

// leftEpoch is the member epoch of a KIP-848 member's permanent leave
// (Kafka's LEAVE_GROUP_MEMBER_EPOCH).
const leftEpoch = -1

// leave removes the closed member from the group for good, naming its
// member and instance ID, so that the group hands its partitions to the
// other members now. Under the classic protocol a LeaveGroup (v3+,
// KIP-345's batch form), as Kafka Streams' close with
// CloseOptions.leaveGroup(true) (KIP-812) and the Java consumer's close
// with GroupMembershipOperation.LEAVE_GROUP (KIP-1092) send it; under the
// consumer protocol a ConsumerGroupHeartbeat at member epoch -1, which
// Kafka takes from a static member too (its -2 only parks the member). The
// member ID must be the holder's: Kafka answers FENCED_INSTANCE_ID, and
// removes nobody, when a newer process holds the instance ID. A member the
// group no longer knows (it expired, or franz-go left already) has left.
func (s *Session) leave(ctx context.Context, member string, epoch int32) error {
	if member == "" || (s.cfg.GroupProtocol == GroupProtocolConsumer && epoch <= 0) {
		return nil // never joined, or lost its membership: nothing to leave
	}
	cl := s.ring[0].cl
	var err error
	if s.cfg.GroupProtocol == GroupProtocolConsumer {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Group, req.MemberID, req.MemberEpoch, req.InstanceID = s.cfg.Group, member, leftEpoch, &s.cfg.InstanceID
		var resp *kmsg.ConsumerGroupHeartbeatResponse
		if resp, err = req.RequestWith(ctx, cl); err == nil {
			err = errorWithMessage(resp.ErrorCode, resp.ErrorMessage)
		}
	} else {
		req := kmsg.NewPtrLeaveGroupRequest()
		req.Group = s.cfg.Group
		req.MemberID = member // what versions before 3 send, without the instance ID
		m := kmsg.NewLeaveGroupRequestMember()
		m.MemberID, m.InstanceID = member, &s.cfg.InstanceID
		m.Reason = kmsg.StringPtr("onceflow: leaving the group on a clean stop (scale-down)")
		req.Members = append(req.Members, m)
		var resp *kmsg.LeaveGroupResponse
		if resp, err = req.RequestWith(ctx, cl); err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
			for _, m := range resp.Members {
				if err == nil {
					err = kerr.ErrorForCode(m.ErrorCode)
				}
			}
		}
	}
	if errors.Is(err, kerr.UnknownMemberID) || errors.Is(err, kerr.GroupIDNotFound) {
		return nil // gone already
	}
	if err != nil {
		return fmt.Errorf("txn: leaving group %s as member %s (instance %s): %w", s.cfg.Group, member, s.cfg.InstanceID, err)
	}
	return nil
}

// errorWithMessage is kerr.ErrorForCode with the broker's message, if any.
func errorWithMessage(code int16, msg *string) error {
	err := kerr.ErrorForCode(code)
	if err != nil && msg != nil && *msg != "" {
		err = fmt.Errorf("%w: %s", err, *msg)
	}
	return err
}

// Close closes the clients. A static member does not leave the group on
// close: a restart with the same instance ID reclaims its partitions
// without a rebalance (under the consumer protocol the member leaves at
// epoch -2, which parks its partitions for such a restart until its
// session ends). For a stop after which the instance does not come back,
// use CloseAndLeave. Transactions still open (not being ended: end them
// first) are aborted, so that they do not hold their partitions' last
// stable offset until the transaction timeout; if the brokers cannot be
// reached, the next InitProducerID of their transactional IDs (a new
// Session's Claim) or the coordinator's timeout aborts them.
func (s *Session) Close() { _ = s.close(nil) }

// CloseAndLeave is Close for a stop after which this instance does not
// come back (a scale-down): after the group member's client closed and the
// open transactions were aborted, the member leaves the group for good,
// naming its instance ID, so that the group hands its partitions to the
// other members at once instead of keeping them for a restart until the
// session timeout. Call it only once the last transaction has committed
// (their next owners resume from the committed offsets), and never on the
// way to a new Session after an error: a process that rebuilds keeps its
// instance ID. ctx bounds the leave; its error (the brokers could not be
// reached, or a newer process holds the instance ID: FENCED_INSTANCE_ID)
// says the partitions wait for the session timeout after all. A member
// that never joined, or that the group already dropped, has nothing to
// leave: nil.
func (s *Session) CloseAndLeave(ctx context.Context) error {
	return s.close(ctx)
}

// close is Close, with a permanent leave if leaveCtx is not nil.
func (s *Session) close(leaveCtx context.Context) error {
	s.cl.CloseAllowingRebalance()
	// Read after the close: the member the client last held.
	member, epoch := s.cl.GroupMetadata()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, p := range s.ring {
		s.mu.Lock()
		open := p.busy
		s.mu.Unlock()
		if open && p.cl.AbortBufferedRecords(ctx) == nil {
			_ = p.cl.EndTransaction(ctx, kgo.TryAbort)
		}
	}
	// After the aborts: a transaction left open would hold the offsets
	// it commits unstable, and the next owner's offset fetch waits for
	// them.
	var err error
	if leaveCtx != nil {
		err = s.leave(leaveCtx, member, epoch)
	} else {
		s.leaveStatic848(member, epoch)
	}
	for _, p := range s.ring {
		p.cl.Close()
	}
	s.offsets.close()
	return err
}
