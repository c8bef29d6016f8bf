package processor

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"

	"github.com/onceflow/onceflow/dedupe"
	"github.com/onceflow/onceflow/internal/txncore"
	"github.com/onceflow/onceflow/statestore"
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

// checkTopicsGone is confirmTopicsGone with a client of its own, for the
// loop's error paths, which have a transactional client that must not be
// used for it: call it when a fetch or produce error satisfies topicGone,
// with the failed record's topic, and stop with its error if it returns
// one.
func (c *config) checkTopicsGone(ctx context.Context, topics ...string) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.brokers...)}, c.clientOpts()...)...)
	if err != nil {
		return nil
	}
	defer cl.Close()
	return confirmTopicsGone(ctx, cl, c, topics)
}
