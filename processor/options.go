package processor

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"

	"github.com/onceflow/onceflow/dedupe"
	"github.com/onceflow/onceflow/statestore"
)

// Handler handles one input record. Records it emits are produced in the
// transaction that commits the record's offset, so they become visible
// exactly once, or never if the record is handled again after an abort.
// A nil error completes the record; Permanent(err) sends it to the
// dead-letter topic at once; any other error is retried (see RetryPolicy).
// ctx is canceled when the processor shuts down or the record is declared
// stuck.
type Handler func(ctx context.Context, rec *kgo.Record, out Emitter) error

// Emitter collects a handler's output records.
type Emitter interface {
	// Emit queues r for the record's transaction. An empty Topic means the
	// default output topic; a nil Key means the input record's key, so a
	// session's outputs land in one output partition, in order. r must not
	// be changed after Emit.
	Emit(r *kgo.Record)
}

// Ordering says which records may be handled concurrently.
type Ordering int

const (
	// OrderBySession handles records of one session (by default the record
	// key; see WithSessionKey) strictly in offset order, and different
	// sessions in parallel.
	OrderBySession Ordering = iota
	// OrderByPartition handles each partition strictly in offset order.
	OrderByPartition
	// Unordered spreads records over UnorderedLanes lanes by offset.
	Unordered
)

// UnorderedLanes is the parallelism of Unordered.
const UnorderedLanes = 1024

// Clock is the time source for retry backoff and stuck detection.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Opt configures a Processor.
type Opt func(*config)

type config struct {
	brokers            []string
	group              string
	instanceID         string
	inputs             []string
	output             string
	dlq                string
	handler            Handler
	commitInterval     time.Duration
	txnTimeout         time.Duration
	sessionTimeout     time.Duration
	rebalanceTimeout   time.Duration
	retry              RetryPolicy
	permanent          func(error) bool
	ordering           Ordering
	sessionKey         func(*kgo.Record) []byte
	idleSession        time.Duration
	stuckTimeout       time.Duration
	maxPartitionBuffer int
	maxBuffer          int
	maxMetadataBytes   int
	drainTimeout       time.Duration
	logger             *slog.Logger
	clientLogLevel     slog.Level
	clock              Clock
	kgoOpts            []kgo.Opt
	stateDir           string
	stateOpts          *statestore.Options
	dedupeSet          bool
	dedupeDir          string
	dedupeOpts         *dedupe.Options
	eventID            func(*kgo.Record) []byte
	positionGuard      bool
	registerer         prometheus.Registerer
	tracerProvider     trace.TracerProvider
	hooks              testHooks // set only by tests (export_test.go)
}

// testHooks let tests crash the processor at points no fault injection
// reaches. Nil in production: each costs one nil check.
type testHooks struct {
	// afterEndTxn runs after a transaction committed and before its state
	// writes (n of them) are applied to the store; an error ends Run.
	afterEndTxn func(n int) error
	// restoreApply runs after each batch a restore applied to the store
	// of an input partition, with the batch's records; an error fails the
	// restore (and Run).
	restoreApply func(partition int32, records int) error
}

func defaults() config {
	return config{
		commitInterval:     100 * time.Millisecond,
		txnTimeout:         10 * time.Second,
		sessionTimeout:     45 * time.Second,
		rebalanceTimeout:   60 * time.Second,
		retry:              DefaultRetryPolicy(),
		idleSession:        10 * time.Second,
		maxPartitionBuffer: 1_000,
		maxBuffer:          100_000,
		maxMetadataBytes:   4096,
		drainTimeout:       5 * time.Second,
		logger:             slog.New(slog.NewTextHandler(io.Discard, nil)),
		clientLogLevel:     slog.LevelWarn,
		clock:              realClock{},
	}
}

// WithBrokers sets the seed brokers (bootstrap.servers). Required.
func WithBrokers(brokers ...string) Opt { return func(c *config) { c.brokers = brokers } }

// WithGroup sets the application name: the consumer group (group.id) and
// the prefix of the transactional ID. Required.
func WithGroup(group string) Opt { return func(c *config) { c.group = group } }

// WithInstanceID sets the instance's stable ID (group.instance.id). It is
// the static group member ID and, with the group, the transactional ID:
// keep it stable across restarts and unique among live instances.
// Required.
func WithInstanceID(id string) Opt { return func(c *config) { c.instanceID = id } }

// WithInputTopics sets the topics to consume, read_committed. Required.
func WithInputTopics(topics ...string) Opt { return func(c *config) { c.inputs = topics } }

// WithOutputTopic sets the topic of emitted records that name none.
// Default: none (every emitted record must name its topic).
func WithOutputTopic(topic string) Opt { return func(c *config) { c.output = topic } }

// WithDLQTopic sets the dead-letter topic. Records that fail permanently,
// exhaust their retries or get stuck are written there, in the same
// transaction, with headers saying why. Default: none, and Run stops with
// ErrNoDLQ rather than drop such a record.
func WithDLQTopic(topic string) Opt { return func(c *config) { c.dlq = topic } }

// WithHandler sets the record handler. Required.
func WithHandler(h Handler) Opt { return func(c *config) { c.handler = h } }

// WithCommitInterval sets how often the transaction commits
// (Kafka Streams' commit.interval.ms, which is 100ms under exactly-once).
// Longer intervals cost less per record and add end-to-end latency.
// Default 100ms.
func WithCommitInterval(d time.Duration) Opt { return func(c *config) { c.commitInterval = d } }

// WithTransactionTimeout sets transaction.timeout.ms: how long the
// coordinator lets a transaction stay open before aborting it. It bounds
// how long a crashed instance's open transaction can hold up readers.
// Default 10s (as Kafka Streams under exactly-once; the broker's
// transaction.max.timeout.ms is 15 minutes).
func WithTransactionTimeout(d time.Duration) Opt { return func(c *config) { c.txnTimeout = d } }

// WithSessionTimeout sets the group session.timeout.ms. With static
// membership, a stopped instance keeps its partitions this long, waiting
// for a restart. Default 45s.
func WithSessionTimeout(d time.Duration) Opt { return func(c *config) { c.sessionTimeout = d } }

// WithRebalanceTimeout sets the group rebalance timeout (the Java client's
// max.poll.interval.ms plays this role). Default 60s.
func WithRebalanceTimeout(d time.Duration) Opt { return func(c *config) { c.rebalanceTimeout = d } }

// WithRetryPolicy sets the backoff for transient handler errors.
// Default: DefaultRetryPolicy.
func WithRetryPolicy(p RetryPolicy) Opt { return func(c *config) { c.retry = p } }

// WithPermanentErrors sets a classifier: errors for which it returns true
// go to the dead-letter topic without retries, like Permanent(err).
func WithPermanentErrors(isPermanent func(error) bool) Opt {
	return func(c *config) { c.permanent = isPermanent }
}

// WithOrdering sets the ordering mode. Default OrderBySession.
func WithOrdering(o Ordering) Opt { return func(c *config) { c.ordering = o } }

// WithSessionKey sets how OrderBySession finds a record's session.
// Default: the record key.
func WithSessionKey(fn func(*kgo.Record) []byte) Opt { return func(c *config) { c.sessionKey = fn } }

// WithIdleSessionTimeout sets how long an idle worker goroutine waits for
// a session with records before it ends (sessions themselves hold no
// goroutine). Default 10s.
func WithIdleSessionTimeout(d time.Duration) Opt { return func(c *config) { c.idleSession = d } }

// WithStuckTimeout makes a record that stays unfinished this long go to the
// dead-letter topic with reason "stuck", so its partition's commit point
// moves on: availability over completeness. Its handler's context is
// canceled. Default 0: off (a stuck record holds its partition's commits).
func WithStuckTimeout(d time.Duration) Opt { return func(c *config) { c.stuckTimeout = d } }

// WithMaxBuffered bounds fetched but unfinished records per partition and
// in total. Fetching pauses at the bounds; nothing is dropped. The
// per-partition bound also limits how far past its lowest unfinished record
// a partition runs ahead, and so the size of the map of finished records in
// the commit metadata: at 1,000 it stays well inside the broker's default
// 4096 bytes. Default 1,000 per partition and 100,000 in total.
func WithMaxBuffered(perPartition, total int) Opt {
	return func(c *config) { c.maxPartitionBuffer, c.maxBuffer = perPartition, total }
}

// WithMaxCommitMetadataBytes sets the broker's offset.metadata.max.bytes,
// which bounds the map of finished records above the committed offset.
// Records that would overflow it wait, and their partition pauses.
// Default 4096 (the broker default).
func WithMaxCommitMetadataBytes(n int) Opt { return func(c *config) { c.maxMetadataBytes = n } }

// WithDrainTimeout bounds how long in-flight records may finish before a
// rebalance or shutdown commits. Keep it well under the rebalance timeout.
// Default 5s.
func WithDrainTimeout(d time.Duration) Opt { return func(c *config) { c.drainTimeout = d } }

// WithLogger sets the logger for operational events. Default: discard.
func WithLogger(l *slog.Logger) Opt { return func(c *config) { c.logger = l } }

// WithClientLogLevel sets how much of franz-go's own client log reaches
// the WithLogger logger, tagged component=kgo: slog.LevelDebug for every
// request and retry, LevelInfo for connection, group and producer-ID
// events, LevelWarn (the default) and LevelError for problems only; a
// level above LevelError turns it off. The logger's own level still
// applies. A kgo.WithLogger in WithKgoOpts replaces it.
func WithClientLogLevel(l slog.Level) Opt { return func(c *config) { c.clientLogLevel = l } }

// WithMetrics registers the processor's Prometheus metrics (see
// docs/operations.md), and the franz-go client's own (kprom, prefixed
// onceflow_kafka_), on reg. Every metric has constant labels group and
// instance, so several processors can share one registry. Default: no
// metrics, and no work for them on the record path.
func WithMetrics(reg prometheus.Registerer) Opt { return func(c *config) { c.registerer = reg } }

// WithTracerProvider traces each record with OpenTelemetry: a span
// "onceflow.handle" per record, a child of the context in the record's W3C
// traceparent header, whose context the handler gets and which is injected
// into the headers of the record's outputs and dead-letter record; and a
// span "onceflow.commit" per transaction. Default: no tracing, and no work
// for it on the record path.
func WithTracerProvider(tp trace.TracerProvider) Opt {
	return func(c *config) { c.tracerProvider = tp }
}

// WithClock sets the clock for retry backoff and stuck detection.
// Default: the system clock.
func WithClock(cl Clock) Opt { return func(c *config) { c.clock = cl } }

// WithKgoOpts passes options to the franz-go client (TLS, SASL, client ID,
// logging). Options that conflict with the processor's own (group,
// transactional ID, isolation level) are overridden by later options:
// pass them with care. The processor appends its start time to franz-go's
// default balancer's JoinGroup metadata, so that a process can tell a
// newer holder of its instance ID from an older one that came back
// (txn.Config.Incarnation); with kgo.Balancers set here it cannot, and
// counts any other member with its instance ID as newer.
func WithKgoOpts(opts ...kgo.Opt) Opt {
	return func(c *config) { c.kgoOpts = append(c.kgoOpts, opts...) }
}

// clientOpts are the options every franz-go client of the processor starts
// from: its log routing, then the user's WithKgoOpts, which win.
func (c *config) clientOpts() []kgo.Opt {
	return append([]kgo.Opt{kgo.WithLogger(newClientLogger(c.logger, c.clientLogLevel))}, c.kgoOpts...)
}

func (c *config) validate() error {
	switch {
	case len(c.brokers) == 0:
		return invalid("WithBrokers: at least one seed broker is required")
	case c.group == "":
		return invalid("WithGroup: a group (application name) is required")
	case c.instanceID == "":
		return invalid("WithInstanceID: a stable instance ID is required for transactional IDs and static membership")
	case len(c.inputs) == 0:
		return invalid("WithInputTopics: at least one input topic is required")
	case c.handler == nil:
		return invalid("WithHandler: a handler is required")
	case c.commitInterval <= 0:
		return invalid("WithCommitInterval: must be positive, got %v", c.commitInterval)
	case c.txnTimeout < time.Second:
		return invalid("WithTransactionTimeout: must be at least 1s, got %v", c.txnTimeout)
	case c.commitInterval >= c.txnTimeout:
		return invalid("WithCommitInterval (%v) must be shorter than WithTransactionTimeout (%v)", c.commitInterval, c.txnTimeout)
	case c.sessionTimeout <= 0 || c.rebalanceTimeout <= 0:
		return invalid("session and rebalance timeouts must be positive")
	case c.drainTimeout <= 0 || c.drainTimeout >= c.rebalanceTimeout:
		return invalid("WithDrainTimeout (%v) must be positive and shorter than the rebalance timeout (%v)", c.drainTimeout, c.rebalanceTimeout)
	case c.ordering < OrderBySession || c.ordering > Unordered:
		return invalid("WithOrdering: unknown mode %d", c.ordering)
	case c.idleSession <= 0:
		return invalid("WithIdleSessionTimeout: must be positive")
	case c.stuckTimeout < 0:
		return invalid("WithStuckTimeout: must not be negative")
	case c.stuckTimeout > 0 && c.dlq == "":
		return invalid("WithStuckTimeout needs WithDLQTopic: stuck records go there")
	case c.maxPartitionBuffer <= 0 || c.maxBuffer < c.maxPartitionBuffer:
		return invalid("WithMaxBuffered: need 0 < perPartition <= total, got %d, %d", c.maxPartitionBuffer, c.maxBuffer)
	case c.maxMetadataBytes < 64:
		return invalid("WithMaxCommitMetadataBytes: must be at least 64, got %d", c.maxMetadataBytes)
	case c.logger == nil || c.clock == nil:
		return invalid("logger and clock must not be nil")
	case c.dlq != "" && contains(c.inputs, c.dlq):
		return invalid("WithDLQTopic %q is also an input topic", c.dlq)
	case c.output != "" && contains(c.inputs, c.output):
		return invalid("WithOutputTopic %q is also an input topic", c.output)
	}
	if err := c.validateDedupe(); err != nil {
		return err
	}
	return c.retry.validate()
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
