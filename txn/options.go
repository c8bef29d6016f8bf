package txn

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/txncore"
)

// ID returns the transactional ID of an application instance:
// "<app>/<instanceID>". It is stable across restarts, so a restarted
// instance fences its predecessor. Grant it in the brokers' ACLs
// (TransactionalId resource) when they are enabled.
func ID(app, instanceID string) string { return txncore.ID(app, instanceID) }

// RingID is the transactional ID of producer k of an instance's ring: the
// instance's ID (see ID) for k = 0, so a ring of one is the layout of a
// single producer, and ID(app, instanceID)+"#k" above. Grant them all in
// the brokers' ACLs (a TransactionalId prefix ACL on ID(app, instanceID)).
func RingID(app, instanceID string, k int) string { return txncore.RingID(app, instanceID, k) }

// MaxPipeline bounds Options.Pipeline. Session.Claim also fences the ring
// IDs above a Session's own up to this bound, which a predecessor with a
// larger ring may have left with open transactions.
const MaxPipeline = txncore.MaxPipeline

// GroupProtocol is the consumer group protocol, the Java client's
// group.protocol.
type GroupProtocol = txncore.GroupProtocol

const (
	// GroupProtocolClassic is the client-driven JoinGroup/SyncGroup
	// protocol (cooperative-sticky assignment). Any Kafka version
	// onceflow supports.
	GroupProtocolClassic = txncore.GroupProtocolClassic
	// GroupProtocolConsumer is KIP-848's protocol: the broker assigns
	// partitions incrementally and members that keep their partitions
	// never stop for a rebalance. Kafka 4.0+ with the consumer protocol
	// enabled; franz-go recommends 4.3+. Static membership changes
	// meaning: the first holder of an instance ID keeps it until it
	// leaves or its session expires, so a replacement started after a
	// crash waits out the broker's group.consumer.session.timeout.ms.
	// Ordering the processes that wait for one instance ID (an older
	// holder yielding to a newer process) is package processor's work,
	// not a Session's.
	GroupProtocolConsumer = txncore.GroupProtocolConsumer
)

// Options describes a transactional group session. Brokers, Group,
// InstanceID and Topics are required; zero durations take the defaults
// given on each field (the processor's defaults, see package processor).
type Options struct {
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
	// this process was expelled (not fenced: rebuild and rejoin). A
	// member with the same incarnation counts as this process's own (an
	// earlier Session's), so processes must not share one. 0: unknown,
	// any other member with our instance ID counts as newer.
	Incarnation int64

	// Pipeline is how many transactional producers the Session runs:
	// while one transaction ends (its offset commit, EndTxn and the
	// markers) the next fills on the next producer. 1 to MaxPipeline;
	// default 1. Producer k > 0 has the transactional ID
	// ID(Group, InstanceID)+"#k" (see RingID).
	Pipeline int

	// ClientOpts go to every client the Session opens, after its own:
	// TLS, SASL, logging, hooks. They may override the options the
	// session sets; the consumer group, transactional IDs and isolation
	// level must stay as they are. Group callbacks go in OnRevoked and
	// OnLost, not here.
	ClientOpts []kgo.Opt
	// ConsumerOpts go to the group member's client only, after
	// ClientOpts (fetch sizes, kgo.OnOffsetsFetched, hooks).
	ConsumerOpts []kgo.Opt
	// ProducerOpts go to the ring's producers only, after ClientOpts
	// (partitioners, linger, batch sizes).
	ProducerOpts []kgo.Opt
	// OnRevoked and OnLost are the group member's callbacks
	// (kgo.OnPartitionsRevoked, kgo.OnPartitionsLost), called after the
	// Session forgot where a rewind takes the partitions given up (see
	// Session.AllowRebalance for what an open transaction must do).
	// Without OnLost, losses go to OnRevoked.
	OnRevoked, OnLost func(context.Context, *kgo.Client, map[string][]int32)
}

// EnsureDefaults fills in zero fields with their defaults and returns o.
func (o *Options) EnsureDefaults() *Options {
	c := txncore.Options(*o)
	*o = Options(*c.EnsureDefaults())
	return o
}

// Validate reports whether NewSession accepts o, with an error matching
// ErrInvalidOptions (and no Class) if it does not. Zero fields count as
// their defaults; o is not changed.
func (o *Options) Validate() error {
	c := txncore.Options(*o)
	return c.Validate()
}
