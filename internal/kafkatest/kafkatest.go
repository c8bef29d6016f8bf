package kafkatest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/onceflow/onceflow/internal/clientsec"
	"github.com/onceflow/onceflow/internal/readback"
)

// EnvBrokers names the environment variable that switches tests to real
// brokers.
const EnvBrokers = "KAFKA_BROKERS"

// Mode names the kind of cluster a test runs against.
type Mode string

const (
	// ModeFake is kfake with its current version table
	// (transaction.version=2, KIP-890 part 2: epoch bump on every EndTxn).
	ModeFake Mode = "kfake"
	// ModeFakeV39 is kfake pinned to Kafka 3.9 versions (before KIP-890 part 2).
	ModeFakeV39 Mode = "kfake-v3.9"
	// ModeReal is the brokers named by KAFKA_BROKERS.
	ModeReal Mode = "real"
)

// Cluster is a running test cluster.
type Cluster struct {
	Mode    Mode
	Brokers []string
	Admin   *kadm.Client
	// Fake is the embedded cluster, for fault injection; nil in ModeReal.
	Fake *kfake.Cluster
	// Security is how clients reach the cluster: TLS and SASL for a
	// Secured embedded cluster, or as the environment says for real
	// brokers (EnvSecurityPrefix); the zero value is PLAINTEXT.
	Security clientsec.Config
	// ClientOpts are the client options Security asks for: every
	// client the package opens gets them, and tests pass them to what
	// they build (processor.WithKgoOpts), so that a client that drops
	// them fails against a secured cluster.
	ClientOpts []kgo.Opt

	cl *kgo.Client // Admin's client
}

// Option configures New.
type Option func(*config)

type config struct {
	secured    bool
	preKIP890  bool
	fakeOpts   []kfake.Opt
	keepParked bool
}

// PreKIP890 pins an embedded cluster to Kafka 3.9 versions, before
// KIP-890 part 2. It has no effect against real brokers.
func PreKIP890() Option { return func(c *config) { c.preKIP890 = true } }

// KeepParkedStaticMembers leaves an embedded cluster's handling of KIP-848
// static leaves as it is (see expireParkedStaticMembers).
func KeepParkedStaticMembers() Option { return func(c *config) { c.keepParked = true } }

// FakeOpts passes options to an embedded cluster.
func FakeOpts(opts ...kfake.Opt) Option {
	return func(c *config) { c.fakeOpts = append(c.fakeOpts, opts...) }
}

// EnvGroupProtocol names the environment variable that runs the tests'
// processors under a group protocol: "classic" (unset: the default) or
// "consumer" (KIP-848).
const EnvGroupProtocol = "ONCEFLOW_GROUP_PROTOCOL"

// GroupProtocol returns the group protocol the tests run under (see
// EnvGroupProtocol); an unknown value panics, so that a typo cannot pass
// as a run of the other protocol.
// (A string: txn's own tests import this package.)
func GroupProtocol() string {
	switch p := os.Getenv(EnvGroupProtocol); p {
	case "", "classic":
		return "classic"
	case "consumer":
		return p
	default:
		panic(fmt.Sprintf("kafkatest: %s=%q: want classic or consumer", EnvGroupProtocol, p))
	}
}

// Consumer848 reports whether the tests run under the consumer protocol.
func Consumer848() bool { return GroupProtocol() == "consumer" }

// ProtocolIndependent skips t in the consumer-protocol pass
// (ONCEFLOW_GROUP_PROTOCOL=consumer): t drives the group protocol by hand,
// so what it checks does not depend on the protocol the suite runs under,
// and the classic pass has run it already.
func ProtocolIndependent(t testing.TB) {
	t.Helper()
	if Consumer848() {
		t.Skip("drives the group protocol by hand: runs in the classic pass only")
	}
}

// Real reports whether tests run against real brokers.
func Real() bool { return os.Getenv(EnvBrokers) != "" }

// New returns a cluster that lives as long as the test.
func New(t testing.TB, opts ...Option) *Cluster {
	t.Helper()
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	c := &Cluster{}
	if env := os.Getenv(EnvBrokers); env != "" {
		c.Mode = ModeReal
		c.Brokers = strings.Split(env, ",")
		c.Security = envSecurity()
	} else {
		fopts := []kfake.Opt{kfake.NumBrokers(3), kfake.GroupMinSessionTimeout(100 * time.Millisecond),
			// KIP-848 groups take these from the broker, not the
			// client: the tests' WithSessionTimeout(6s), and
			// heartbeats fast enough for quick reassignments (as
			// integration/kafka/broker.sh sets them).
			kfake.BrokerConfigs(map[string]string{
				"group.consumer.session.timeout.ms":    "6000",
				"group.consumer.heartbeat.interval.ms": "250",
			})}
		c.Mode = ModeFake
		if cfg.preKIP890 {
			c.Mode = ModeFakeV39
			fopts = append(fopts, kfake.MaxVersions(kversion.V3_9_0()))
		}
		if cfg.secured {
			sopts, sec := secureFake(t)
			fopts, c.Security = append(fopts, sopts...), sec
		}
		fake, err := kfake.NewCluster(append(fopts, cfg.fakeOpts...)...)
		if err != nil {
			t.Fatalf("kafkatest: starting embedded cluster: %v", err)
		}
		t.Cleanup(fake.Close)
		if Consumer848() && !cfg.keepParked {
			expireParkedStaticMembers(fake)
		}
		c.Fake = fake
		c.Brokers = fake.ListenAddrs()
	}
	c.ClientOpts = clientOpts(t, c.Security)
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Brokers...)}, c.ClientOpts...)...)
	if err != nil {
		t.Fatalf("kafkatest: admin client: %v", err)
	}
	t.Cleanup(cl.Close)
	c.cl = cl
	c.Admin = kadm.NewClient(cl)
	return c
}

// EachMode runs fn as a subtest per transaction protocol: twice on the
// embedded cluster (current and pre-KIP-890 versions, side by side), once
// on real brokers. On the embedded cluster the test runs in parallel with
// the package's other parallel tests (t.Parallel): call EachMode once, and
// first, in a test that shares nothing with others. opts go to New.
func EachMode(t *testing.T, fn func(t *testing.T, c *Cluster), opts ...Option) {
	t.Helper()
	if Real() {
		t.Run(string(ModeReal), func(t *testing.T) { fn(t, New(t, opts...)) })
		return
	}
	// Each test has embedded clusters of its own, and these tests mostly
	// wait (for sessions and transactions to time out): they run beside
	// one another (up to go test's -parallel), and on real brokers, which
	// they share and whose nodes some tests restart, one at a time.
	t.Parallel()
	if Consumer848() {
		// Kafka 3.9 has no KIP-848: the processor refuses to start
		// (TestGroupProtocolUnsupported).
		t.Run(string(ModeFake), func(t *testing.T) { fn(t, New(t, opts...)) })
		return
	}
	// The two embedded clusters run side by side too; EachMode returns
	// when both are done.
	var wg sync.WaitGroup
	wg.Go(func() { t.Run(string(ModeFake), func(t *testing.T) { fn(t, New(t, opts...)) }) })
	wg.Go(func() { t.Run(string(ModeFakeV39), func(t *testing.T) { fn(t, New(t, append(opts, PreKIP890())...)) }) })
	wg.Wait()
}

// expireParkedStaticMembers pins a kfake divergence. A static member that
// stops sends a KIP-848 heartbeat with epoch -2 (a temporary leave); Kafka
// keeps its partitions for the session timeout and then hands them on,
// kfake keeps them forever. Tests expect them back (a stopped instance's
// partitions go to the others), so on kfake the leave is made a full one
// (epoch -1): they move at once instead of after the session timeout.
func expireParkedStaticMembers(fake *kfake.Cluster) {
	fake.ControlKey(int16(kmsg.ConsumerGroupHeartbeat), func(req kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		if hb := req.(*kmsg.ConsumerGroupHeartbeatRequest); hb.MemberEpoch == -2 {
			hb.MemberEpoch = -1
		}
		return nil, nil, false
	})
}

var unsafeName = regexp.MustCompile(`[^a-zA-Z0-9._-]+`)

// Name returns a name unique to this test and call, usable for topics,
// groups and transactional IDs.
func Name(t testing.TB, suffix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	n := unsafeName.ReplaceAllString(t.Name(), "_")
	if len(n) > 80 {
		n = n[len(n)-80:]
	}
	return n + "-" + suffix + "-" + hex.EncodeToString(b[:])
}

// CreateTopic creates a uniquely named topic with the given partitions,
// deleted when the test ends. Its replication factor is the cluster's
// default.replication.factor: a fixed 1 would be below a production-shaped
// cluster's min.insync.replicas (integration/kafka/broker.sh with
// KAFKA_NODES=3: RF 3, min ISR 2), where every acks=all write to it fails.
func (c *Cluster) CreateTopic(t testing.TB, suffix string, partitions int32, configs map[string]*string) string {
	t.Helper()
	name := Name(t, suffix)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := c.Admin.CreateTopic(ctx, partitions, -1, configs, name)
	if err == nil {
		err = resp.Err
	}
	if err == nil {
		err = c.waitTopic(ctx, name, partitions)
	}
	if err != nil {
		t.Fatalf("kafkatest: creating topic %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = c.Admin.DeleteTopics(ctx, name)
	})
	return name
}

// WaitTopic waits until every broker knows a topic the test created itself
// (see waitTopic); CreateTopic already does.
func (c *Cluster) WaitTopic(t testing.TB, name string, partitions int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.waitTopic(ctx, name, partitions); err != nil {
		t.Fatalf("kafkatest: topic %s: %v", name, err)
	}
}

// waitTopic waits until every broker's metadata holds the topic with all
// its partitions led. CreateTopics returns once the controller has committed
// the topic; the brokers of a cluster apply it from the metadata log a moment
// later and until then leave it out of listings or answer for it with
// UNKNOWN_TOPIC_OR_PARTITION. A test's topics exist before the test starts,
// as an application's inputs exist before it does. (A single node, or
// kfake, has it at once.)
func (c *Cluster) waitTopic(ctx context.Context, name string, partitions int32) error {
	for {
		err := c.topicEverywhere(ctx, name, partitions)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for it in every broker's metadata: %w (last: %v)", ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// topicEverywhere asks every broker, not the cluster, for the topic's
// metadata.
func (c *Cluster) topicEverywhere(ctx context.Context, name string, partitions int32) error {
	brokers, err := c.Admin.ListBrokers(ctx)
	if err != nil {
		return err
	}
	for _, b := range brokers {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, c.cl.Broker(int(b.NodeID)))
		if err != nil {
			return fmt.Errorf("broker %d: %w", b.NodeID, err)
		}
		if len(resp.Topics) != 1 {
			return fmt.Errorf("broker %d: %d topics in the response", b.NodeID, len(resp.Topics))
		}
		if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
			return fmt.Errorf("broker %d: %w", b.NodeID, err)
		}
		if got := len(resp.Topics[0].Partitions); got != int(partitions) {
			return fmt.Errorf("broker %d: %d of %d partitions", b.NodeID, got, partitions)
		}
		for _, p := range resp.Topics[0].Partitions {
			if p.Leader < 0 {
				return fmt.Errorf("broker %d: partition %d has no leader", b.NodeID, p.Partition)
			}
		}
	}
	return nil
}

// Client returns a client of the cluster (with ClientOpts, then opts),
// closed when the test ends.
func (c *Cluster) Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append(append([]kgo.Opt{kgo.SeedBrokers(c.Brokers...)}, c.ClientOpts...), opts...)...)
	if err != nil {
		t.Fatalf("kafkatest: client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// AwaitStable waits until no transaction is open or completing on the
// topics: every partition's last stable offset has reached its end offset.
// A commit returns to the producer once the coordinator has logged it; its
// markers reach the partitions a moment later (on a cluster, once every
// in-sync replica has them), so a ReadCommitted right after a commit can stop
// short of it. Call it before a read that expects a just-committed
// transaction, when nothing is left open (it fails after 30 s otherwise).
func (c *Cluster) AwaitStable(t testing.TB, topics ...string) {
	t.Helper()
	if err := c.awaitStable(30*time.Second, topics...); err != nil {
		t.Fatalf("kafkatest: transactions still open on %v: %v", topics, err)
	}
}

// Settle is AwaitStable for reads after a run where a transaction may be
// left open on purpose (a crashed, never-fenced instance's): it waits at
// most within and then lets the read go ahead at the last stable offset.
func (c *Cluster) Settle(t testing.TB, within time.Duration, topics ...string) {
	t.Helper()
	if err := c.awaitStable(within, topics...); err != nil {
		t.Logf("kafkatest: reading with transactions still open after %v: %v", within, err)
	}
}

func (c *Cluster) awaitStable(within time.Duration, topics ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for {
		err := c.stable(ctx, topics...)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stable is nil when every partition's last stable offset is its end offset.
func (c *Cluster) stable(ctx context.Context, topics ...string) error {
	lso, err := c.Admin.ListCommittedOffsets(ctx, topics...)
	if err == nil {
		err = lso.Error()
	}
	if err != nil {
		return err
	}
	end, err := c.Admin.ListEndOffsets(ctx, topics...)
	if err == nil {
		err = end.Error()
	}
	if err != nil {
		return err
	}
	end.Each(func(o kadm.ListedOffset) {
		if l, ok := lso.Lookup(o.Topic, o.Partition); err == nil && (!ok || l.Offset < o.Offset) {
			err = fmt.Errorf("%s/%d: last stable offset %d, end %d", o.Topic, o.Partition, l.Offset, o.Offset)
		}
	})
	return err
}

// ReadCommitted returns every committed record of the topics, read as a
// read_committed consumer sees them.
func (c *Cluster) ReadCommitted(t testing.TB, topics ...string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rs, err := readback.ReadCommittedWith(ctx, c.Brokers, c.ClientOpts, topics...)
	if err != nil {
		t.Fatalf("kafkatest: %v", err)
	}
	return rs
}

// ConsumerGroupTimeouts sets a KIP-848 group's session timeout and
// heartbeat interval (the group configs consumer.session.timeout.ms and
// consumer.heartbeat.interval.ms): under the consumer protocol the broker
// decides them, not the client's WithSessionTimeout. A no-op under the
// classic protocol. The brokers bound them (integration/kafka/broker.sh
// lowers the minimums to 1s and 500ms).
func (c *Cluster) ConsumerGroupTimeouts(t testing.TB, group string, session, heartbeat time.Duration) {
	t.Helper()
	if Consumer848() {
		c.SetConsumerGroupTimeouts(t, group, session, heartbeat)
	}
}

// SetConsumerGroupTimeouts is ConsumerGroupTimeouts under either protocol
// (for raw KIP-848 members).
func (c *Cluster) SetConsumerGroupTimeouts(t testing.TB, group string, session, heartbeat time.Duration) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for name, d := range map[string]time.Duration{"consumer.session.timeout.ms": session, "consumer.heartbeat.interval.ms": heartbeat} {
		cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		cfg.Name, cfg.Op, cfg.Value = name, kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(fmt.Sprint(d.Milliseconds()))
		res.Configs = append(res.Configs, cfg)
	}
	req.Resources = append(req.Resources, res)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, c.cl)
	if err == nil {
		for _, r := range resp.Resources {
			if err = kerr.ErrorForCode(r.ErrorCode); err != nil {
				if r.ErrorMessage != nil {
					err = fmt.Errorf("%w: %s", err, *r.ErrorMessage)
				}
				break
			}
		}
	}
	if err != nil {
		t.Fatalf("kafkatest: setting group %s's session timeout %v and heartbeat %v: %v", group, session, heartbeat, err)
	}
}

// Member is a group member as DescribeGroups or, for a KIP-848 group,
// ConsumerGroupDescribe reports it.
type Member struct {
	MemberID, InstanceID string
	Assigned             map[string][]int32 // topic → partitions
}

// DescribeGroup returns the group's state and members under the protocol
// the tests run (see GroupProtocol): DescribeGroups does not describe
// KIP-848 groups. Members without an instance ID have InstanceID "".
func (c *Cluster) DescribeGroup(ctx context.Context, group string) (state string, members []Member, err error) {
	if !Consumer848() {
		gs, err := c.Admin.DescribeGroups(ctx, group)
		if err != nil {
			return "", nil, err
		}
		g := gs[group]
		if g.Err != nil {
			return "", nil, g.Err
		}
		for _, m := range g.Members {
			mm := Member{MemberID: m.MemberID, Assigned: map[string][]int32{}}
			if m.InstanceID != nil {
				mm.InstanceID = *m.InstanceID
			}
			if a, ok := m.Assigned.AsConsumer(); ok {
				for _, tp := range a.Topics {
					mm.Assigned[tp.Topic] = tp.Partitions
				}
			}
			members = append(members, mm)
		}
		return g.State, members, nil
	}
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		return "", nil, err
	}
	if len(resp.Groups) != 1 {
		return "", nil, fmt.Errorf("kafkatest: ConsumerGroupDescribe of %s: %d groups in the answer", group, len(resp.Groups))
	}
	g := resp.Groups[0]
	if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
		return "", nil, err
	}
	// Assignments name topics by ID (kfake gives no names).
	names := map[[16]byte]string{}
	if ts, err := c.Admin.ListTopics(ctx); err == nil {
		for _, td := range ts {
			names[td.ID] = td.Topic
		}
	}
	for _, m := range g.Members {
		mm := Member{MemberID: m.MemberID, Assigned: map[string][]int32{}}
		if m.InstanceID != nil {
			mm.InstanceID = *m.InstanceID
		}
		for _, tp := range m.Assignment.TopicPartitions {
			name := tp.Topic
			if n, ok := names[tp.TopicID]; ok {
				name = n
			}
			mm.Assigned[name] = tp.Partitions
		}
		members = append(members, mm)
	}
	return g.State, members, nil
}

// SyncBuffer is a log sink a test reads while a processor or a command
// writes to it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
