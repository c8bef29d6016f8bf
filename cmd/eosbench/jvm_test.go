package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/onceflow/onceflow/internal/bench"
	"github.com/onceflow/onceflow/internal/kafkatest"
)

// TestJVMModes runs the peers small over 5,000 inputs with 5% transient
// faults and 5% duplicated events, which they must pass through once each:
// Kafka Streams (exactly_once_v2) as two instances of one application,
// Parallel Consumer (transactional, KEY order) as one. eosbench's exit
// status, which runSmall requires to be 0, is 1 if either's output is not
// exactly once in session order. Real brokers only: it builds the JVM
// programs with Maven (about 10 s the first time on a machine, cached
// after), which the real-broker pass has.
//
// Parallel Consumer runs one instance: with two, the rebalance as the
// second joins left duplicates in some runs (docs/benchmarks-kafka-streams.md).
func TestJVMModes(t *testing.T) {
	if !kafkatest.Real() {
		t.Skip("needs Java and Maven: runs in the real-broker pass")
	}
	for _, tc := range []struct {
		mode    bench.Mode
		workers string
	}{{bench.ModeKafkaStreams, "2"}, {bench.ModeParallelConsumer, "1"}} {
		t.Run(string(tc.mode), func(t *testing.T) {
			rs, _ := runSmall(t, string(tc.mode), "-workers", tc.workers, "-dup-rate", "0.05")
			require.Len(t, rs, 1)
			r := rs[0]
			require.Equal(t, tc.mode, r.Mode)
			require.Equal(t, bench.VerdictPass, r.Verdict, r.Failure)
			require.True(t, r.ExactlyOnce, "%+v", r)
			require.Positive(t, r.DupsInjected)
			require.Equal(t, 5000+r.DupsInjected, r.Outputs, "every input once, each duplicate passed through once")
			require.Equal(t, r.DupsInjected, r.Duplicates)
			require.Zero(t, r.Lost)
			require.Zero(t, r.OrderViolations)
			require.Positive(t, r.Throughput)
			require.Positive(t, r.Counters.Retries, "faults were injected and retried")
			require.Positive(t, r.Counters.CommitNanos, "the framework's commit time is reported")
			if tc.mode == bench.ModeKafkaStreams {
				require.Positive(t, r.Counters.Commits, "Kafka Streams counts its commits")
			}
		})
	}
}
