package txncore

import (
	"context"
	"testing"
	"time"

	"github.com/onceflow/onceflow/internal/kafkatest"
)

// TestCloseAndLeave: a Session closed with CloseAndLeave is gone from the
// group (its partitions free for the other members at once), under both
// group protocols; one closed with Close stays a member (classic: until
// its session ends; consumer protocol: parked at epoch -2), for a restart
// with its instance ID. Without the leave a static member is never
// removed before its session ends: under classic franz-go sends no
// LeaveGroup for it, under the consumer protocol only the temporary -2.
func TestCloseAndLeave(t *testing.T) {
	kafkatest.EachMode(t, func(t *testing.T, c *kafkatest.Cluster) {
		for _, leave := range []bool{false, true} {
			name := "close"
			if leave {
				name = "close-and-leave"
			}
			t.Run(name, func(t *testing.T) {
				topic := c.CreateTopic(t, "in", 2, nil)
				group := kafkatest.Name(t, "g")
				cfg := ringConfig(c, group, topic, 1)
				cfg.SessionTimeout = 45 * time.Second
				if cfg.GroupProtocol == GroupProtocolConsumer {
					c.SetConsumerGroupTimeouts(t, group, 45*time.Second, 500*time.Millisecond)
				}
				s, err := NewSession(cfg)
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if err := s.Claim(ctx); err != nil {
					t.Fatal(err)
				}
				member := joined(t, func(ctx context.Context) { s.Poll(ctx, 0); s.AllowRebalance() }, s.Client())
				// Wait until the group reports the member (a KIP-848
				// member's first heartbeat answers before the group
				// is described with it on some brokers).
				for ctx.Err() == nil && groupHolder(ctx, t, c, cfg, group) != member {
					pctx, pcancel := context.WithTimeout(ctx, 100*time.Millisecond)
					s.Poll(pctx, 0)
					pcancel()
					s.AllowRebalance()
				}
				if leave {
					lctx, lcancel := context.WithTimeout(ctx, 5*time.Second)
					err = s.CloseAndLeave(lctx)
					lcancel()
					if err != nil {
						t.Fatalf("CloseAndLeave: %v", err)
					}
				} else {
					s.Close()
				}
				holder := groupHolder(ctx, t, c, cfg, group)
				switch {
				case leave && holder != "":
					t.Errorf("after CloseAndLeave the group still has member %s (ours %s) for the instance ID", holder, member)
				case !leave && holder != member:
					t.Errorf("after Close the group has member %q for the instance ID, want ours (%s) kept for a restart", holder, member)
				}
			})
		}
	}, kafkatest.KeepParkedStaticMembers())
}

// groupHolder returns the member holding the Session's instance ID in
// the group ("" if none), under the Session's protocol.
func groupHolder(ctx context.Context, t *testing.T, c *kafkatest.Cluster, cfg Options, group string) string {
	t.Helper()
	if cfg.GroupProtocol == GroupProtocolConsumer {
		h, _, err := holder848(ctx, c.Client(t), group, cfg.InstanceID)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	gs, err := c.Admin.DescribeGroups(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range gs[group].Members {
		if m.InstanceID != nil && *m.InstanceID == cfg.InstanceID {
			return m.MemberID
		}
	}
	return ""
}
