package processor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The changelog topics of the keyspaces (keyspace.go): their names, their
// creation and how their records are partitioned; and the loop's taking
// of finished restores.

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
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cfg.brokers...), kgo.MetadataMinAge(10 * time.Millisecond)}, cfg.clientOpts()...)...)
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
	// New topics take a moment to show up in metadata.
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
