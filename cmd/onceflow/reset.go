package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/onceflow/onceflow/internal/offsetmeta"
)

// resetRow is one partition of a reset plan.
type resetRow struct {
	Topic           string `json:"topic"`
	Partition       int32  `json:"partition"`
	Current         int64  `json:"current"` // -1: none committed
	FinishedRecords int64  `json:"finished_above_records"`
	Target          int64  `json:"target"`
	Note            string `json:"note,omitempty"`
}

// resetPlan is what reset changes, as printed with -json.
type resetPlan struct {
	Group    string     `json:"group"`
	To       string     `json:"to"`
	Rows     []resetRow `json:"partitions"`
	Warnings []string   `json:"warnings,omitempty"`
	Applied  bool       `json:"applied"`
}

// resetTarget is where -to points.
type resetTarget struct {
	kind   string // earliest, latest, offset, time
	offset int64
	at     time.Time
}

func parseTarget(s string) (resetTarget, error) {
	switch s {
	case "earliest", "latest":
		return resetTarget{kind: s}, nil
	case "":
		return resetTarget{}, fmt.Errorf("-to is required: earliest, latest, an offset or an RFC 3339 time")
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && n >= 0 {
		return resetTarget{kind: "offset", offset: n}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return resetTarget{kind: "time", at: t}, nil
	}
	return resetTarget{}, fmt.Errorf("-to %q: want earliest, latest, an offset (>= 0) or an RFC 3339 time (2026-12-04T10:00:00Z)", s)
}

func runReset(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("onceflow reset", flag.ContinueOnError)
	var c clusterFlags
	c.register(fs)
	to := fs.String("to", "", "where to move the committed offsets: `earliest`, latest (the last stable offset), an offset, or an RFC 3339 time (the first record at or after it)")
	topics := fs.String("topics", "", "reset only these input `topics` (comma-separated; default: every topic the group committed offsets for)")
	yes := fs.Bool("yes", false, "apply the plan (without it reset only prints what it would change)")
	if _, st, ok := parse(fs, args, stderr); !ok {
		return st
	}
	if c.group == "" {
		fmt.Fprintln(stderr, "onceflow reset: -group is required")
		return exitUsage
	}
	target, err := parseTarget(*to)
	if err != nil {
		fmt.Fprintln(stderr, "onceflow reset:", err)
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	adm, closeFn, err := c.connect(ctx)
	if err != nil {
		return fail(stderr, err)
	}
	defer closeFn()
	var only []string
	if *topics != "" {
		only = strings.Split(*topics, ",")
	}
	plan, err := planReset(ctx, adm, c.group, target, *to, only)
	if err != nil {
		return fail(stderr, err)
	}
	if *yes {
		if err := applyReset(ctx, adm, plan); err != nil {
			return fail(stderr, err)
		}
	}
	if c.json {
		if err := printJSON(stdout, plan); err != nil {
			return fail(stderr, err)
		}
		return exitOK
	}
	printPlan(stdout, plan)
	return exitOK
}

// planReset works out the new offsets, refusing a group with members.
func planReset(ctx context.Context, adm admin, group string, target resetTarget, to string, only []string) (*resetPlan, error) {
	g, err := describeGroup(ctx, adm, group)
	if err != nil {
		return nil, err
	}
	if len(g.Members) > 0 {
		return nil, fmt.Errorf("%w: %s has %d (%s); stop every instance first (a crashed one leaves when its session times out)",
			errActiveMembers, group, len(g.Members), g.active())
	}
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return nil, fmt.Errorf("fetching the committed offsets of %s: %w", group, err)
	}
	topics := only
	if len(topics) == 0 {
		for t := range committed {
			topics = append(topics, t)
		}
		slices.Sort(topics)
	}
	if len(topics) == 0 {
		return nil, fmt.Errorf("nothing to reset: %s has no committed offsets; name its input topics with -topics", group)
	}
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("listing start offsets of %v: %w", topics, err)
	}
	lsos, err := adm.ListCommittedOffsets(ctx, topics...)
	if err == nil {
		err = lsos.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("listing last stable offsets of %v: %w", topics, err)
	}
	var at kadm.ListedOffsets
	if target.kind == "time" {
		if at, err = adm.ListOffsetsAfterMilli(ctx, target.at.UnixMilli(), topics...); err == nil {
			err = at.Error()
		}
		if err != nil {
			return nil, fmt.Errorf("listing offsets at %v: %w", target.at, err)
		}
	}
	plan := &resetPlan{Group: group, To: to}
	lsos.Each(func(l kadm.ListedOffset) {
		s, _ := starts.Lookup(l.Topic, l.Partition)
		row := resetRow{Topic: l.Topic, Partition: l.Partition, Current: -1}
		if o, ok := committed.Lookup(l.Topic, l.Partition); ok && o.Err == nil && o.At >= 0 {
			row.Current = o.At
			if done, err := offsetmeta.Decode(o.At, o.Metadata); err == nil {
				for _, r := range done {
					row.FinishedRecords += r.End - r.Start
				}
			}
		}
		switch target.kind {
		case "earliest":
			row.Target = s.Offset
		case "latest":
			row.Target = l.Offset
		case "time":
			a, _ := at.Lookup(l.Topic, l.Partition)
			row.Target = a.Offset
		case "offset":
			row.Target = target.offset
		}
		if row.Target < s.Offset {
			row.Target, row.Note = s.Offset, fmt.Sprintf("raised to the log start %d", s.Offset)
		}
		if row.Target > l.Offset {
			row.Target, row.Note = l.Offset, fmt.Sprintf("lowered to the last stable offset %d", l.Offset)
		}
		plan.Rows = append(plan.Rows, row)
	})
	slices.SortFunc(plan.Rows, func(a, b resetRow) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	plan.Warnings = resetWarnings(ctx, adm, group, topics)
	return plan, nil
}

// resetWarnings names what a reset does not move: the position guard's
// log would override it, and state and dedupe marks stay as they are.
func resetWarnings(ctx context.Context, adm admin, group string, topics []string) []string {
	all, err := adm.ListTopics(ctx)
	if err != nil {
		return []string{fmt.Sprintf("could not list topics to look for the processor's own (%v)", err)}
	}
	var out []string
	for _, t := range topics {
		name := func(suffix string) string { return group + "-" + t + "-" + suffix }
		if all.Has(name("positions")) {
			out = append(out, fmt.Sprintf("%s exists (WithPositionGuard): a restarted processor would resume from it, not from the reset offsets; delete it before restarting", name("positions")))
		}
		if all.Has(name("changelog")) {
			out = append(out, fmt.Sprintf("%s exists (WithStateStore): session state is not rewound; records handled again see the state as it is now", name("changelog")))
		}
		if all.Has(name("dedupe")) {
			out = append(out, fmt.Sprintf("%s exists (WithDedupe): records handled again whose event IDs are still remembered are skipped as duplicates", name("dedupe")))
		}
	}
	return out
}

// applyReset commits the plan's offsets with empty metadata, which clears
// the finished-records maps. The broker refuses a commit without a member
// to a group that has members, so one that joined since planReset makes it
// fail rather than move offsets under it.
func applyReset(ctx context.Context, adm admin, plan *resetPlan) error {
	g, err := describeGroup(ctx, adm, plan.Group)
	if err != nil {
		return err
	}
	if len(g.Members) > 0 {
		return fmt.Errorf("%w: %s has %d (%s); nothing changed", errActiveMembers, plan.Group, len(g.Members), g.active())
	}
	os := kadm.Offsets{}
	for _, r := range plan.Rows {
		os.Add(kadm.Offset{Topic: r.Topic, Partition: r.Partition, At: r.Target, LeaderEpoch: -1, Metadata: ""})
	}
	resps, err := adm.CommitOffsets(ctx, plan.Group, os)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		return fmt.Errorf("committing the new offsets of %s: %w", plan.Group, err)
	}
	plan.Applied = true
	return nil
}

func printPlan(w io.Writer, plan *resetPlan) {
	fmt.Fprintf(w, "group %s: reset to %s\n\n", plan.Group, plan.To)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tCURRENT\tFINISHED ABOVE\tNEW\tNOTE")
	for _, r := range plan.Rows {
		fin := "-"
		if r.FinishedRecords > 0 {
			fin = fmt.Sprintf("%d (cleared)", r.FinishedRecords)
		}
		fmt.Fprintf(tw, "%s/%d\t%s\t%s\t%d\t%s\n", r.Topic, r.Partition, offsetOrNone(r.Current), fin, r.Target, r.Note)
	}
	tw.Flush()
	for _, warn := range plan.Warnings {
		fmt.Fprintf(w, "\nWARNING: %s", warn)
	}
	if len(plan.Warnings) > 0 {
		fmt.Fprintln(w)
	}
	if plan.Applied {
		fmt.Fprintln(w, "\napplied.")
	} else {
		fmt.Fprintln(w, "\nnothing changed: rerun with -yes to apply this plan.")
	}
}
