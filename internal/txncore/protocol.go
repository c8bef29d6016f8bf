package txncore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// GroupProtocol is the consumer group protocol, the Java client's
// group.protocol.
type GroupProtocol string

const (
	// GroupProtocolClassic is the client-driven JoinGroup/SyncGroup
	// protocol (cooperative-sticky assignment). Any Kafka version
	// onceflow supports.
	GroupProtocolClassic GroupProtocol = "classic"
	// GroupProtocolConsumer is KIP-848's protocol: the broker assigns
	// partitions incrementally (its "uniform" assignor) and members that
	// keep their partitions never stop for a rebalance. Kafka 4.0+ with
	// the consumer protocol enabled (group.coordinator.rebalance.protocols
	// includes consumer, the default); franz-go recommends 4.3+. Static
	// membership changes meaning: the first holder of an instance ID
	// keeps it until it leaves or its session expires, so a replacement
	// started after a crash waits out the broker's
	// group.consumer.session.timeout.ms (45s by default), and a returning
	// zombie cannot displace a live member. The processes with one
	// instance ID are ordered by their claims of the transactional ID
	// (claim.go): an older holder yields to a newer process that waits
	// for the ID, and a process that never held its instance ID and finds
	// it held by a newer claimant, or (without claims) for longer than a
	// dead member's session can last (twice the group's
	// consumer.session.timeout.ms, read with DescribeConfigs; 45s if that
	// is refused), stops with ErrFenced. A process whose own member
	// expired (it was stopped past its session) gives a newer process
	// waiting for the ID time to take it before it rejoins: see
	// Instance.YieldToSuccessor.
	GroupProtocolConsumer GroupProtocol = "consumer"
)

func (p GroupProtocol) valid() bool {
	return p == "" || p == GroupProtocolClassic || p == GroupProtocolConsumer
}

// groupOpts are the client options that select the protocol.
func (c Options) groupOpts() []kgo.Opt {
	if c.GroupProtocol == GroupProtocolConsumer {
		// franz-go runs KIP-848 only with its own (unwrapped) sticky or
		// range balancer first: the incarnation trailer rides on JoinGroup
		// metadata, which KIP-848 does not have, and the broker orders
		// static members itself (see judgeHolder848).
		return []kgo.Opt{kgo.ServerSideBalancer(), kgo.Balancers(kgo.CooperativeStickyBalancer())}
	}
	if c.Incarnation > 0 {
		// franz-go's default balancer, with the incarnation appended;
		// before ClientOpts, so that a user's kgo.Balancers wins.
		return []kgo.Opt{kgo.Balancers(incarnationBalancer{kgo.CooperativeStickyBalancer(), incarnationTrailer(c.Incarnation)})}
	}
	return nil
}

// CheckGroupProtocol returns an error matching ErrGroupProtocolUnsupported
// if the session asked for GroupProtocolConsumer and a broker does not
// offer KIP-848's ConsumerGroupHeartbeat v1: franz-go would fall back to
// the classic protocol without a word. A broker that offers it but has the
// protocol disabled refuses the first heartbeat, and franz-go falls back
// then too: callers catch that by the JoinGroup it sends (the processor
// does, with a kgo.HookBrokerWrite).
func (s *Session) CheckGroupProtocol(ctx context.Context) error {
	if s.cfg.GroupProtocol != GroupProtocolConsumer {
		return nil
	}
	vs, err := kadm.NewClient(s.cl).ApiVersions(ctx)
	if err != nil {
		return fmt.Errorf("txn: checking the brokers for the consumer group protocol: %w", err)
	}
	for _, v := range vs.Sorted() {
		if v.Err != nil {
			return fmt.Errorf("txn: checking broker %d for the consumer group protocol: %w", v.NodeID, v.Err)
		}
		if max, ok := v.KeyMaxVersion(int16(kmsg.ConsumerGroupHeartbeat)); !ok || max < 1 {
			return fmt.Errorf("%w: broker %d does not offer ConsumerGroupHeartbeat v1 (Kafka 4.0+ with the consumer protocol enabled)",
				ErrGroupProtocolUnsupported, v.NodeID)
		}
	}
	return nil
}

// holderWait is what checkReplaced keeps, across calls, about the member
// holding the instance ID that a process which never held it waits for
// (Instance.waiting). The zero value is ready to use.
type holderWait struct {
	holder   string        // the first holder met
	since    time.Time     // when it was met, or when the coordinator last moved
	patience time.Duration // how long a dead holder can hold the ID; 0 until read
	// coordinator is the group coordinator's node at the last check
	// (valid with knowCoordinator): a coordinator that moved loaded the
	// group afresh and restarted every member's session timer.
	coordinator     int32
	knowCoordinator bool
}

// checkReplaced is Instance.Replaced: ours are the member IDs this
// process held the ID under, in earlier Sessions too; w keeps the holder
// this process has been waiting for, and now is the caller's clock.
func (s *Session) checkReplaced(ctx context.Context, now time.Time, op string, err error, ours []string, w *holderWait) *Error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	holder, ok := s.holder848(ctx)
	if !ok {
		return nil
	}
	if w.patience == 0 {
		w.patience = 2 * s.sessionTimeout848(ctx)
	}
	coordinator := int32(-1)
	if r, ok := kadm.NewClient(s.cl).FindGroupCoordinators(ctx, s.cfg.Group)[s.cfg.Group]; ok && r.Err == nil {
		coordinator = r.NodeID
	}
	standing := func() claimState { return s.standing(ctx) }
	if why := replaced(holder, coordinator, ours, w, now, standing); why != "" {
		return &Error{ClassFenced, op, fmt.Errorf("%s: %w", why, err)}
	}
	return nil
}

// replaced decides whether the holder of our instance ID replaced this
// process, and says why ("" to wait). A holder among ours is this
// process's own earlier client, closed without a leave (a rebuild after a
// network failure): wait for its session to expire. Another holder, once
// this process held the ID, took it after this process was expelled:
// replaced. A process that never held the ID waits for the first holder it
// meets: a crashed predecessor whose session has not expired, or a live
// process with the same ID. A dead holder is gone within the group's
// session timeout, twice that if the coordinator moved and restarted its
// timer (w.patience). A holder that outlives the patience, or a new holder
// met while waiting, is alive, and standing (see claim.go) says which
// process is newer: while our claim is the newest, the holder claimed
// before us and yields when it finds out (Instance.Recheck, or its next
// transaction failing fenced), so keep waiting, with the patience
// restarted; otherwise a newer process has the ID: replaced (exactly-once
// holds either way: every takeover bumps the transactional epoch).
// coordinator is the group coordinator's node (-1 if unknown): a
// coordinator that moved since the last check restarts the patience, as
// it restarted the holder's session timer when it loaded the group (a
// dead holder outlived the doubled patience in a soak when the
// coordinator's node restarted while a replacement waited).
func replaced(holder string, coordinator int32, ours []string, w *holderWait, now time.Time, standing func() claimState) string {
	if coordinator >= 0 {
		if w.knowCoordinator && coordinator != w.coordinator && w.holder != "" {
			w.since = now
		}
		w.coordinator, w.knowCoordinator = coordinator, true
	}
	switch {
	case holder == "" || slices.Contains(ours, holder):
		return ""
	case len(ours) > 0:
		return tookAfterExpelled(holder)
	case w.holder == "":
		w.holder, w.since = holder, now
		return ""
	case (holder != w.holder || now.Sub(w.since) > w.patience) && standing() == claimNewest:
		w.holder, w.since = holder, now
		return ""
	case holder != w.holder:
		return fmt.Sprintf("member %s took the instance ID first, after %s released it", holder, w.holder)
	case now.Sub(w.since) > w.patience:
		return fmt.Sprintf("member %s has held the instance ID for %v, longer than a dead member's session lasts (%v): a live process has it", holder, now.Sub(w.since).Round(time.Millisecond), w.patience)
	}
	return ""
}

func tookAfterExpelled(holder string) string {
	return fmt.Sprintf("member %s took this process's instance ID after it was expelled", holder)
}

// sessionTimeout848 reads the group's consumer.session.timeout.ms (which
// falls back to the brokers' group.consumer.session.timeout.ms); Kafka's
// default, 45s, if it cannot be read.
func (s *Session) sessionTimeout848(ctx context.Context) time.Duration {
	req := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, s.cfg.Group
	res.ConfigNames = []string{"consumer.session.timeout.ms"}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, s.cl)
	if err != nil {
		return defaultSessionTimeout
	}
	for _, r := range resp.Resources {
		if r.ErrorCode != 0 {
			continue
		}
		for _, c := range r.Configs {
			if c.Value == nil {
				continue
			}
			if ms, err := strconv.ParseInt(*c.Value, 10, 64); err == nil && ms > 0 {
				return time.Duration(ms) * time.Millisecond
			}
		}
	}
	return defaultSessionTimeout
}

// holder848 returns the member ID holding our instance ID ("" if none;
// false if the group could not be asked).
func (s *Session) holder848(ctx context.Context) (string, bool) {
	h, _, err := holder848(ctx, s.cl, s.cfg.Group, s.cfg.InstanceID)
	return h, err == nil
}

// leftStaticEpoch is the member epoch of a static member that left
// (Kafka's LEAVE_GROUP_STATIC_MEMBER_EPOCH): the group keeps it until its
// session ends, but any member with its instance ID may replace it.
const leftStaticEpoch = -2

// holder848 is Session.holder848 on any client, with the holder's member
// epoch. Its error is the request's (the brokers could not be reached) or
// the group's answer (a *kerr.Error).
func holder848(ctx context.Context, cl *kgo.Client, group, instanceID string) (member string, epoch int32, err error) {
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return "", 0, err
	}
	for _, g := range resp.Groups {
		if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
			return "", 0, err
		}
		for _, m := range g.Members {
			if m.InstanceID != nil && *m.InstanceID == instanceID {
				return m.MemberID, m.MemberEpoch, nil
			}
		}
	}
	return "", 0, nil
}

// SuccessorGrace is how long a yield (Instance.YieldToSuccessor) waits for a newer process
// to take a free instance ID: franz-go retries a join refused with
// UNRELEASED_INSTANCE_ID within its retry backoff (kgo.RetryBackoffFn),
// 5s at most by default.
const SuccessorGrace = 6 * time.Second

// maxOwnMemberWait bounds yieldToSuccessor's wait for this process's own
// earlier member to leave the group: twice the longest session timeout a
// Kafka broker allows by default (group.consumer.max.session.timeout.ms,
// 60s).
const maxOwnMemberWait = 2 * time.Minute

// yieldToSuccessor waits on cl, after a Session failed or its member was
// lost, for a newer process to take the instance ID, in a process that
// held it under the member IDs ours. The broker gives a free instance ID
// to whoever asks first, so a process whose member expired while it was
// stopped would, by rejoining at once, win the ID from a newer process
// that has been waiting for it (refused UNRELEASED_INSTANCE_ID while the
// member that replaced this one held it), and that newer process would
// stop; a rebuild's claim (claim.go) would also supersede the newer one's.
// So when nobody holds the ID, or only this process's earlier member that
// left (a static member's leave lets any member take its ID), this waits
// up to grace for another member to take it; while this process's
// earlier member still holds it without having left (its client closed
// without a leave), it first waits for that member's session to end (up
// to maxOwnMemberWait). It returns a ClassFenced *Error if another member
// holds the ID or takes it; nil to go on: nobody came, the group refused
// to be described, or ctx is done. While the brokers cannot be reached (a
// network partition that made the last Session fail) it keeps asking: the
// next Session could not join before then either. live is the member the
// client rejoins under, if the group kept it ("" for a new client); after
// is the caller's clock.
func yieldToSuccessor(ctx context.Context, cl *kgo.Client, cfg Options, ours []string, live string, grace time.Duration, after func(time.Duration) <-chan time.Time) *Error {
	const every = 250 * time.Millisecond
	var waited, ownFor time.Duration // since the ID was first seen free; our member seen holding it
	for {
		qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		holder, epoch, err := holder848(qctx, cl, cfg.Group, cfg.InstanceID)
		cancel()
		var refused *kerr.Error
		switch {
		case errors.As(err, &refused):
			return nil // the group would not say: rebuild as before
		case err == nil:
			if judgeHolder848(holder, ours...) == holderNewer {
				return &Error{ClassFenced, "rejoin", errors.New(tookAfterExpelled(holder))}
			}
			switch {
			case holder != "" && holder == live && epoch != leftStaticEpoch:
				// The group kept the client's member: the ID was
				// never free. A newer process that waits for it
				// superseded the claim, which Instance.Recheck finds after
				// the rejoin.
				return nil
			case holder != "" && epoch != leftStaticEpoch:
				// Our earlier member, still in the group (its
				// client closed without a leave), keeps the ID from
				// everyone until its session ends. Wait that out
				// rather than rebuild at once: the rebuild would
				// claim the transactional ID anew and so supersede a
				// newer process that waits for the ID (claim.go),
				// and its join could not come sooner anyway.
				if ownFor += every; ownFor >= maxOwnMemberWait {
					return nil
				}
			case waited >= grace:
				return nil
			default:
				waited += every // free, or our member left: anyone may take it
			}
		}
		// Unreachable, our member not gone yet, or the ID free for
		// the taking: ask again.
		select {
		case <-ctx.Done():
			return nil
		case <-after(every):
		}
	}
}

// judgeHolder848 is judgeHolder for a consumer-protocol group, which
// DescribeGroups does not describe: holderNewer if the holder of our
// instance ID is a member other than ours (known, non-empty ones),
// holderOurs if it is one of ours. The broker never lets a second member
// take an instance ID its holder has not released, so a holder under
// another member ID is newer: it took the ID after ours was released or
// expired. (Classic groups need incarnations for this, see incarnation.go.)
func judgeHolder848(h string, ours ...string) holder {
	ours = slices.DeleteFunc(slices.Clone(ours), func(m string) bool { return m == "" })
	switch {
	case h == "" || len(ours) == 0:
		return holderUnknown
	case slices.Contains(ours, h):
		return holderOurs
	}
	return holderNewer
}
