package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/onceflow/onceflow/internal/offsetmeta"
)

// printDescription writes describe's tables.
func printDescription(w io.Writer, d *description) error {
	fmt.Fprintf(w, "group %s: %s protocol, state %s, %d members\n\n", d.Group, d.Protocol, d.State, len(d.Members))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tCOMMITTED\tFINISHED ABOVE\tLAST STABLE\tEND\tLAG\tINSTANCE\tMEMBER")
	for _, p := range d.Partitions {
		fmt.Fprintf(tw, "%s/%d\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n", p.Topic, p.Partition, offsetOrNone(p.Committed),
			finishedText(p), p.LastStable, p.End, p.Lag, dash(p.InstanceID), dash(p.Member))
	}
	if len(d.Partitions) == 0 {
		fmt.Fprintln(tw, "(no input partitions: nothing committed or assigned; name them with -topics)")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, p := range d.Partitions {
		if h := p.LSOHolder; h != nil {
			by := fmt.Sprintf("producer %d", h.ProducerID)
			if h.TransactionalID != "" {
				by = fmt.Sprintf("%s (producer %d)", h.TransactionalID, h.ProducerID)
			}
			fmt.Fprintf(w, "  %s/%d: last stable offset %d held by the open transaction of %s\n", p.Topic, p.Partition, p.LastStable, by)
		}
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "INSTANCE\tTRANSACTIONAL ID\tSTATE\tPRODUCER\tAGE\tPARTITIONS\tHOLDS LAST STABLE OFFSET OF")
	for _, in := range d.Instances {
		if len(in.Transactions) == 0 {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\t-\n", in.InstanceID)
		}
		for _, t := range in.Transactions {
			state := t.State
			if t.Error != "" {
				state = "error: " + t.Error
			}
			age := "-"
			if t.Open {
				age = t.Age.Round(time.Millisecond).String()
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\n", in.InstanceID, t.TransactionalID, state, t.ProducerID, t.ProducerEpoch,
				age, dash(strings.Join(t.Partitions, ",")), dash(strings.Join(t.HoldsLSO, ",")))
		}
	}
	if len(d.Instances) == 0 {
		fmt.Fprintln(tw, "(no members with instance IDs and no transactional IDs of the group)")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, pr := range d.Problems {
		fmt.Fprintf(w, "\nPROBLEM: %s", pr)
	}
	if len(d.Problems) > 0 {
		fmt.Fprintln(w)
	}
	return nil
}

func offsetOrNone(o int64) string {
	if o < 0 {
		return "-"
	}
	return fmt.Sprint(o)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// finishedText shows the finished records above the committed offset:
// their count and first ranges.
func finishedText(p partitionInfo) string {
	switch p.Metadata {
	case "corrupt":
		return "CORRUPT METADATA"
	case "foreign":
		return "(foreign metadata)"
	}
	if len(p.Finished) == 0 {
		return "-"
	}
	return fmt.Sprintf("%d in %s", p.FinishedRecords, rangesText(p.Finished, 3))
}

// rangesText shows up to n ranges as "a-b,c" (inclusive ends).
func rangesText(rs []offsetmeta.Range, n int) string {
	var parts []string
	for i, r := range rs {
		if i == n {
			parts = append(parts, fmt.Sprintf("…(+%d)", len(rs)-n))
			break
		}
		if r.End-r.Start == 1 {
			parts = append(parts, fmt.Sprint(r.Start))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", r.Start, r.End-1))
		}
	}
	return strings.Join(parts, ",")
}
