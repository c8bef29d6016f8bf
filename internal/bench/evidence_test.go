package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/internal/readback"
	"github.com/onceflow/onceflow/internal/verify"
)

// TestFailLeavesEvidence forces a FAIL: after two subprocess workers ran
// the pipeline, a producer of the test's writes one output record a second
// time. The run must be judged FAIL and leave its evidence: topics kept,
// worker logs on disk, a second read-back that agrees, and the duplicated
// input traced to both copies and the transactions that wrote them.
func TestFailLeavesEvidence(t *testing.T) {
	if testing.Short() {
		t.Skip("builds eosbench and runs subprocess workers")
	}
	c := kafkatest.New(t)
	bin := filepath.Join(t.TempDir(), "eosbench")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/onceflow/onceflow/cmd/eosbench").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	env, err := NewSecuredEnv(c.Brokers, c.Security, false, log)
	require.NoError(t, err)
	t.Cleanup(func() { deletePrefix(t, c, env.Prefix()) })

	const planted = "evidence-test-producer"
	var plantedAt verify.Copy
	r := &Runner{Env: env, Log: log, WorkerExe: bin, WorkerArgs: []string{"-log-level", "info"}, WorkerStderr: io.Discard}
	r.BeforeVerify = func(ctx context.Context, job Job) error {
		recs, err := readback.ReadCommittedWith(ctx, env.Brokers, env.opts, job.Output)
		if err != nil {
			return err
		}
		require.NotEmpty(t, recs)
		again := recs[len(recs)/2]
		cl := c.Client(t, kgo.TransactionalID(planted))
		require.NoError(t, cl.BeginTransaction())
		copied := &kgo.Record{Topic: again.Topic, Partition: again.Partition, Key: again.Key, Value: again.Value}
		if err := cl.ProduceSync(ctx, copied).FirstErr(); err != nil {
			return err
		}
		plantedAt = verify.Copy{Topic: copied.Topic, Partition: copied.Partition, Offset: copied.Offset,
			ProducerID: copied.ProducerID, ProducerEpoch: copied.ProducerEpoch}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			return err
		}
		// On Kafka the commit's markers are written after EndTxn returns:
		// the copy is read_committed only once its partition's last
		// stable offset has passed it, which the verification must see.
		adm := kadm.NewClient(cl)
		require.Eventually(t, func() bool {
			lso, err := adm.ListCommittedOffsets(ctx, copied.Topic)
			o, ok := lso.Lookup(copied.Topic, copied.Partition)
			return err == nil && ok && o.Err == nil && o.Offset > copied.Offset
		}, 30*time.Second, 20*time.Millisecond, "the planted copy never became read_committed")
		return nil
	}
	cfg := Default()
	cfg.Modes, cfg.Count, cfg.Messages, cfg.Sessions, cfg.Partitions = []Mode{ModeSession}, 1, 2000, 50, 3
	cfg.Workers, cfg.Timeout = 2, time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rs, err := r.Run(ctx, cfg)
	require.NoError(t, err)
	require.Len(t, rs, 1)
	res := rs[0]
	require.Equal(t, VerdictFail, res.Verdict, "%+v", res)
	require.Equal(t, 1, res.Duplicates)
	require.Contains(t, res.Failure, "first duplicate: input", "the FAIL names its record")

	ev := res.Evidence
	require.NotNil(t, ev)
	require.Equal(t, env.Prefix(), ev.Prefix)
	require.True(t, ev.Kept)
	require.True(t, ev.ReadsAgree, "second read: %s", ev.SecondRead)
	require.Nil(t, ev.FirstLost)
	require.NotNil(t, ev.FirstDuplicate)
	copies := ev.FirstDuplicate.Copies
	require.Len(t, copies, 2)
	require.Equal(t, plantedAt, copies[1].Copy, "the planted copy comes second in its partition")
	require.Equal(t, planted, copies[1].TransactionalID)
	require.True(t, strings.HasPrefix(copies[0].TransactionalID, env.Prefix()), "the processor's copy names its producer: %+v", copies[0])
	require.Contains(t, res.Failure, fmt.Sprintf("first duplicate: input %d, again at %s", ev.FirstDuplicate.Input, plantedAt))

	for _, w := range []string{"w0", "w1"} {
		b, err := os.ReadFile(filepath.Join(ev.WorkerLogs, w+".log"))
		require.NoError(t, err, "the failed run's worker logs are kept")
		require.Contains(t, string(b), "eosbench: worker "+w+" started")
	}
	require.NoError(t, os.RemoveAll(ev.WorkerLogs))

	// Close keeps the failed run's topics, -keep or not.
	env.Close()
	ts, err := kadm.NewClient(c.Client(t)).ListTopics(ctx)
	require.NoError(t, err)
	for _, topic := range []string{copies[0].Topic, env.Name("default-in")} {
		require.True(t, ts.Has(topic), "topic %s kept", topic)
	}

	var sb strings.Builder
	writeEvidence(&sb, "onceflow-session", ev)
	require.Contains(t, sb.String(), "prefix "+env.Prefix())
	require.Contains(t, sb.String(), "transactional ID "+planted)
}

// deletePrefix deletes the topics and groups named with prefix.
func deletePrefix(t *testing.T, c *kafkatest.Cluster, prefix string) {
	adm := kadm.NewClient(c.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ours := func(names []string) []string {
		return slices.DeleteFunc(names, func(n string) bool { return !strings.HasPrefix(n, prefix) })
	}
	if ts, err := adm.ListTopics(ctx); err == nil {
		if del := ours(ts.Names()); len(del) > 0 {
			_, _ = adm.DeleteTopics(ctx, del...)
		}
	}
	if gs, err := adm.ListGroups(ctx); err == nil {
		if del := ours(gs.Groups()); len(del) > 0 {
			_, _ = adm.DeleteGroups(ctx, del...)
		}
	}
}
