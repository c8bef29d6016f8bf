package integration

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/onceflow/onceflow/txn"
)

// rejoinProbe puts the judgement a rebuilt worker meets during a lost
// quorum to the real group, on demand rather than by chance (the workers
// of TestClusterQuorumLost met it in 1 CI run of 6, 2026-12-07). A
// process's Session joins a group whose coordinator is the node that
// stays up; with the quorum lost it closes and a new Session of the same
// process (same instance ID and incarnation) joins. The coordinator replaces the static member, cannot
// write the group, and reverts the replacement: the group names the
// closed Session's member again. FENCED_INSTANCE_ID met then is this
// process's own doing, and must not be judged a newer process (the
// worker stopped so).
type rejoinProbe struct {
	admin *kadm.Client
	cfg   txn.Options
	first *txn.Session
	id    string // first's member ID
}

// startRejoinProbe joins the probe's first Session to a group coordinated
// by survivor; nil (logged) if no group name found lands there.
func startRejoinProbe(t *testing.T, e *env, survivor int32) *rejoinProbe {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	group := ""
	for i := range 64 {
		g := fmt.Sprintf("%s-probe-%d", e.group, i)
		var node int32 = -1
		e.c.Admin.FindGroupCoordinators(ctx, g).Each(func(r kadm.FindCoordinatorResponse) {
			if r.Err == nil {
				node = r.NodeID
			}
		})
		if node == survivor {
			group = g
			break
		}
	}
	if group == "" {
		t.Logf("rejoin probe: no group of 64 is coordinated by node %d; not run", survivor)
		return nil
	}
	p := &rejoinProbe{admin: e.c.Admin, cfg: txn.Options{
		Brokers: e.c.Brokers, Group: group, InstanceID: "probe", Topics: []string{e.in},
		Incarnation: time.Now().UnixNano(), ClientOpts: e.c.ClientOpts,
	}}
	s, err := txn.NewSession(p.cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.first = s
	for p.id == "" && ctx.Err() == nil {
		pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		s.Poll(pctx, 1)
		pcancel()
		p.id, _ = s.Client().GroupMetadata()
	}
	if p.id == "" {
		t.Fatalf("rejoin probe: the first Session did not join group %s in 30s", group)
	}
	return p
}

// holder is the member ID the group names for the probe's instance ID.
func (p *rejoinProbe) holder(ctx context.Context) string {
	gs, err := p.admin.DescribeGroups(ctx, p.cfg.Group)
	if err != nil {
		return ""
	}
	for _, g := range gs {
		for _, m := range g.Members {
			if m.InstanceID != nil && *m.InstanceID == p.cfg.InstanceID {
				return m.MemberID
			}
		}
	}
	return ""
}

// check runs with the quorum lost: the first Session closes, a second of
// the same process joins, and once the group has reverted the second's
// replacement of the first, FENCED_INSTANCE_ID must not be judged a newer
// process's.
func (p *rejoinProbe) check(t *testing.T) {
	t.Helper()
	p.first.Close()
	second, err := txn.NewSession(p.cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	polls := make(chan struct{})
	go func() { // joins go on while the client polls
		defer close(polls)
		for ctx.Err() == nil {
			pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
			second.Poll(pctx, 1)
			pcancel()
		}
	}()
	defer func() { cancel(); <-polls }()
	var seen []string // the holders named, each change once
	reverted := func() bool {
		i := slices.IndexFunc(seen, func(m string) bool { return m != p.id })
		return i >= 0 && slices.Contains(seen[i+1:], p.id)
	}
	for ctx.Err() == nil && !reverted() {
		if h := p.holder(ctx); h != "" && (len(seen) == 0 || seen[len(seen)-1] != h) {
			seen = append(seen, h)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if ctx.Err() != nil {
		t.Logf("rejoin probe: the group never named the closed Session's member again after another (holders %v); not judged", seen)
		return
	}
	judged := second.CheckFenced(context.Background(), "poll", kerr.FencedInstanceID)
	t.Logf("rejoin probe: holders %v (first %s); FENCED_INSTANCE_ID judged: %v", seen, p.id, judged)
	if judged != nil && judged.Class == txn.ClassFenced {
		t.Errorf("rejoin probe: FENCED_INSTANCE_ID from this process's own reverted rejoin judged fenced (%v): a worker would stop", judged)
	}
}
