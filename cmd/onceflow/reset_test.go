package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/onceflow/onceflow/internal/kafkatest"
	"github.com/onceflow/onceflow/internal/offsetmeta"
	"github.com/onceflow/onceflow/processor"
)

func resetJSON(t *testing.T, c *kafkatest.Cluster, group string, args ...string) (int, resetPlan, string) {
	t.Helper()
	st, out, errOut := cmd(t, append(append([]string{"reset", "-json"}, clusterArgs(c, group)...), args...)...)
	var plan resetPlan
	if out != "" {
		require.NoError(t, json.Unmarshal([]byte(out), &plan), out)
	}
	return st, plan, errOut
}

// TestReset: reset prints its plan and changes nothing without -yes; with
// it, it moves the offsets (earliest, latest, an offset, clamped to the
// log, a time) and clears the finished-records map; it refuses a group
// with a live member, and warns of the state and dedupe changelogs it
// does not rewind.
func TestReset(t *testing.T) {
	c := kafkatest.New(t)
	a := newApp(t, c, 1)
	a.produce(t, 0, 40)
	a.runBounded(t, "i1", processor.WithStateStore(t.TempDir(), nil), processor.WithDedupe(t.TempDir(), nil))
	at, _ := a.committed(t, 0)
	require.Equal(t, int64(40), at)
	a.commit(t, 0, 30, offsetmeta.Encode(30, []offsetmeta.Range{{Start: 32, End: 35}}))

	st, plan, errOut := resetJSON(t, c, a.group, "-to", "earliest")
	require.Equal(t, exitOK, st, errOut)
	require.False(t, plan.Applied)
	require.Equal(t, []resetRow{{Topic: a.in, Partition: 0, Current: 30, FinishedRecords: 3, Target: 0}}, plan.Rows)
	require.Len(t, plan.Warnings, 2, "state and dedupe changelogs: %v", plan.Warnings)
	at, meta := a.committed(t, 0)
	require.Equal(t, int64(30), at, "reset without -yes changed the offsets")
	require.NotEmpty(t, meta)

	st, plan, errOut = resetJSON(t, c, a.group, "-to", "earliest", "-yes")
	require.Equal(t, exitOK, st, errOut)
	require.True(t, plan.Applied)
	at, meta = a.committed(t, 0)
	require.Equal(t, int64(0), at)
	require.Empty(t, meta, "the finished-records map survived the reset")

	st, plan, _ = resetJSON(t, c, a.group, "-to", "latest", "-yes")
	require.Equal(t, exitOK, st)
	require.Equal(t, int64(40), plan.Rows[0].Target)
	st, plan, _ = resetJSON(t, c, a.group, "-to", "7", "-yes")
	require.Equal(t, exitOK, st)
	require.Equal(t, int64(7), plan.Rows[0].Target)
	st, plan, _ = resetJSON(t, c, a.group, "-to", "999")
	require.Equal(t, exitOK, st)
	require.Equal(t, int64(40), plan.Rows[0].Target)
	require.Contains(t, plan.Rows[0].Note, "lowered to the last stable offset")
	st, plan, _ = resetJSON(t, c, a.group, "-to", time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	require.Equal(t, exitOK, st)
	require.Equal(t, int64(40), plan.Rows[0].Target, "a time after every record: the end")
	st, plan, _ = resetJSON(t, c, a.group, "-to", "2000-01-01T00:00:00Z")
	require.Equal(t, exitOK, st)
	require.Equal(t, int64(0), plan.Rows[0].Target, "a time before every record: the start")

	st, _, errOut = cmd(t, append([]string{"reset"}, clusterArgs(c, a.group)...)...)
	require.Equal(t, exitUsage, st, errOut)

	// A live member: refused.
	p, err := processor.New(a.opts("i1")...)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() { cancel(); <-done }()
	require.Eventually(t, func() bool { return a.holderCount(t) > 0 }, 30*time.Second, 100*time.Millisecond)
	st, _, errOut = resetJSON(t, c, a.group, "-to", "earliest", "-yes")
	require.Equal(t, exitFail, st)
	require.Contains(t, errOut, "active members")
	require.Contains(t, errOut, "instance i1")
}

func (a *app) holderCount(t *testing.T) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, members, err := a.c.DescribeGroup(ctx, a.group)
	if err != nil {
		return 0
	}
	return len(members)
}
