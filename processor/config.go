package processor

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kslog"
	"go.opentelemetry.io/otel/trace"

	"github.com/onceflow/onceflow/dedupe"
	"github.com/onceflow/onceflow/internal/txncore"
	"github.com/onceflow/onceflow/statestore"
	"github.com/onceflow/onceflow/txn"
)

// config is what the Opts set, defaulted (defaults) and checked at New
// (validate). A Processor keeps it; it does not change after New.
type config struct {
	brokers            []string
	group              string
	instanceID         string
	inputs             []string
	output             string
	outputSet          bool // WithOutputTopic was given (its topic may be invalid)
	noDefaultOutput    bool // WithoutDefaultOutput
	dlq                string
	handler            Handler
	commitInterval     time.Duration
	minCommitInterval  time.Duration
	txnTimeout         time.Duration
	pipeline           int
	sessionTimeout     time.Duration
	groupProtocol      GroupProtocol
	rebalanceTimeout   time.Duration
	leaveOnStop        bool
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
	startTimeout       time.Duration
	logger             *slog.Logger
	clientLogLevel     slog.Level
	sessionTimeoutSet  bool // WithSessionTimeout was given: under KIP-848 Run sets the group's config
	clock              Clock
	kgoOpts            []kgo.Opt
	stateDir           string
	stateOpts          *statestore.Options
	dedupeSet          bool
	dedupeDir          string
	dedupeOpts         *dedupe.Options
	eventID            func(*kgo.Record) []byte
	positionGuard      bool
	stopAtEnd          bool // WithStopAtEnd (stopatend.go)
	registerer         prometheus.Registerer
	tracerProvider     trace.TracerProvider
}

func defaults() config {
	return config{
		commitInterval:     100 * time.Millisecond,
		txnTimeout:         10 * time.Second,
		pipeline:           defaultPipeline,
		sessionTimeout:     45 * time.Second,
		groupProtocol:      GroupProtocolClassic,
		rebalanceTimeout:   60 * time.Second,
		retry:              DefaultRetryPolicy(),
		idleSession:        10 * time.Second,
		maxPartitionBuffer: 1_000,
		maxBuffer:          50_000,
		maxMetadataBytes:   4096,
		drainTimeout:       5 * time.Second,
		startTimeout:       30 * time.Second,
		logger:             slog.Default(), // as it is when New runs
		clientLogLevel:     slog.LevelWarn,
		clock:              realClock{},
	}
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
	case c.pipeline < 1 || c.pipeline > txncore.MaxPipeline:
		return invalid("WithTransactionPipeline: want 1 to %d, got %d", txncore.MaxPipeline, c.pipeline)
	case c.minCommitInterval < 0 || c.minCommitInterval > c.commitInterval:
		return invalid("WithMinCommitInterval: need 0 <= min <= WithCommitInterval (%v), got %v", c.commitInterval, c.minCommitInterval)
	case c.commitInterval >= c.txnTimeout:
		return invalid("WithCommitInterval (%v) must be shorter than WithTransactionTimeout (%v)", c.commitInterval, c.txnTimeout)
	case c.sessionTimeout <= 0 || c.rebalanceTimeout <= 0:
		return invalid("session and rebalance timeouts must be positive")
	case c.startTimeout <= 0:
		return invalid("WithStartTimeout: must be positive, got %v", c.startTimeout)
	case c.drainTimeout <= 0 || c.drainTimeout >= c.rebalanceTimeout:
		return invalid("WithDrainTimeout (%v) must be positive and shorter than the rebalance timeout (%v)", c.drainTimeout, c.rebalanceTimeout)
	case c.groupProtocol != GroupProtocolClassic && c.groupProtocol != GroupProtocolConsumer:
		return invalid("WithGroupProtocol: want %q or %q, got %q", GroupProtocolClassic, GroupProtocolConsumer, c.groupProtocol)
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
	if err := c.validateNames(); err != nil {
		return err
	}
	if err := c.validateDedupe(); err != nil {
		return err
	}
	if err := c.stateOpts.Validate(); err != nil {
		return fmt.Errorf("%w: WithStateStore: %w", ErrInvalidOption, err)
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

// changelogSpecs lists the changelogs the configuration needs.
func (c *config) changelogSpecs() []changelogSpec {
	var out []changelogSpec
	compact := "compact"
	compacted := map[string]*string{"cleanup.policy": &compact}
	if c.stateDir != "" {
		out = append(out, changelogSpec{stateSuffix, compacted})
	}
	if c.dedupeDir != "" {
		out = append(out, changelogSpec{dedupeSuffix, dedupeTopicConfigs(c.dedupeOptions())})
	}
	if c.positionGuard {
		out = append(out, changelogSpec{positionsSuffix, compacted})
	}
	return out
}

// changelogTopics returns the names of every changelog topic.
func (c *config) changelogTopics() map[string]bool {
	out := make(map[string]bool)
	for _, sp := range c.changelogSpecs() {
		for _, in := range c.inputs {
			out[changelogName(c.group, in, sp.suffix)] = true
		}
	}
	return out
}

// dedupeOptions returns the options the store is opened with: the
// user's, with the processor's clock and, unless set, logger.
func (c *config) dedupeOptions() dedupe.Options {
	var o dedupe.Options
	if c.dedupeOpts != nil {
		o = *c.dedupeOpts
	}
	if o.Logger == nil {
		o.Logger = c.logger
	}
	o.Clock = c.clock
	o.EnsureDefaults()
	return o
}

func (c *config) validateDedupe() error {
	if !c.dedupeSet {
		if c.eventID != nil {
			return invalid("WithEventID needs WithDedupe")
		}
		return nil
	}
	if c.eventID == nil { // the default, set here: WithEventID alone is invalid
		c.eventID = headerEventID
	}
	switch {
	case c.dedupeDir == "":
		return invalid("WithDedupe: a directory is required")
	case c.stateDir != "" && c.stateDir == c.dedupeDir:
		return invalid("WithDedupe and WithStateStore need different directories, both are %q", c.dedupeDir)
	case c.dedupeOpts != nil && c.dedupeOpts.Clock != nil:
		return invalid("WithDedupe: opts.Clock must be nil: mark times follow the processor's clock (WithClock)")
	}
	o := c.dedupeOptions()
	if err := o.Validate(); err != nil {
		return fmt.Errorf("%w: WithDedupe: %w", ErrInvalidOption, err)
	}
	if err := storeOptions(o).Validate(); err != nil {
		return fmt.Errorf("%w: WithDedupe: MaxIDLen %d leaves no room for the processor's %d bytes of key prefix: %w",
			ErrInvalidOption, o.MaxIDLen, dedupeKeyOverhead, err)
	}
	return nil
}

// validateNames checks what New can check of the addresses and topic
// names without contacting anything: an empty address or topic name, a
// name Kafka would refuse, and a job with no output topic that has not
// said so (WithoutDefaultOutput). Each of these otherwise surfaced late
// and far from its cause: as dial errors, a broker's INVALID_TOPIC_EXCEPTION
// or a dead letter on the first record.
func (c *config) validateNames() error {
	for i, b := range c.brokers {
		if strings.TrimSpace(b) == "" {
			return invalid("WithBrokers: address %d of %d is empty", i+1, len(c.brokers))
		}
	}
	for _, in := range c.inputs {
		if why := topicNameProblem(in); why != "" {
			return invalid("WithInputTopics: %s", why)
		}
	}
	switch {
	case c.outputSet && c.output == "":
		return invalid("WithOutputTopic: the topic name is empty (a handler that names the topic of every record it emits says so with WithoutDefaultOutput)")
	case !c.outputSet && !c.noDefaultOutput:
		return invalid("WithOutputTopic: an output topic is required, or WithoutDefaultOutput for a handler that names the topic of every record it emits")
	}
	if c.output != "" {
		if why := topicNameProblem(c.output); why != "" {
			return invalid("WithOutputTopic: %s", why)
		}
	}
	if c.dlq != "" { // "": no dead-letter topic
		if why := topicNameProblem(c.dlq); why != "" {
			return invalid("WithDLQTopic: %s", why)
		}
	}
	// The changelog topics' names are made of the group's and the
	// inputs': a group name Kafka accepts (any string) may not make a
	// topic name it accepts.
	for _, sp := range c.changelogSpecs() {
		for _, in := range c.inputs {
			if why := topicNameProblem(changelogName(c.group, in, sp.suffix)); why != "" {
				return invalid("WithGroup %q: its changelog topic for input %s: %s", c.group, in, why)
			}
		}
	}
	return nil
}

// txnOptions are the options of the transactional sessions and of the
// instance ID's hold that follow from the configuration; each lifetime
// adds its clients' options and callbacks (runCall.sessionOptions).
func (c *config) txnOptions() txncore.Options {
	return txncore.Options{
		Brokers:            c.brokers,
		Group:              c.group,
		InstanceID:         c.instanceID,
		Topics:             c.inputs,
		TransactionTimeout: c.txnTimeout,
		SessionTimeout:     c.sessionTimeout,
		RebalanceTimeout:   c.rebalanceTimeout,
		GroupProtocol:      c.groupProtocol,
		Pipeline:           c.pipeline,
		ClientOpts:         c.clientOpts(),
	}
}

// commitFloor is the schedule's minimum floor.
func (c *config) commitFloor() time.Duration {
	if c.minCommitInterval > 0 {
		return c.minCommitInterval
	}
	return min(defaultMinCommitInterval, c.commitInterval)
}

// jobTopics are the topics the job needs before it starts, in the order of
// the options: inputs, output, dead-letter topic.
func (c *config) jobTopics() []string {
	ts := slices.Clone(c.inputs)
	for _, t := range []string{c.output, c.dlq} {
		if t != "" && !slices.Contains(ts, t) {
			ts = append(ts, t)
		}
	}
	return ts
}

// topicRole names the option that made topic one of the job's.
func (c *config) topicRole(topic string) string {
	switch {
	case slices.Contains(c.inputs, topic):
		return "input topic " + topic + " (WithInputTopics)"
	case topic == c.output:
		return "output topic " + topic + " (WithOutputTopic)"
	case topic == c.dlq:
		return "dead-letter topic " + topic + " (WithDLQTopic)"
	}
	return "topic " + topic
}

// Handler handles one input record. Records it emits are produced in the
// transaction that commits the record's offset, so they become visible
// exactly once, or never if the record is handled again after an abort.
// A nil error completes the record; Permanent(err) sends it to the
// dead-letter topic at once; any other error is retried (see RetryPolicy).
// ctx is canceled when the processor shuts down or the record is declared
// stuck.
//
// A panic in the handler, or in what it calls on its goroutine (Once's
// effects included), is recovered and fails the record permanently: it
// goes to the dead-letter topic with reason "panic" and, in HeaderError,
// the panic value, where it happened and the stack down to the handler
// (see PanicError), and processing goes on. Without a dead-letter topic
// Run stops with an error wrapping ErrHandlerPanic and ErrNoDLQ, and the
// record is not committed, so it is handled again at the next start, as
// Kafka Streams' processing.exception.handler answering FAIL stops the
// application. Such records are counted in Stats.Panics and
// onceflow_records_dead_lettered_total{reason="panic"}. A panic on another
// goroutine that the handler started cannot be recovered and ends the
// process, as in any Go program.
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

// Clock is the processor's time source: retry backoff, stuck detection,
// the age of buffered records and, with WithDedupe, the mark times of
// event IDs and their expiry. It satisfies dedupe.Clock.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// A Clock is a dedupe.Clock: WithDedupe hands the processor's clock to
// its dedupe store.
var _ dedupe.Clock = Clock(nil)

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Opt configures a Processor: pass the With… options of this package to
// New, which applies them in order. As franz-go's kgo.Opt, it is an
// interface with an unexported method: only this package makes options,
// and the configuration they set stays unexported.
type Opt interface {
	apply(*config)
}

// opt is an Opt made of a function.
type opt func(*config)

func (o opt) apply(c *config) { o(c) }

// Each option's documentation gives its default and the Kafka or Kafka
// Streams (Java) setting it corresponds to, if there is one. Options are
// applied in order: a later option of the same kind replaces an earlier
// one (WithKgoOpts appends).

// Required options.

// WithBrokers sets the seed brokers: the Java client's bootstrap.servers.
// Required; no default.
func WithBrokers(brokers ...string) Opt { return opt(func(c *config) { c.brokers = brokers }) }

// WithGroup sets the application name: the consumer group (group.id) and
// the prefix of the transactional ID (see txn.ID), as Kafka Streams'
// application.id is both. Required; no default.
func WithGroup(group string) Opt { return opt(func(c *config) { c.group = group }) }

// WithInstanceID sets the instance's stable ID: the static group member ID
// (group.instance.id) and, with the group, the transactional ID
// (transactional.id = "<group>/<instance ID>", see txn.ID). Keep it stable
// across restarts and unique among live instances: a pod name of a
// StatefulSet, say. Kafka Streams derives transactional IDs from the
// application.id and the process instead, and sets no group.instance.id
// unless asked to. Required; no default.
func WithInstanceID(id string) Opt { return opt(func(c *config) { c.instanceID = id }) }

// WithInputTopics sets the topics to consume. They are read with
// isolation.level=read_committed, which cannot be changed: records of
// aborted transactions are never handled. As the topics of Kafka Streams'
// StreamsBuilder.stream. Required; no default.
func WithInputTopics(topics ...string) Opt { return opt(func(c *config) { c.inputs = topics }) }

// WithHandler sets the record handler. Required; no default.
func WithHandler(h Handler) Opt { return opt(func(c *config) { c.handler = h }) }

// Outputs and failures.

// WithOutputTopic sets the topic of emitted records that name none, as
// the topic of Kafka Streams' KStream.to. Required, unless
// WithoutDefaultOutput says the handler names the topic of every record
// it emits; the later of the two wins.
func WithOutputTopic(topic string) Opt {
	return opt(func(c *config) { c.output, c.outputSet, c.noDefaultOutput = topic, true, false })
}

// WithoutDefaultOutput declares a job without a default output topic: its
// handler names the topic of every record it emits, or emits none (a job
// whose effects are outside Kafka). A record emitted without a topic then
// fails as a permanent error and goes to the dead-letter topic. New
// refuses a job with neither this nor WithOutputTopic, so that a
// forgotten output topic fails at New rather than at the first record.
func WithoutDefaultOutput() Opt {
	return opt(func(c *config) { c.output, c.outputSet, c.noDefaultOutput = "", false, true })
}

// WithDLQTopic sets the dead-letter topic. Records that fail permanently,
// exhaust their retries or get stuck are written there, in the same
// transaction, with headers saying why: Kafka Streams'
// errors.dead.letter.queue.topic.name (KIP-1034). Default: none, and Run
// stops with ErrNoDLQ rather than drop such a record.
func WithDLQTopic(topic string) Opt { return opt(func(c *config) { c.dlq = topic }) }

// WithRetryPolicy sets the backoff for transient handler errors; zero
// fields of p take their defaults (see RetryPolicy, which names the Java
// client settings each field mirrors). Default: DefaultRetryPolicy.
func WithRetryPolicy(p RetryPolicy) Opt { return opt(func(c *config) { c.retry = p.resolved() }) }

// WithPermanentErrors sets a classifier: errors for which it returns true
// go to the dead-letter topic without retries, like Permanent(err). It
// plays the part of Kafka Streams' processing.exception.handler
// (KIP-1033) answering FAIL for such errors, except that the record goes
// to the dead-letter topic and processing goes on. A panic of
// isPermanent fails the record as a handler's panic does (see Handler).
// Default: none (only errors wrapped with Permanent are permanent).
func WithPermanentErrors(isPermanent func(error) bool) Opt {
	return opt(func(c *config) { c.permanent = isPermanent })
}

// WithStuckTimeout makes a record that stays unfinished this long go to the
// dead-letter topic with reason "stuck", so its partition's commit point
// moves on: availability over completeness. Its handler's context is
// canceled. Needs WithDLQTopic. No Kafka setting does this: the Java
// client's max.poll.interval.ms expels a stalled consumer from the group
// instead. Default 0: off (a stuck record holds its partition's commits).
func WithStuckTimeout(d time.Duration) Opt { return opt(func(c *config) { c.stuckTimeout = d }) }

// Ordering and parallelism.

// WithOrdering sets the ordering mode. Kafka Streams handles each
// partition in order on one thread, as OrderByPartition does. Default
// OrderBySession.
func WithOrdering(o Ordering) Opt { return opt(func(c *config) { c.ordering = o }) }

// WithSessionKey sets how OrderBySession finds a record's session; fn must
// not keep or modify the record. A panic of fn fails the record as a
// handler's panic does (see Handler), without running the handler. No
// Kafka setting. Default: the record key.
func WithSessionKey(fn func(*kgo.Record) []byte) Opt {
	return opt(func(c *config) { c.sessionKey = fn })
}

// WithIdleSessionTimeout sets how long an idle worker goroutine waits for
// a session with records before it ends (sessions themselves hold no
// goroutine). No Kafka setting. Default 10s.
func WithIdleSessionTimeout(d time.Duration) Opt { return opt(func(c *config) { c.idleSession = d }) }

// WithMaxBuffered bounds how far a partition runs ahead of its lowest
// unfinished record (perPartition: records handed to sessions and not yet
// passed by the commit point) and the fetched, unfinished records in total.
// The processor takes no more records from the client than the total
// leaves room for; a partition whose queue grows past twice its share of
// the total (a slow or stuck session holds its window) has its fetching
// paused, so that it cannot take the room the others need. Nothing is
// dropped. The per-partition bound also sizes the map of finished records
// in the commit metadata: at 1,000 it stays well inside the broker's
// default 4096 bytes. It plays the part of Kafka Streams'
// buffered.records.per.partition (default 1000), and the total that of its
// input.buffer.max.bytes, in records; franz-go's own fetch buffer (at most
// one fetch per broker, kgo.FetchMaxBytes) comes on top. A fetched record
// keeps its whole batch alive, decompressed, until the record finishes, so
// the total is most of the memory a busy processor holds: with 1,000,000
// short-lived sessions (eosbench -scenario churn) the worker's peak RSS was
// 163-176 MiB at 50,000 against 192-237 MiB at 100,000, at the same
// throughput. Default 1,000 per partition and 50,000 in total.
func WithMaxBuffered(perPartition, total int) Opt {
	return opt(func(c *config) { c.maxPartitionBuffer, c.maxBuffer = perPartition, total })
}

// Transactions, commits and the group.

// WithCommitInterval bounds the time between commits: Kafka Streams'
// commit.interval.ms, which is 100ms under exactly-once. It is the latency
// bound, not the pace: commits are scheduled by load (see
// WithMinCommitInterval), and a transaction with finished work commits at
// the latest this long after the previous commit ended. It must be shorter
// than the transaction timeout. Default 100ms.
func WithCommitInterval(d time.Duration) Opt { return opt(func(c *config) { c.commitInterval = d }) }

// WithMinCommitInterval sets the shortest time from one commit's end to
// the next commit's start. Outputs become visible only when their
// transaction commits, so by default the processor commits as soon as a
// transaction holds finished work, its first record is acknowledged and
// this floor has passed: at light load the commit round trip is the
// latency. After a transaction during which
// work waited for room (the WithMaxBuffered total reached) the floor is
// WithCommitInterval, so a backlog commits on the interval and spends less
// per record; it halves after each commit as load falls. Equal to
// WithCommitInterval, commits run on a fixed interval as Kafka Streams'
// do. No Kafka setting. Default (0): 1ms, or WithCommitInterval if that is
// shorter.
func WithMinCommitInterval(d time.Duration) Opt {
	return opt(func(c *config) { c.minCommitInterval = d })
}

// WithTransactionTimeout sets transaction.timeout.ms: how long the
// coordinator lets a transaction stay open before aborting it. It bounds
// how long a crashed instance's open transaction can hold up readers.
// At least 1s. Default 10s (as Kafka Streams under exactly-once; the
// broker's transaction.max.timeout.ms, 15 minutes by default, caps it).
func WithTransactionTimeout(d time.Duration) Opt { return opt(func(c *config) { c.txnTimeout = d }) }

// WithTransactionPipeline sets how many transactional producers an
// instance runs, 1 to 8: while one transaction ends (its offset commit,
// EndTxn and the markers the coordinator writes), the next fills on the
// next producer, so a record waits for about one commit round trip
// instead of up to two. 1 is a single producer with one transaction at a
// time, as Kafka Streams and franz-go's GroupTransactSession run. Producer
// k > 0 has the transactional ID "<group>/<instance ID>#k" (txn.RingID):
// grant the instance a TransactionalId prefix ACL. With WithStateStore,
// WithDedupe or WithPositionGuard a transaction still begins on the next
// producer, but the loop admits no finished work into it until the one
// before it has ended (the stores apply transactions in commit order).
// Default 2. There is no Kafka setting for it: Kafka lets one producer run
// one transaction at a time.
func WithTransactionPipeline(n int) Opt { return opt(func(c *config) { c.pipeline = n }) }

// defaultPipeline is WithTransactionPipeline's default.
const defaultPipeline = 2

// WithSessionTimeout sets the group's session timeout: with static
// membership, a stopped instance keeps its partitions this long, waiting
// for a restart, and a crashed one holds its instance ID this long, so a
// restart waits for it under GroupProtocolConsumer. Default 45s (the Java
// client's session.timeout.ms). Under the classic protocol the member
// sends it; under GroupProtocolConsumer the group's config holds it
// (consumer.session.timeout.ms), and Run sets that config when this
// option is given, with a heartbeat interval of a third of it: it needs
// ALTER_CONFIGS on the group, and the broker's
// group.consumer.min.session.timeout.ms (45s by default) and
// group.consumer.min.heartbeat.interval.ms (5s) must allow the values,
// or Run logs why and the group keeps its own (the broker's
// group.consumer.session.timeout.ms, 45s by default).
func WithSessionTimeout(d time.Duration) Opt {
	return opt(func(c *config) { c.sessionTimeout, c.sessionTimeoutSet = d, true })
}

// WithLeaveOnStop makes a clean stop (Run's context done and its final
// commit made) leave the consumer group for good, so that the instance's
// partitions go to the other instances at once: for a scale-down, after
// which the instance does not come back. By default a stop keeps the
// static membership, so that a restart with the same instance ID (a
// rolling restart) takes the partitions back without a rebalance; the
// partitions of an instance that does not come back then wait out the
// session timeout (WithSessionTimeout, or the broker's under
// GroupProtocolConsumer: 45s by default) before they move. On a 3-node
// Kafka 4.4.0 cluster the other instance committed records of a stopped
// instance's partitions 0.2-3.1s after the stop with the leave under the
// classic protocol and 4.3-4.8s under the consumer protocol (the survivor
// hears of it at its next heartbeat: the broker's 5s default), against
// 44.5-45.7s without (README, "Scaling down"). Processor.LeaveOnStop
// decides per stop instead; docs/operations.md says which to use when.
//
// Under the classic protocol the leave is a LeaveGroup naming the
// instance ID, as Kafka Streams' KafkaStreams.close with
// CloseOptions.leaveGroup(true) (KIP-812) and the Java consumer's close
// with GroupMembershipOperation.LEAVE_GROUP (KIP-1092) send; under the
// consumer protocol a ConsumerGroupHeartbeat at member epoch -1 with the
// instance ID. It is sent after the final commit and after the group
// member's client has closed (txn.Session.CloseAndLeave), and logged at
// Info ("left the group on stop"), or at Warn if it fails. A client
// rebuilt after an error never leaves, nor does a stop that finds the
// instance fenced. Default: off.
func WithLeaveOnStop() Opt { return opt(func(c *config) { c.leaveOnStop = true }) }

// GroupProtocol is the consumer group protocol: the Java client's
// group.protocol.
type GroupProtocol = txn.GroupProtocol

const (
	// GroupProtocolClassic is the JoinGroup/SyncGroup protocol with
	// franz-go's cooperative-sticky assignor. Every supported Kafka
	// version.
	GroupProtocolClassic = txn.GroupProtocolClassic
	// GroupProtocolConsumer is KIP-848's protocol: the broker assigns
	// partitions incrementally, and members that keep their partitions
	// never stop for a rebalance. Needs Kafka 4.0+ with the consumer
	// protocol enabled (group.coordinator.rebalance.protocols, which
	// includes it by default); 4.3+ recommended: before it (4.2.0 and
	// kfake alike) a transactional offset commit must carry the member's
	// current epoch, so a transaction whose end crosses the reassignment of
	// another of the member's partitions aborts and is redone; 4.3.0 takes
	// the older epoch for the partitions kept (KIP-1251;
	// integration/TestCoordinator848TxnCommitAtOlderEpoch). On a
	// broker without it Run fails at start with an error matching
	// ErrGroupProtocolUnsupported. Static membership differs: the first
	// holder of an instance ID keeps it until it leaves or its session
	// expires, so a replacement started after a crash (no leave) waits out
	// the broker's session timeout before it gets partitions, and a
	// returning zombie cannot take the ID back from a live member; one
	// that was expelled waits up to 6s for a newer process to take the
	// free ID before it rejoins or rebuilds its client. Among processes with one
	// instance ID the newest still wins, as under classic: each client
	// initializes its transactional producer before it joins, and the
	// transaction coordinator's epoch orders these claims (internal/txncore/claim.go),
	// so an older holder yields to a newer process waiting for the ID at
	// its next commit, as it joins or rejoins, or within 5s while it runs
	// no transaction. A rebuild first waits for its own earlier member to
	// leave the group. Works with franz-go as published: the offset commit
	// goes through the transaction without franz-go's
	// GroupTransactSession, whose End hung under this protocol.
	GroupProtocolConsumer = txn.GroupProtocolConsumer
)

// WithGroupProtocol sets the consumer group protocol: the Java client's
// group.protocol (classic or consumer). Default GroupProtocolClassic. The
// guarantees are the same under both: offsets commit in the transaction
// fenced by the group's generation or member epoch (KIP-447), a rebalance
// waits until finished work is committed, and a zombie cannot make
// anything visible.
func WithGroupProtocol(p GroupProtocol) Opt { return opt(func(c *config) { c.groupProtocol = p }) }

// WithRebalanceTimeout sets the group rebalance timeout: how long members
// have to rejoin, and so how long the processor has to drain and commit
// when a rebalance starts. The Java client sends max.poll.interval.ms
// (default 5 minutes) in this role. Default 60s.
func WithRebalanceTimeout(d time.Duration) Opt {
	return opt(func(c *config) { c.rebalanceTimeout = d })
}

// WithDrainTimeout bounds how long in-flight records may finish before a
// rebalance or shutdown commits; records still running then are handled
// again by the partition's next owner. Keep it well under the rebalance
// timeout. No Kafka setting: it plays the part of the timeout of Kafka
// Streams' KafkaStreams.close(Duration) for in-flight work. Default 5s.
func WithDrainTimeout(d time.Duration) Opt { return opt(func(c *config) { c.drainTimeout = d }) }

// WithStartTimeout bounds Run's first step, which confirms that a broker
// answers (at a seed address and at an address the brokers advertise) and
// that the input, output and dead-letter topics exist. Past it, or when a
// topic is still missing after 10s, Run returns an error wrapping
// ErrBrokersUnreachable, with each address's last dial error, or
// ErrTopicNotFound, naming the topics. Kafka Streams fails at start with
// MissingSourceTopicException for a missing input, and its clients give up
// on unreachable brokers after default.api.timeout.ms (60s). Default 30s.
func WithStartTimeout(d time.Duration) Opt { return opt(func(c *config) { c.startTimeout = d }) }

// WithMaxCommitMetadataBytes sets the broker's offset.metadata.max.bytes,
// which bounds the map of finished records above the committed offset.
// Records that would overflow it wait, and their partition pauses. Set it
// to the broker's value if that was changed. At least 64. Default 4096
// (the broker default).
func WithMaxCommitMetadataBytes(n int) Opt { return opt(func(c *config) { c.maxMetadataBytes = n }) }

// WithPositionGuard keeps every input partition's committed position in
// a compacted topic "<group>-<input topic>-positions" (one partition per
// input partition, created if missing), written inside each transaction,
// and resumes a newly assigned partition from the later of that position
// and the offset the group coordinator serves (also when it serves none).
// Each transaction writes one small record per input partition that
// progressed; each assignment reads the tail of the position partitions.
// A deliberate rewind (kafka-consumer-groups --reset-offsets) is then
// overridden too: delete the position topic before restarting after one.
// Kafka Streams has no such setting: it takes the coordinator's offsets as
// they are. Default: off.
func WithPositionGuard() Opt { return opt(func(c *config) { c.positionGuard = true }) }

// WithKgoOpts passes options to the franz-go client (TLS, SASL, client ID,
// logging), as Kafka Streams passes consumer.- and producer.-prefixed
// settings to its clients. Options that conflict with the processor's own
// (group, transactional ID, isolation level) are overridden by later
// options: pass them with care. The processor appends its start time to
// franz-go's default balancer's JoinGroup metadata, so that a process can
// tell a newer holder of its instance ID from an older one that came back
// (txn.Options.Incarnation); with kgo.Balancers set here it cannot, and
// counts any other member with its instance ID as newer. The processor's
// transactional client fetches at most 256 KiB per partition
// (kgo.FetchMaxPartitionBytes, Java's max.partition.fetch.bytes) so that one
// fetch stays well inside a partition's queue (see WithMaxBuffered); set it
// here to change that. Calls append. Default: none.
func WithKgoOpts(opts ...kgo.Opt) Opt {
	return opt(func(c *config) { c.kgoOpts = append(c.kgoOpts, opts...) })
}

// State and deduplication.

// WithStateStore gives handlers session state (see StateFrom), kept in a
// Pebble store in dir and mirrored, inside each transaction, to a compacted
// changelog topic "<group>-<input topic>-changelog" with one partition per
// input partition (created if missing). dir is Kafka Streams' state.dir
// and the changelog its store's changelog topic; unlike Kafka Streams
// under exactly-once, a crash does not wipe the store (see package
// statestore). opts may be nil: the statestore.Options defaults. Default:
// no state.
func WithStateStore(dir string, opts *statestore.Options) Opt {
	return opt(func(c *config) { c.stateDir, c.stateOpts = dir, opts })
}

// WithDedupe skips records whose event ID was already processed: by default
// the value of the record header HeaderEventID ("event-id"); see
// WithEventID. This catches duplicates that Kafka's idempotent producer
// (enable.idempotence, which only drops the producer's own retries)
// cannot, such as an application that sent the same event twice. Kafka
// Streams has no such setting.
//
// A record whose event ID was processed (its transaction committed, or it
// is earlier in the partition and not yet committed) is completed without
// running the handler: no outputs, its offset committed, and counted in
// Stats.DuplicatesSkipped and onceflow_duplicates_skipped_total. The first
// record of an event ID in a partition wins, also when it is dead-lettered
// (the event is accounted for there); IDs are per input partition,
// so producers must send an event's duplicates with the same key. A record
// without an event ID (no header, or an empty one) is processed normally
// and never deduplicated. A record whose event ID is longer than
// opts.MaxIDLen goes to the dead-letter topic with reason
// "event-id-too-long".
//
// Marks are kept in a dedupe store in dir (one for all partitions) and
// mirrored, inside each transaction, to a changelog topic
// "<group>-<input topic>-dedupe" with one partition per input partition
// (created if missing, with cleanup.policy=compact,delete and retention.ms
// = opts.TTL + opts.BucketWidth, so the changelog forgets IDs about when
// the store does). A mark is applied to the store only after its
// transaction commits, so a record whose transaction aborted is not
// skipped when it comes again; and a partition's marks follow it to its
// next owner, which restores them from the changelog before handling its
// records. An ID is remembered for opts.TTL (at most TTL+BucketWidth);
// a duplicate arriving later is processed again.
//
// Handlers can make external effects run once per event with Once. opts
// may be nil (the dedupe defaults: TTL 7 days); New rejects options that
// opts.Validate rejects. Mark times and expiry follow the processor's
// clock (WithClock): opts.Clock must be nil. Once's marks are always
// fsynced (dedupe.Options.SyncOnce), whatever opts says; the marks of
// committed records need no fsync (opts.Sync, default off): a crash that
// loses some loses their checkpoint with them, and the restore replays
// them from the changelog. A nil opts.Logger means the WithLogger logger.
// Default: no deduplication.
func WithDedupe(dir string, opts *dedupe.Options) Opt {
	return opt(func(c *config) { c.dedupeDir, c.dedupeOpts, c.dedupeSet = dir, opts, true })
}

// WithEventID sets how WithDedupe finds a record's event ID: fn returns it,
// or nil for a record that has none (which is then processed normally).
// fn must not keep or modify the record; a panic of fn fails the record as
// a handler's panic does (see Handler). Needs WithDedupe. No Kafka
// setting. Default: the value of the header HeaderEventID.
func WithEventID(fn func(*kgo.Record) []byte) Opt {
	return opt(func(c *config) { c.eventID = fn })
}

// Observability.

// WithLogger sets the logger for operational events. Warnings and errors
// (franz-go's own too, see WithClientLogLevel) carry the job's group,
// instance, brokers and topics besides what each line names. Kafka's Java
// clients log through SLF4J instead, configured outside the application's
// code. Default: slog.Default() as it is when New runs, which without
// slog.SetDefault writes Info and above to the standard logger (stderr);
// slog.New(slog.DiscardHandler) silences the processor.
func WithLogger(l *slog.Logger) Opt { return opt(func(c *config) { c.logger = l }) }

// WithClientLogLevel sets how much of franz-go's own client log reaches
// the WithLogger logger, tagged component=kgo: slog.LevelDebug for every
// request and retry, LevelInfo for connection, group and producer-ID
// events, LevelWarn (the default) and LevelError for problems only; a
// level above LevelError turns it off. The logger's own level still
// applies. A kgo.WithLogger in WithKgoOpts replaces it. As the level of
// the org.apache.kafka loggers in a Java application's logging
// configuration. Default slog.LevelWarn.
func WithClientLogLevel(l slog.Level) Opt { return opt(func(c *config) { c.clientLogLevel = l }) }

// WithMetrics registers the processor's Prometheus metrics (see
// docs/operations.md), and the franz-go client's own (kprom, prefixed
// onceflow_kafka_), on reg. Every metric has constant labels group and
// instance, so several processors can share one registry. The Java
// clients report theirs through JMX and metric.reporters instead.
// Default: no metrics, and no work for them on the record path.
func WithMetrics(reg prometheus.Registerer) Opt { return opt(func(c *config) { c.registerer = reg }) }

// WithTracerProvider traces each record with OpenTelemetry: a span
// "onceflow.handle" per record, a child of the context in the record's W3C
// traceparent header, whose context the handler gets and which is injected
// into the headers of the record's outputs and dead-letter record; and a
// span "onceflow.commit" per transaction. No Kafka setting. Default: no
// tracing, and no work for it on the record path.
func WithTracerProvider(tp trace.TracerProvider) Opt {
	return opt(func(c *config) { c.tracerProvider = tp })
}

// WithClock sets the processor's one clock: retry backoff, stuck
// detection, the age of buffered records and, with WithDedupe, the mark
// times and expiry of event IDs (see Clock). Tests inject a fake one; as
// the mock time of Kafka Streams' TopologyTestDriver, it is no Kafka
// setting. Default: the system clock.
func WithClock(cl Clock) Opt { return opt(func(c *config) { c.clock = cl }) }

// RetryPolicy is the exponential backoff with jitter applied to transient
// handler errors, inside the record's session so later records of the
// session wait behind it. A record that exhausts it goes to the dead-letter
// topic with reason "retries-exhausted".
//
// A zero field takes its default, so the zero RetryPolicy is
// DefaultRetryPolicy(), and RetryPolicy{MaxAttempts: 5} is the default
// backoff for at most 5 attempts. The backoff is the Java client's (KIP-580): the
// delay before attempt n+1 is Initial·Multiplier^(n-1), capped at Max, each
// delay varied by ±Jitter.
type RetryPolicy struct {
	// Initial is the first delay, as the Java client's retry.backoff.ms.
	// Must not be negative. Default 100ms (the Java default too).
	Initial time.Duration
	// Max caps the delay, as the Java client's retry.backoff.max.ms
	// (whose default is 1s). Must not be negative or, once defaulted,
	// shorter than Initial. Default 10s, or Initial if that is longer.
	Max time.Duration
	// Multiplier is the growth of the delay per attempt, at least 1 (1:
	// a constant delay). Default 2, the Java client's fixed factor.
	Multiplier float64
	// Jitter varies each delay by up to ± this fraction of it, at most 1.
	// Negative: no jitter. Default 0.2, the Java client's fixed jitter.
	Jitter float64
	// MaxAttempts bounds the handler calls per record; negative: no bound.
	// Kafka Streams does not retry a failing processor, so nothing there
	// corresponds. Default: no bound.
	MaxAttempts int
	// MaxElapsed bounds the time from a record's first failure; negative:
	// no bound. As Kafka Streams' task.timeout.ms (default 5 minutes), a
	// bound on time rather than attempts. Default 1m, or no bound when a
	// positive MaxAttempts bounds the attempts instead. With MaxElapsed
	// negative and MaxAttempts not positive, a record is retried until its
	// handler succeeds or returns a permanent error.
	MaxElapsed time.Duration
}

// Defaults of RetryPolicy's fields.
const (
	defaultRetryInitial    = 100 * time.Millisecond
	defaultRetryMax        = 10 * time.Second
	defaultRetryMultiplier = 2
	defaultRetryJitter     = 0.2
	defaultRetryMaxElapsed = time.Minute
)

// DefaultRetryPolicy returns the defaults described on RetryPolicy:
// 100ms doubling up to 10s, ±20% jitter, for at most a minute.
func DefaultRetryPolicy() RetryPolicy { return RetryPolicy{}.resolved() }

// resolved returns p with its zero fields defaulted, in the form delay and
// exhausted read: there a zero Jitter, MaxAttempts or MaxElapsed means
// none, so negatives (none, for the user) become zero.
func (p RetryPolicy) resolved() RetryPolicy {
	if p.Initial == 0 {
		p.Initial = defaultRetryInitial
	}
	if p.Max == 0 {
		p.Max = max(defaultRetryMax, p.Initial)
	}
	if p.Multiplier == 0 {
		p.Multiplier = defaultRetryMultiplier
	}
	switch {
	case p.Jitter == 0:
		p.Jitter = defaultRetryJitter
	case p.Jitter < 0:
		p.Jitter = 0
	}
	if p.MaxElapsed == 0 && p.MaxAttempts <= 0 {
		p.MaxElapsed = defaultRetryMaxElapsed
	}
	p.MaxAttempts = max(p.MaxAttempts, 0)
	p.MaxElapsed = max(p.MaxElapsed, 0)
	return p
}

// validate checks a resolved policy.
func (p RetryPolicy) validate() error {
	switch {
	case p.Initial <= 0 || p.Max < p.Initial:
		return invalid("WithRetryPolicy: Initial must not be negative nor longer than Max, got Initial=%v Max=%v", p.Initial, p.Max)
	case !(p.Multiplier >= 1): // NaN too
		return invalid("WithRetryPolicy: Multiplier must be >= 1, got %v", p.Multiplier)
	case !(p.Jitter <= 1): // NaN too
		return invalid("WithRetryPolicy: Jitter must be at most 1, got %v", p.Jitter)
	}
	return nil
}

// delay returns the wait before attempt number attempt+1 (attempt >= 1).
func (p RetryPolicy) delay(attempt int) time.Duration {
	d := float64(p.Initial)
	for i := 1; i < attempt && d < float64(p.Max); i++ {
		d *= p.Multiplier
	}
	d = min(d, float64(p.Max))
	if p.Jitter > 0 {
		d *= 1 + p.Jitter*(2*rand.Float64()-1)
	}
	return time.Duration(d)
}

// exhausted reports whether no further attempt is allowed.
func (p RetryPolicy) exhausted(attempts int, sinceFirstFailure time.Duration) bool {
	return (p.MaxAttempts > 0 && attempts >= p.MaxAttempts) ||
		(p.MaxElapsed > 0 && sinceFirstFailure >= p.MaxElapsed)
}

// clientLogger hands franz-go's own logs to the processor's logger, tagged
// component=kgo, at no more detail than WithClientLogLevel allows: a
// producer or group problem inside the client (a failed producer ID, a
// retried batch, a rejoin) is then visible without patching code.
type clientLogger struct {
	sl  *kslog.Logger
	max kgo.LogLevel // the most detailed level passed on
}

func newClientLogger(l *slog.Logger, level slog.Level) kgo.Logger {
	return clientLogger{kslog.New(l.With("component", "kgo")), kgoLevel(level)}
}

// Level is the less detailed of the logger's and the chosen level, so that
// franz-go does not build messages that would be dropped.
func (c clientLogger) Level() kgo.LogLevel { return min(c.sl.Level(), c.max) }

func (c clientLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	if level <= c.max {
		c.sl.Log(level, msg, keyvals...)
	}
}

// kgoLevel maps an slog level to the most detailed kgo level it admits.
func kgoLevel(l slog.Level) kgo.LogLevel {
	switch {
	case l <= slog.LevelDebug:
		return kgo.LogLevelDebug
	case l <= slog.LevelInfo:
		return kgo.LogLevelInfo
	case l <= slog.LevelWarn:
		return kgo.LogLevelWarn
	case l <= slog.LevelError:
		return kgo.LogLevelError
	}
	return kgo.LogLevelNone
}

// maxTopicNameLen is Kafka's limit on a topic name (Topic.MAX_NAME_LENGTH).
const maxTopicNameLen = 249

// topicNameProblem says why Kafka would refuse name as a topic name
// (org.apache.kafka.common.internals.Topic.validate), or "" if it would not.
func topicNameProblem(name string) string {
	switch {
	case name == "":
		return "a topic name is empty"
	case name == "." || name == "..":
		return fmt.Sprintf("topic name %q is not allowed", name)
	case len(name) > maxTopicNameLen:
		return fmt.Sprintf("topic name %.40q... is %d characters, longer than Kafka's %d", name, len(name), maxTopicNameLen)
	}
	for _, r := range name {
		legal := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
		if !legal {
			return fmt.Sprintf("topic name %q has %q: Kafka allows only ASCII letters, digits, '.', '_' and '-'", name, r)
		}
	}
	return ""
}

// Changelog topic suffixes: "<group>-<input topic>-<suffix>".
const (
	stateSuffix  = "changelog"
	dedupeSuffix = "dedupe"
)

func changelogName(group, input, suffix string) string { return group + "-" + input + "-" + suffix }

// changelogSpec is one kind of changelog: a topic per input topic.
type changelogSpec struct {
	suffix  string
	configs map[string]*string // of topics the processor creates
}

const positionsSuffix = "positions"

func positionsTopic(group, input string) string { return changelogName(group, input, positionsSuffix) }

func changelogTopic(group, input string) string { return changelogName(group, input, stateSuffix) }

// dedupeKeyOverhead is what the processor adds to an event ID in the
// store's keys (see markKey and effectKey): a tag, the input topic (at most
// 249 bytes) and partition, an epoch or an effect name.
const dedupeKeyOverhead = 1 + 2 + 249 + 4 + 4 + 2 + MaxEffectNameLen

// headerEventID is the default event ID: the first HeaderEventID header.
func headerEventID(r *kgo.Record) []byte {
	for _, h := range r.Headers {
		if h.Key == HeaderEventID {
			return h.Value
		}
	}
	return nil
}

// storeOptions are the dedupe store's options: the user's, with Once's
// marks synced and room for the processor's key prefixes.
func storeOptions(o dedupe.Options) *dedupe.Options {
	o.SyncOnce = true
	o.MaxIDLen += dedupeKeyOverhead
	return &o
}

func dedupeTopicConfigs(o dedupe.Options) map[string]*string {
	policy := "compact,delete"
	retention := strconv.FormatInt((o.TTL + o.BucketWidth).Milliseconds(), 10)
	return map[string]*string{"cleanup.policy": &policy, "retention.ms": &retention}
}

func dedupeTopic(group, input string) string { return changelogName(group, input, dedupeSuffix) }

// defaultMinCommitInterval is WithMinCommitInterval's default.
const defaultMinCommitInterval = time.Millisecond

// HeaderEventID is the record header that holds a record's event ID by
// default (see WithDedupe and WithEventID).
const HeaderEventID = "event-id"

// MaxEffectNameLen bounds the effect names of OnceNamed.
const MaxEffectNameLen = 255

// testHooks let tests crash the processor at points no fault injection
// reaches, or leave out a check to test another alone. They are not configuration: tests pass them to New as hook
// options (hooksOpt, made in export_test.go), New keeps them on the
// Processor, apart from config, and the loop reads them from there. Each
// Processor has its own, so tests running in parallel do not share them.
// Zero in production: each costs one nil check.
type testHooks struct {
	// afterEndTxn runs after a transaction committed and before its state
	// writes (n of them) are applied to the store; an error ends Run.
	afterEndTxn func(n int) error
	// restoreApply runs after each batch a restore applied to the store
	// of an input partition, with the batch's records; an error fails the
	// restore (and Run).
	restoreApply func(input int32, records int) error
	// claimRecheck, if set, replaces txncore.ClaimRecheck.
	claimRecheck time.Duration
	// topicWatch, if set, replaces topicWatchInterval (admin.go).
	topicWatch time.Duration
	// lagRefresh, if set, replaces lagRefreshInterval (observe.go).
	lagRefresh time.Duration
	// recordBound, if set, replaces Health.RecordBound.
	recordBound time.Duration
	// fixedBudget, if set, fixes each transaction's budget at this many
	// bytes (see txnBudget).
	fixedBudget int64
}

// hooksOpt is an Opt that sets test hooks rather than configuration.
type hooksOpt func(*testHooks)

func (hooksOpt) apply(*config) {}

// hooksOf collects the test hooks that opts set.
func hooksOf(opts []Opt) testHooks {
	var h testHooks
	for _, o := range opts {
		if ho, ok := o.(hooksOpt); ok {
			ho(&h)
		}
	}
	return h
}

// every calls fn every interval until ctx ends or fn returns false: the
// side loops beside the record path (topic watch, end offsets, end watch).
func every(ctx context.Context, interval time.Duration, fn func() bool) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !fn() {
			return
		}
	}
}
