package processor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Run's first step: the brokers answer and the job's topics exist, within
// WithStartTimeout. Without it Run waited in silence for brokers that did
// not answer and for input that could not come, and returned nil when its
// context ended (issue 33).

// topicGrace bounds how long a missing topic is asked for again before it
// is reported: on a cluster a broker may not know yet a topic created a
// moment ago through another.
const topicGrace = inputWait

// checkStart confirms that a broker answers and that the input, output and
// dead-letter topics exist, within the start timeout. It returns an error
// wrapping ErrBrokersUnreachable (with each address's last dial error) or
// ErrTopicNotFound (naming the topics), or nil; nil also when ctx ends
// before anything went wrong: a stop, not a failure. The changelog topics
// are not checked: Run creates them next.
func (p *Processor) checkStart(ctx context.Context) error {
	cfg := &p.cfg
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, cfg.startTimeout)
	defer cancel()
	dials := &dialErrors{last: make(map[string]error)}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cfg.brokers...), kgo.WithHooks(dials)}, cfg.clientOpts()...)...)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidOption, err)
	}
	defer cl.Close()

	topics := cfg.jobTopics()
	var missing []string // of the last answer
	graceEnd := start.Add(topicGrace)
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		resp, err := metadataOf(cctx, cl, topics)
		switch {
		case err == nil:
			if err := checkAdvertised(cctx, cl, resp, dials); err != nil {
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
		case <-cctx.Done():
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
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		}
		switch err := kerr.ErrorForCode(t.ErrorCode); {
		case err == nil:
		case topicGone(err):
			missing = append(missing, name)
		case errors.Is(err, kerr.TopicAuthorizationFailed):
			return nil, fmt.Errorf("processor: topic %s: %w (it may not exist either: Kafka does not tell the unauthorized)", name, err)
		case errors.Is(err, kerr.LeaderNotAvailable):
			// Being created, or its leader is moving: it exists.
		default:
			return nil, fmt.Errorf("processor: topic %s: %w", name, err)
		}
	}
	return missing, nil
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
