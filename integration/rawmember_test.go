package integration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/internal/kafkatest"
)

// rawMember and its helpers drive the coordinator conformance tests
// (groupcoord_test.go).

const rawProtocolType = "onceflow-conformance" // not "consumer": no subscription metadata is parsed

// rawMember is one static member speaking the classic group protocol by
// hand over its own client (its own TCP connections).
type rawMember struct {
	t        *testing.T
	cl       *kgo.Client
	group    string
	instance string
	session  time.Duration
	rebal    time.Duration
	beat     time.Duration // heartbeat interval of live

	mu       sync.Mutex
	memberID string
	gen      int32
	dropped  int // UNKNOWN_MEMBER_ID answers: the coordinator dropped this live member
}

func newRawMember(t *testing.T, c *kafkatest.Cluster, group, instance string, session, rebal time.Duration) *rawMember {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers...))
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	t.Cleanup(cl.Close)
	return &rawMember{t: t, cl: cl, group: group, instance: instance, session: session, rebal: rebal, beat: session / 3}
}

// join sends one JoinGroup and waits for its answer.
func (m *rawMember) join(ctx context.Context) (*kmsg.JoinGroupResponse, error) {
	m.mu.Lock()
	req := kmsg.NewPtrJoinGroupRequest()
	req.Group = m.group
	req.MemberID = m.memberID
	req.InstanceID = kmsg.StringPtr(m.instance)
	req.SessionTimeoutMillis = int32(m.session.Milliseconds())
	req.RebalanceTimeoutMillis = int32(m.rebal.Milliseconds())
	req.ProtocolType = rawProtocolType
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name = "p"
	req.Protocols = append(req.Protocols, p)
	m.mu.Unlock()
	resp, err := req.RequestWith(ctx, m.cl)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return resp, err
	}
	m.mu.Lock()
	m.memberID, m.gen = resp.MemberID, resp.Generation
	m.mu.Unlock()
	return resp, nil
}

// sync sends SyncGroup; a leader hands every member an empty assignment.
func (m *rawMember) sync(ctx context.Context, jr *kmsg.JoinGroupResponse) error {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Group = m.group
	req.Generation = jr.Generation
	req.MemberID = jr.MemberID
	req.InstanceID = kmsg.StringPtr(m.instance)
	req.ProtocolType = kmsg.StringPtr(rawProtocolType)
	req.Protocol = jr.Protocol
	if jr.LeaderID == jr.MemberID {
		for _, mm := range jr.Members {
			a := kmsg.NewSyncGroupRequestGroupAssignment()
			a.MemberID = mm.MemberID
			req.GroupAssignment = append(req.GroupAssignment, a)
		}
	}
	resp, err := req.RequestWith(ctx, m.cl)
	if err != nil {
		return err
	}
	return kerr.ErrorForCode(resp.ErrorCode)
}

// heartbeat sends one Heartbeat with the current member ID and generation.
func (m *rawMember) heartbeat(ctx context.Context) error {
	m.mu.Lock()
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.MemberID, req.Generation = m.group, m.memberID, m.gen
	req.InstanceID = kmsg.StringPtr(m.instance)
	m.mu.Unlock()
	resp, err := req.RequestWith(ctx, m.cl)
	if err != nil {
		return err
	}
	return kerr.ErrorForCode(resp.ErrorCode)
}

// forget drops the member ID after UNKNOWN_MEMBER_ID and counts it.
func (m *rawMember) forget() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.memberID, m.gen = "", 0
	m.dropped++
}

// drops reports how often the coordinator dropped this member.
func (m *rawMember) drops() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dropped
}

// joinSync joins and syncs until the member is in a stable generation.
func (m *rawMember) joinSync(ctx context.Context) error {
	for ctx.Err() == nil {
		jr, err := m.join(ctx)
		if errors.Is(err, kerr.UnknownMemberID) {
			m.forget() // like a client: join again as a new member
			continue
		}
		if err != nil {
			return fmt.Errorf("%s join: %w", m.instance, err)
		}
		err = m.sync(ctx, jr)
		if err == nil {
			return nil
		}
		if errors.Is(err, kerr.UnknownMemberID) {
			m.forget()
			continue
		}
		if !errors.Is(err, kerr.RebalanceInProgress) {
			return fmt.Errorf("%s sync: %w", m.instance, err)
		}
	}
	return ctx.Err()
}

// live keeps the member in the group like a healthy consumer: heartbeats
// every beat and rejoins when a rebalance starts. It returns when ctx
// ends (nil) or on an unexpected error.
func (m *rawMember) live(ctx context.Context) error {
	if err := m.joinSync(ctx); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(m.beat):
		}
		err := m.heartbeat(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err == nil:
		case errors.Is(err, kerr.UnknownMemberID):
			m.forget()
			fallthrough
		case errors.Is(err, kerr.RebalanceInProgress), errors.Is(err, kerr.IllegalGeneration):
			if err := m.joinSync(ctx); err != nil && ctx.Err() == nil {
				return err
			}
		default:
			return fmt.Errorf("%s heartbeat: %w", m.instance, err)
		}
	}
}

// describe returns the group's state and its members' instance IDs.
func describe(t *testing.T, c *kafkatest.Cluster, group string) (string, []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	gs, err := c.Admin.DescribeGroups(ctx, group)
	if err != nil {
		t.Fatalf("describe %s: %v", group, err)
	}
	g := gs[group]
	var ids []string
	for _, mm := range g.Members {
		if mm.InstanceID != nil {
			ids = append(ids, *mm.InstanceID)
		}
	}
	slices.Sort(ids)
	return g.State, ids
}

// waitGroup polls DescribeGroups until the group is Stable with exactly
// want as members, or d passes; it returns the last state seen.
func waitGroup(t *testing.T, c *kafkatest.Cluster, group string, want []string, d time.Duration) (bool, string, []string) {
	deadline := time.Now().Add(d)
	for {
		state, ids := describe(t, c, group)
		if state == "Stable" && slices.Equal(ids, want) {
			return true, state, ids
		}
		if time.Now().After(deadline) {
			return false, state, ids
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// runLive runs m.live in the background until the returned stop is called;
// stop reports its error.
func runLive(t *testing.T, m *rawMember) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.live(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("live member: %v", err)
		}
	}
}
