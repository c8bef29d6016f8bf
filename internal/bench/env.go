package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/clientsec"
)

// Env is where a benchmark runs: the brokers (an embedded kfake cluster
// unless given), an admin client, and the topics and groups it created,
// which Close removes unless asked to keep them.
type Env struct {
	Brokers []string
	Fake    bool // the brokers are an embedded kfake cluster
	// Security is how every client of the benchmark reaches the
	// brokers (TLS, SASL): its own admin, feeder and reader clients and
	// the pipelines, in process or in workers.
	Security clientsec.Config
	opts     []kgo.Opt // Security's client options

	fake   *kfake.Cluster
	cl     *kgo.Client
	adm    *kadm.Client
	prefix string
	keep   bool
	// failed: a run failed, and keep was set for its evidence.
	failed bool
	log    *slog.Logger

	// coordinatorsWarm is set once a warm-up has committed a transaction
	// and a group offset here (Runner.warmUp; phases run one at a time).
	coordinatorsWarm bool

	mu     sync.Mutex
	topics []string
	groups []string
}

// NewEnv connects to brokers or, when there are none, starts an embedded
// three-broker kfake cluster listening on localhost (so that subprocess
// workers can reach it too).
func NewEnv(brokers []string, keep bool, log *slog.Logger) (*Env, error) {
	return NewSecuredEnv(brokers, clientsec.Config{}, keep, log)
}

// NewSecuredEnv is NewEnv for brokers reached with TLS or SASL (sec); an
// embedded cluster takes none.
func NewSecuredEnv(brokers []string, sec clientsec.Config, keep bool, log *slog.Logger) (*Env, error) {
	e := &Env{Brokers: brokers, keep: keep, log: log}
	if len(brokers) > 0 {
		opts, err := sec.Opts()
		if err != nil {
			return nil, err
		}
		e.Security, e.opts = sec, opts
	}
	if len(brokers) == 0 {
		fake, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.GroupMinSessionTimeout(100*time.Millisecond))
		if err != nil {
			return nil, fmt.Errorf("starting the embedded cluster: %w", err)
		}
		e.fake, e.Fake, e.Brokers = fake, true, fake.ListenAddrs()
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(e.Brokers...)}, e.opts...)...)
	if err != nil {
		e.closeCluster()
		return nil, err
	}
	if !e.Fake {
		// Refused TLS or SASL fails here, at once and with the
		// reason, not as a run that times out.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := clientsec.Probe(ctx, cl, 500*time.Millisecond)
		cancel()
		if err != nil {
			cl.Close()
			return nil, fmt.Errorf("connecting to %v: %w", e.Brokers, err)
		}
	}
	e.cl, e.adm = cl, kadm.NewClient(cl)
	var b [4]byte
	_, _ = rand.Read(b[:])
	e.prefix = "eosbench-" + hex.EncodeToString(b[:])
	return e, nil
}

// Name returns a name unique to this run.
func (e *Env) Name(suffix string) string { return e.prefix + "-" + suffix }

// Topic creates a uniquely named topic.
func (e *Env) Topic(ctx context.Context, suffix string, partitions int) (string, error) {
	name := e.Name(suffix)
	// Replication -1: the broker's default, so that the same code runs on
	// one real broker, a real cluster and kfake.
	resp, err := e.adm.CreateTopic(ctx, int32(partitions), -1, nil, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return "", fmt.Errorf("creating topic %s: %w", name, err)
	}
	e.mu.Lock()
	e.topics = append(e.topics, name)
	e.mu.Unlock()
	return name, nil
}

// keepForEvidence keeps every topic and group of the invocation, whatever
// -keep says: a run failed, and they are its evidence.
func (e *Env) keepForEvidence() {
	e.keep, e.failed = true, true
}

// Prefix starts the name of every topic and group the Env makes.
func (e *Env) Prefix() string { return e.prefix }

// track has Close delete a topic created by someone else (a changelog).
func (e *Env) track(topic string) {
	e.mu.Lock()
	e.topics = append(e.topics, topic)
	e.mu.Unlock()
}

// Drop deletes topics of a finished run from the embedded cluster, which
// holds every record in this process's memory: the next run's garbage
// collections then do not scan what earlier runs wrote (peak RSS grew
// from 0.4 to 1.3 GB over a default invocation, and the later runs were
// the slower ones). Real brokers keep them until Close, as does -keep.
func (e *Env) Drop(ctx context.Context, topics ...string) {
	if !e.Fake {
		return
	}
	e.DropNow(ctx, topics...)
}

// DropNow deletes topics at once, on real brokers too, unless they are
// kept (-keep, or a failed run's evidence).
func (e *Env) DropNow(ctx context.Context, topics ...string) {
	if e.keep || len(topics) == 0 {
		return
	}
	if _, err := e.adm.DeleteTopics(ctx, topics...); err != nil {
		e.log.Warn("deleting a finished run's topics", "err", err)
		return
	}
	e.mu.Lock()
	e.topics = slices.DeleteFunc(e.topics, func(t string) bool { return slices.Contains(topics, t) })
	e.mu.Unlock()
}

// Group returns a uniquely named consumer group, deleted by Close.
func (e *Env) Group(suffix string) string {
	name := e.Name(suffix)
	e.mu.Lock()
	e.groups = append(e.groups, name)
	e.mu.Unlock()
	return name
}

// Close deletes what the run created (unless kept) and stops the embedded
// cluster.
func (e *Env) Close() {
	if !e.keep {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		e.mu.Lock()
		groups, topics := e.groups, e.topics
		e.mu.Unlock()
		if len(groups) > 0 {
			if _, err := e.adm.DeleteGroups(ctx, groups...); err != nil {
				e.log.Warn("deleting groups", "err", err)
			}
		}
		if len(topics) > 0 {
			if _, err := e.adm.DeleteTopics(ctx, topics...); err != nil {
				e.log.Warn("deleting topics", "err", err)
			}
		}
		cancel()
	} else if e.failed && !e.Fake {
		e.log.Warn("a run failed: keeping the topics and groups of this invocation as its evidence", "prefix", e.prefix)
	} else {
		e.log.Info("keeping topics and groups", "prefix", e.prefix)
	}
	e.cl.Close()
	e.closeCluster()
}

func (e *Env) closeCluster() {
	if e.fake != nil {
		e.fake.Close()
	}
}
