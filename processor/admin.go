package processor

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/internal/clientsec"
)

// checkAccess connects to the brokers once, with the options every client
// of the processor gets, before Run builds any of them. A refusal that
// retrying cannot cure (a listener that wants TLS or SASL the options do
// not give, a wrong password, an untrusted certificate) stops Run with
// ErrUnauthenticated and franz-go's reason; franz-go's own clients would
// retry such a connection until each request's timeout, and the group and
// transaction loops forever. A refusal counts once it came back after a
// pause (clientsec.Probe): a restarting broker closes new connections too,
// for a moment. Brokers that cannot be reached yet are waited for, as Run
// always has.
//
// It shares the start timeout with checkStart: sctx is ctx bounded by the
// start's one deadline, and brokers still unreachable when it passes are
// Run's ErrBrokersUnreachable, naming each address's last dial error.
// Each step once had a timeout of its own, and Run took twice its start
// timeout to say so (issue 45).
func checkAccess(ctx, sctx context.Context, cfg *config) error {
	start := time.Now()
	dials := &dialErrors{last: make(map[string]error)}
	cl, err := sideClient(cfg, kgo.WithHooks(dials))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidOption, err)
	}
	defer cl.Close()
	for {
		pctx, cancel := context.WithTimeout(sctx, accessWait)
		err := clientsec.Probe(pctx, cl, time.Second)
		cancel()
		switch {
		case err == nil:
			return nil
		case clientsec.IsAuthError(err):
			return fmt.Errorf("%w: %v", ErrUnauthenticated, err)
		case sctx.Err() != nil:
			return startTimedOut(ctx, cfg, dials, nil, time.Since(start))
		}
		cfg.logger.Warn("cannot reach the brokers; retrying", "brokers", cfg.brokers, "err", err)
	}
}

// accessWait is how long checkAccess tries before it logs and goes on
// trying.
const accessWait = 10 * time.Second

// Run's first step: the brokers answer and the job's topics exist, within
// WithStartTimeout. Without it Run waited in silence for brokers that did
// not answer and for input that could not come, and returned nil when its
// context ended (issue 33).

// topicGrace bounds how long a missing topic is asked for again before it
// is reported: on a cluster a broker may not know yet a topic created a
// moment ago through another.
const topicGrace = inputWait

// checkStart confirms that a broker answers and that the input, output and
// dead-letter topics exist, before the start's deadline (sctx, which
// checkAccess used first; the start began at start). It returns an error
// wrapping ErrBrokersUnreachable (with each address's last dial error) or
// ErrTopicNotFound (naming the topics), or nil; nil also when ctx ends
// before anything went wrong: a stop, not a failure. The changelog topics
// are not checked: Run creates them next.
func checkStart(ctx, sctx context.Context, cfg *config, start time.Time) error {
	dials := &dialErrors{last: make(map[string]error)}
	cl, err := sideClient(cfg, kgo.WithHooks(dials))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidOption, err)
	}
	defer cl.Close()

	topics := cfg.jobTopics()
	var missing []string // of the last answer
	graceEnd := start.Add(topicGrace)
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		resp, err := metadataOf(sctx, cl, topics)
		switch {
		case err == nil:
			if err := checkAdvertised(sctx, cl, resp, dials); err != nil {
				return err
			}
			if missing, err = missingTopics(resp); err != nil {
				return err
			}
			if len(missing) == 0 {
				cfg.logger.Info("brokers and topics confirmed", "brokers", strings.Join(cfg.brokers, ","),
					"topics", strings.Join(topics, ","), "took", time.Since(start).Round(time.Millisecond))
				return nil
			}
			if time.Now().Add(backoff).After(graceEnd) {
				return topicsNotFound(cfg, missing)
			}
		case isBrokerAnswer(err):
			// The brokers answered, with a refusal (authentication,
			// authorization, an unsupported request): no retry helps.
			return fmt.Errorf("processor: the brokers %s refused the start check: %w", strings.Join(cfg.brokers, ","), err)
		default:
			dials.noteRequest(err)
		}
		select {
		case <-sctx.Done():
			return startTimedOut(ctx, cfg, dials, missing, time.Since(start))
		case <-time.After(backoff):
		}
	}
}

// startTimedOut is checkStart's verdict when its time ran out (or ctx
// ended): what it last saw, or nil if it saw nothing wrong.
func startTimedOut(ctx context.Context, cfg *config, dials *dialErrors, missing []string, took time.Duration) error {
	switch {
	case len(missing) > 0:
		return topicsNotFound(cfg, missing)
	case dials.any():
		return fmt.Errorf("%w within %v: %s", ErrBrokersUnreachable, took.Round(100*time.Millisecond), dials)
	case ctx.Err() != nil:
		return nil // stopped before any answer or error: a stop
	}
	return fmt.Errorf("%w within %v: %s: no answer", ErrBrokersUnreachable, took.Round(100*time.Millisecond), strings.Join(cfg.brokers, ","))
}

// topicsNotFound is the error for topics the brokers say do not exist.
func topicsNotFound(c *config, missing []string) error {
	roles := make([]string, len(missing))
	for i, t := range missing {
		roles[i] = c.topicRole(t)
	}
	return fmt.Errorf("%w: %s on brokers %s", ErrTopicNotFound, strings.Join(roles, ", "), strings.Join(c.brokers, ","))
}

// metadataOf asks one broker about the topics by name. A raw request, not
// kadm's: that one may answer from the client's metadata cache, and a
// topic named here is never created, whatever the brokers'
// auto.create.topics.enable.
func metadataOf(ctx context.Context, cl *kgo.Client, topics []string) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	req.AllowAutoTopicCreation = false
	return req.RequestWith(ctx, cl)
}

// missingTopics returns the topics the response says do not exist, or an
// error for one the brokers refuse to describe.
func missingTopics(resp *kmsg.MetadataResponse) ([]string, error) {
	var missing []string
	for _, t := range resp.Topics {
		if err := judgeTopic(t.Topic, t.ErrorCode, &missing); err != nil {
			return nil, err
		}
	}
	return missing, nil
}

// judgeTopic reads a topic's error code in a metadata answer: nil, with
// the topic added to missing if it does not exist, or an error for one
// the brokers refuse to describe.
func judgeTopic(topic *string, code int16, missing *[]string) error {
	name := ""
	if topic != nil {
		name = *topic
	}
	switch err := kerr.ErrorForCode(code); {
	case err == nil:
	case topicGone(err):
		*missing = append(*missing, name)
	case errors.Is(err, kerr.TopicAuthorizationFailed):
		return fmt.Errorf("processor: topic %s: %w (it may not exist either: Kafka does not tell the unauthorized)", name, err)
	case errors.Is(err, kerr.LeaderNotAvailable):
		// Being created, or its leader is moving: it exists.
	default:
		return fmt.Errorf("processor: topic %s: %w", name, err)
	}
	return nil
}

// topicsMissing asks whether topics exist and returns those that do not.
// It asks with DescribeTopicPartitions (KIP-966), a topic per request and
// a partition per answer, as the topic watch asks every 10 s for as long
// as the job runs: a Metadata request is answered with every partition of
// every topic it names (an idle instance read 76 KB/s at 10,000
// partitions, 761 B/s since, internal/scalesim), and franz-go keeps the
// last Metadata answer its client was given. Brokers that do not offer
// DescribeTopicPartitions are asked with Metadata.
func topicsMissing(ctx context.Context, cl *kgo.Client, topics []string) ([]string, error) {
	var missing []string
	for _, t := range topics {
		req := kmsg.NewPtrDescribeTopicPartitionsRequest()
		rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
		rt.Topic = t
		req.Topics = append(req.Topics, rt)
		req.ResponsePartitionLimit = 1
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			if ctx.Err() == nil && !describesTopics(ctx, cl) {
				if resp, err := metadataOf(ctx, cl, topics); err == nil {
					return missingTopics(resp)
				}
			}
			return nil, err
		}
		for _, rt := range resp.Topics {
			if err := judgeTopic(rt.Topic, rt.ErrorCode, &missing); err != nil {
				return nil, err
			}
		}
	}
	return missing, nil
}

// describesTopics reports whether every broker the client knows answers
// DescribeTopicPartitions.
func describesTopics(ctx context.Context, cl *kgo.Client) bool {
	vs, err := kadm.NewClient(cl).ApiVersions(ctx)
	if err != nil {
		return true // unknown: not a reason to ask the heavier way
	}
	for _, v := range vs.Sorted() {
		if _, ok := v.KeyMaxVersion(int16(kmsg.DescribeTopicPartitions)); v.Err == nil && !ok {
			return false
		}
	}
	return true
}

// topicGone reports whether err says that a topic or partition does not
// exist: what fetches, produces and metadata answer for a topic that was
// never created or was deleted. On a cluster it can also be a broker that
// does not know a new topic yet: confirmTopicsGone asks again.
func topicGone(err error) bool {
	return errors.Is(err, kerr.UnknownTopicOrPartition) || errors.Is(err, kerr.UnknownTopicID)
}

// isBrokerAnswer reports whether err is a Kafka error code: a broker
// answered the request, with an error.
func isBrokerAnswer(err error) bool {
	var ke *kerr.Error
	return errors.As(err, &ke)
}

// checkAdvertised requires that one of the brokers the metadata lists
// answers at the address it advertises. The seeds may answer while every
// advertised address is one this process cannot reach (advertised.listeners
// naming a host inside a container network, say): the check must fail
// then, not the first fetch later, in silence.
func checkAdvertised(ctx context.Context, cl *kgo.Client, resp *kmsg.MetadataResponse, dials *dialErrors) error {
	if len(resp.Brokers) == 0 {
		return nil
	}
	var errs []string
	for _, b := range resp.Brokers {
		_, err := cl.Broker(int(b.NodeID)).Request(ctx, kmsg.NewPtrApiVersionsRequest())
		if err == nil || isBrokerAnswer(err) {
			return nil
		}
		if ctx.Err() != nil {
			return nil // out of time: the caller reports
		}
		errs = append(errs, fmt.Sprintf("broker %d at %s: %v", b.NodeID, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))), err))
	}
	return fmt.Errorf("%w: the seed brokers answer but none of the brokers they advertise does (check advertised.listeners): %s",
		ErrBrokersUnreachable, strings.Join(errs, "; "))
}

// dialErrors keeps the last dial error of each broker address, from the
// start check's client (kgo.HookBrokerConnect).
type dialErrors struct {
	mu    sync.Mutex
	last  map[string]error
	order []string // addresses in the order first seen
	req   error    // the last failed request's error, if no dial failed
}

func (d *dialErrors) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if ownEnd(err) {
		return
	}
	addr := net.JoinHostPort(meta.Host, strconv.Itoa(int(meta.Port)))
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.last[addr]; !ok {
		d.order = append(d.order, addr)
	}
	d.last[addr] = err
}

func (d *dialErrors) noteRequest(err error) {
	if ownEnd(err) {
		return
	}
	d.mu.Lock()
	d.req = err
	d.mu.Unlock()
}

// ownEnd reports whether err is the check's own deadline or Run's stop,
// which say nothing about the brokers: a stop 4 ms into the check was
// reported as "no broker answered within 0s: context canceled".
func ownEnd(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// any reports whether a dial or a request failed.
func (d *dialErrors) any() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, err := range d.last {
		if err != nil {
			return true
		}
	}
	return d.req != nil
}

// String lists each address with its last dial error, or the last request
// error if every dial succeeded.
func (d *dialErrors) String() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var parts []string
	for _, addr := range d.order {
		if err := d.last[addr]; err != nil {
			parts = append(parts, addr+": "+err.Error())
		}
	}
	if len(parts) == 0 && d.req != nil {
		return d.req.Error()
	}
	return strings.Join(parts, "; ")
}

// A topic of the job deleted while Run runs: franz-go drops a deleted
// input's partitions from the assignment without an error, and fails the
// produces to a deleted output or dead-letter topic, which aborts every
// transaction after it, again and again. Neither says which topic is gone,
// nor stops. The watch asks the brokers about the job's topics every
// topicWatchInterval and, once a topic is confirmed gone, stops Run as its
// context would (in-flight work drains and what finished commits, where
// it still can) and Run returns an error wrapping ErrTopicNotFound. What
// was committed stays committed.

// topicWatchInterval is how often the watch asks about the job's topics:
// one small metadata request, rare enough to cost nothing.
const topicWatchInterval = 10 * time.Second

// topicGoneConfirm is how long a topic must stay missing, asked again
// with backoff, before it counts as gone: a broker that restarted may not
// know every topic yet.
const topicGoneConfirm = 5 * time.Second

// watchTopics starts the watch, asking every so often. The returned context is ctx, canceled
// with a cause wrapping ErrTopicNotFound when a topic is gone; pass Run's
// result through stop, which ends the watch and returns that cause in
// place of the result.
func watchTopics(ctx context.Context, cfg *config, interval time.Duration) (context.Context, func(error) error) {
	wctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		cl, err := sideClient(cfg)
		if err != nil {
			return // the start check built one with the same options
		}
		defer cl.Close()
		every(wctx, interval, func() bool {
			err := confirmTopicsGone(wctx, cl, cfg, cfg.jobTopics())
			if err != nil {
				cfg.logger.Error("a topic of the job is gone; stopping (what was committed stays committed)", "err", err)
				cancel(err)
			}
			return err == nil
		})
	}()
	return wctx, func(runErr error) error {
		cause := context.Cause(wctx)
		cancel(nil)
		<-done
		if errors.Is(cause, ErrTopicNotFound) {
			return cause
		}
		return runErr
	}
}

// confirmTopicsGone returns an error wrapping ErrTopicNotFound, naming the
// topics, if the brokers say that some of topics do not exist and keep
// saying so for topicGoneConfirm; nil if they all exist or the brokers
// cannot tell (unreachable: the loop has its own ways with that). It is
// also the check to make where a fetch or a produce fails with an error
// for which topicGone is true.
func confirmTopicsGone(ctx context.Context, cl *kgo.Client, cfg *config, topics []string) error {
	deadline := time.Now().Add(topicGoneConfirm)
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		missing, err := topicsMissing(ctx, cl, topics)
		if err != nil || len(missing) == 0 {
			return nil // present, or unknowable (unauthorized): not ours to judge here
		}
		if time.Now().Add(backoff).After(deadline) {
			return topicsNotFound(cfg, missing)
		}
		topics = missing
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
	}
}

// The changelog topics of the keyspaces (keyspace.go): their names, their
// creation and how their records are partitioned; and the loop's taking
// of finished restores.

// ensureChangelogs creates missing changelog topics with as many
// partitions as their input topics, and returns every changelog topic's ID.
// Existing topics are used as they are.
func ensureChangelogs(ctx context.Context, cfg *config) (map[string][16]byte, error) {
	specs := cfg.changelogSpecs()
	if len(specs) == 0 {
		return nil, nil
	}
	// A short metadata min age: the client must not answer the check for a
	// topic it just created from its cache.
	cl, err := sideClient(cfg, kgo.MetadataMinAge(10*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	td, err := listWithInputs(ctx, adm, cfg.inputs)
	if err != nil {
		return nil, fmt.Errorf("processor: describing topics for the changelogs: %w", err)
	}
	var want []string
	for _, in := range cfg.inputs {
		it, ok := td[in]
		if !ok {
			return nil, fmt.Errorf("processor: input topic %s does not exist", in)
		}
		if it.Err != nil {
			return nil, fmt.Errorf("processor: input topic %s: %w", in, it.Err)
		}
		for _, sp := range specs {
			name := changelogName(cfg.group, in, sp.suffix)
			want = append(want, name)
			if ct, ok := td[name]; ok && ct.Err == nil {
				if len(ct.Partitions) < len(it.Partitions) {
					return nil, fmt.Errorf("processor: changelog %s has %d partitions, input %s has %d", name, len(ct.Partitions), in, len(it.Partitions))
				}
				continue
			}
			resp, err := adm.CreateTopic(ctx, int32(len(it.Partitions)), -1, sp.configs, name)
			if err == nil {
				err = resp.Err
			}
			// Instances that start together race to create it: one wins.
			if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
				return nil, fmt.Errorf("processor: creating changelog %s: %w", name, err)
			}
		}
	}
	return changelogIDs(ctx, adm, want)
}

// changelogIDs waits for the changelog topics named in want to show in the
// metadata, which new topics take a moment to, and returns their IDs.
func changelogIDs(ctx context.Context, adm *kadm.Client, want []string) (map[string][16]byte, error) {
	var td kadm.TopicDetails
	var err error
	ids := make(map[string][16]byte, len(want))
	for try := 0; ; try++ {
		if td, err = adm.ListTopics(ctx); err == nil {
			err = td.Error()
		}
		if err == nil {
			for _, name := range want {
				if t, ok := td[name]; !ok || t.ID == [16]byte{} {
					err = fmt.Errorf("changelog %s not in metadata yet", name)
					break
				}
				ids[name] = td[name].ID
			}
		}
		if err == nil || try == 100 || ctx.Err() != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return nil, fmt.Errorf("processor: describing changelog topics: %w", err)
	}
	return ids, nil
}

// inputWait bounds how long listWithInputs waits for input topics to show.
const inputWait = 10 * time.Second

// listWithInputs lists all topics (naming a missing topic makes the client
// retry it for seconds), asking again for a while when an input topic is
// missing: on a cluster, the broker that answers may not know yet a topic
// that was just created through another (seen on the 3-node cluster when
// a worker started right after its input was created). A topic still
// missing after that is reported by the caller.
func listWithInputs(ctx context.Context, adm *kadm.Client, inputs []string) (kadm.TopicDetails, error) {
	deadline := time.Now().Add(inputWait)
	for backoff := 20 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		td, err := adm.ListTopics(ctx)
		if err != nil {
			return nil, err
		}
		missing := slices.ContainsFunc(inputs, func(in string) bool { _, ok := td[in]; return !ok })
		if !missing || time.Now().Add(backoff).After(deadline) {
			return td, nil
		}
		select {
		case <-ctx.Done():
			return td, nil
		case <-time.After(backoff):
		}
	}
}

// changelogPartitioner writes changelog records to the partition they name
// and everything else by key, as the default partitioner does.
type changelogPartitioner struct {
	topics map[string]bool
	dflt   kgo.Partitioner
}

func (p changelogPartitioner) ForTopic(t string) kgo.TopicPartitioner {
	if p.topics[t] {
		return kgo.ManualPartitioner().ForTopic(t)
	}
	return p.dflt.ForTopic(t)
}

// checkTopicsGone is confirmTopicsGone with a client of its own, for the
// loop's error paths, which have a transactional client that must not be
// used for it: call it when a fetch or produce error satisfies topicGone,
// with the failed record's topic, and stop with its error if it returns
// one.
func checkTopicsGone(ctx context.Context, c *config, topics ...string) error {
	cl, err := sideClient(c)
	if err != nil {
		return nil
	}
	defer cl.Close()
	return confirmTopicsGone(ctx, cl, c, topics)
}

// sideClient builds a client beside the transactional one, for the admin
// requests and reads of access and start checks, the topic watch, the
// changelog topics and the end watch: the job's brokers and client
// options, after extra.
func sideClient(cfg *config, extra ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append(append([]kgo.Opt{kgo.SeedBrokers(cfg.brokers...)}, extra...), cfg.clientOpts()...)...)
}

// quorumCheck asks, after a transaction could not end, whether the brokers
// have lost the quorum of a partition the job writes to: one with fewer
// in-sync replicas than its min.insync.replicas, whose records they refuse
// with NOT_ENOUGH_REPLICAS. franz-go retries those without a word until
// the transaction times out, which names no cause. The loss is logged
// once, and again only after it ended or every quorumReminder.
type quorumCheck struct {
	lost   bool
	logged time.Time
}

// quorumReminder is how often a quorum loss that lasts is logged again.
const quorumReminder = 10 * time.Minute

// internalLogs are the brokers' own topics a transaction writes to: its
// state and, with the offsets it commits, the group's.
var internalLogs = []string{"__transaction_state", "__consumer_offsets"}

// afterFailure checks the job's output, dead-letter and changelog topics
// and the brokers' logs, within a few seconds.
func (q *quorumCheck) afterFailure(ctx context.Context, cfg *config) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	topics := append(slices.DeleteFunc(cfg.jobTopics(), func(t string) bool { return slices.Contains(cfg.inputs, t) }), internalLogs...)
	for t := range cfg.changelogTopics() {
		topics = append(topics, t)
	}
	lost, err := underReplicated(ctx, cfg, topics)
	switch {
	case err != nil:
		return // the brokers cannot tell now: the rebuild goes on as it would
	case len(lost) == 0:
		q.lost = false
		return
	case q.lost && time.Since(q.logged) < quorumReminder:
		return
	}
	q.lost, q.logged = true, time.Now()
	cfg.logger.Warn("the brokers cannot store what the job writes: partitions have fewer in-sync replicas than min.insync.replicas, so the brokers refuse their records (NOT_ENOUGH_REPLICAS) and no transaction commits until replicas return; nothing partial is committed meanwhile",
		"partitions", lost)
}

// underReplicated names the partitions of topics with fewer in-sync
// replicas than their min.insync.replicas.
func underReplicated(ctx context.Context, cfg *config, topics []string) ([]string, error) {
	cl, err := sideClient(cfg)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	md, err := adm.Metadata(ctx, topics...)
	if err != nil {
		return nil, err
	}
	configs, err := adm.DescribeTopicConfigs(ctx, topics...)
	if err != nil {
		return nil, err
	}
	minISR := make(map[string]int)
	for _, rc := range configs {
		for _, c := range rc.Configs {
			if c.Key == "min.insync.replicas" && c.Value != nil {
				minISR[rc.Name], _ = strconv.Atoi(*c.Value)
			}
		}
	}
	var out []string
	for _, t := range md.Topics.Sorted() {
		for _, p := range t.Partitions.Sorted() {
			if m := minISR[t.Topic]; len(p.ISR) < m {
				out = append(out, fmt.Sprintf("%s/%d (%d in sync of %d, min.insync.replicas %d)", t.Topic, p.Partition, len(p.ISR), len(p.Replicas), m))
			}
		}
	}
	return out, nil
}

// setGroupSessionTimeout makes WithSessionTimeout the group's session
// timeout under the consumer protocol, whose members do not send one: the
// group's consumer.session.timeout.ms config, and its
// consumer.heartbeat.interval.ms lowered to a third of that if it is
// longer. A crashed static member holds its instance ID until its session
// ends, so a restart waits that long (45 s by the broker's default, where
// the classic protocol hands over at once, issue 45). A refusal (the
// broker's minimums, no ALTER_CONFIGS on the group) is logged: the group's
// own timeout applies.
func setGroupSessionTimeout(ctx context.Context, cfg *config) {
	if cfg.groupProtocol != GroupProtocolConsumer || !cfg.sessionTimeoutSet {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cl, err := sideClient(cfg)
	if err != nil {
		return
	}
	defer cl.Close()
	session := cfg.sessionTimeout
	want := map[string]time.Duration{"consumer.session.timeout.ms": session}
	if hb, ok := groupConfigMillis(ctx, cl, cfg.group, "consumer.heartbeat.interval.ms"); !ok || 3*hb > session {
		want["consumer.heartbeat.interval.ms"] = session / 3
	}
	if err = setGroupConfigs(ctx, cl, cfg.group, want); err != nil {
		cfg.logger.Warn("could not set the group's session timeout (WithSessionTimeout); the group's own applies, and a crashed instance's restart waits for it",
			"group", cfg.group, "session_timeout", session, "err", err)
		return
	}
	cfg.logger.Info("set the group's session timeout (WithSessionTimeout, consumer protocol)", "group", cfg.group, "configs", want)
}

// groupConfigMillis reads a group config of milliseconds, as the group
// has it (its own value, or the broker's default).
func groupConfigMillis(ctx context.Context, cl *kgo.Client, group, name string) (time.Duration, bool) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName, r.ConfigNames = kmsg.ConfigResourceTypeGroupConfig, group, []string{name}
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, false
	}
	for _, r := range resp.Resources {
		for _, c := range r.Configs {
			if c.Name == name && c.Value != nil {
				if ms, err := strconv.ParseInt(*c.Value, 10, 64); err == nil {
					return time.Duration(ms) * time.Millisecond, true
				}
			}
		}
	}
	return 0, false
}

// setGroupConfigs sets group configs of milliseconds.
func setGroupConfigs(ctx context.Context, cl *kgo.Client, group string, configs map[string]time.Duration) error {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for _, k := range slices.Sorted(maps.Keys(configs)) {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = k, kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(strconv.FormatInt(configs[k].Milliseconds(), 10))
		r.Configs = append(r.Configs, c)
	}
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	for _, r := range resp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			if r.ErrorMessage != nil {
				return fmt.Errorf("%w: %s", err, *r.ErrorMessage)
			}
			return err
		}
	}
	return nil
}
