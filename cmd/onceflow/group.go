package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// member is a group member as describe and reset see it, under either
// group protocol.
type member struct {
	MemberID   string             `json:"member_id"`
	InstanceID string             `json:"instance_id,omitempty"`
	ClientID   string             `json:"client_id,omitempty"`
	Host       string             `json:"host,omitempty"`
	Assigned   map[string][]int32 `json:"assigned,omitempty"`
}

// groupInfo is what the coordinator says of a group.
type groupInfo struct {
	Protocol string   `json:"protocol"` // classic or consumer
	State    string   `json:"state"`
	Members  []member `json:"members"`
}

// describeGroup finds the group and its members: ListGroups says whether it
// exists and under which protocol (a group Kafka does not list has no
// members and no committed offsets), then DescribeGroups (classic) or
// ConsumerGroupDescribe (KIP-848) its members.
func describeGroup(ctx context.Context, adm admin, group string) (groupInfo, error) {
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		return groupInfo{}, fmt.Errorf("listing groups: %w", err)
	}
	lg, ok := listed[group]
	if !ok {
		return groupInfo{}, fmt.Errorf("%w %q: the cluster lists no such group (it has no members and no committed offsets)", errUnknownGroup, group)
	}
	g := groupInfo{Protocol: "classic", State: lg.State}
	if lg.GroupType == "consumer" {
		g.Protocol = "consumer"
	}
	if g.Protocol == "classic" {
		described, err := adm.DescribeGroups(ctx, group)
		if err != nil {
			return g, fmt.Errorf("describing group %s: %w", group, err)
		}
		d := described[group]
		if d.Err != nil {
			// A broker that does not say the type (ListGroups before
			// v5): a KIP-848 group is not described by
			// DescribeGroups.
			if lg.GroupType == "" {
				if cg, cerr := describeConsumerGroup(ctx, adm, group); cerr == nil {
					return cg, nil
				}
			}
			return g, fmt.Errorf("describing group %s: %w", group, d.Err)
		}
		g.State = d.State
		for _, m := range d.Members {
			mm := member{MemberID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost, Assigned: map[string][]int32{}}
			if m.InstanceID != nil {
				mm.InstanceID = *m.InstanceID
			}
			if a, ok := m.Assigned.AsConsumer(); ok {
				for _, t := range a.Topics {
					mm.Assigned[t.Topic] = slices.Sorted(slices.Values(t.Partitions))
				}
			}
			g.Members = append(g.Members, mm)
		}
		return g, nil
	}
	return describeConsumerGroup(ctx, adm, group)
}

// describeConsumerGroup describes a KIP-848 group with a raw
// ConsumerGroupDescribe: assignments name topics by ID, and a broker may
// leave the names out (kfake does), so they are looked up.
func describeConsumerGroup(ctx context.Context, adm admin, group string) (groupInfo, error) {
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	shards := adm.cl.RequestSharded(ctx, req)
	for _, sh := range shards {
		if sh.Err != nil {
			return groupInfo{}, fmt.Errorf("describing consumer group %s: %w", group, sh.Err)
		}
		resp := sh.Resp.(*kmsg.ConsumerGroupDescribeResponse)
		for _, d := range resp.Groups {
			if d.Group != group {
				continue
			}
			if err := kerr.ErrorForCode(d.ErrorCode); err != nil {
				return groupInfo{}, fmt.Errorf("describing consumer group %s: %w", group, err)
			}
			names := map[[16]byte]string{}
			if ts, err := adm.ListTopics(ctx); err == nil {
				for _, td := range ts {
					names[td.ID] = td.Topic
				}
			}
			g := groupInfo{Protocol: "consumer", State: d.State}
			for _, m := range d.Members {
				mm := member{MemberID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost, Assigned: map[string][]int32{}}
				if m.InstanceID != nil {
					mm.InstanceID = *m.InstanceID
				}
				for _, tp := range m.Assignment.TopicPartitions {
					name := tp.Topic
					if n, ok := names[tp.TopicID]; ok {
						name = n
					}
					if name == "" {
						continue
					}
					mm.Assigned[name] = slices.Sorted(slices.Values(tp.Partitions))
				}
				g.Members = append(g.Members, mm)
			}
			return g, nil
		}
	}
	return groupInfo{}, fmt.Errorf("describing consumer group %s: no answer", group)
}

// owner returns the member assigned a partition.
func (g groupInfo) owner(topic string, partition int32) (member, bool) {
	for _, m := range g.Members {
		if slices.Contains(m.Assigned[topic], partition) {
			return m, true
		}
	}
	return member{}, false
}

// active lists the group's members for an error message.
func (g groupInfo) active() string {
	var parts []string
	for _, m := range g.Members {
		s := m.MemberID
		if m.InstanceID != "" {
			s = "instance " + m.InstanceID + " (" + m.MemberID + ")"
		}
		if m.Host != "" {
			s += " on " + m.Host
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}
