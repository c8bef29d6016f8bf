package main

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/onceflow/onceflow/dedupe"
	"github.com/onceflow/onceflow/statestore"
)

// inspectFlags are the flags of the inspect commands.
func inspectArgs(name string, args []string, stderr io.Writer, extra func(*flag.FlagSet)) (dir string, asJSON bool, status int, ok bool) {
	fs := flag.NewFlagSet("onceflow "+name+" inspect", flag.ContinueOnError)
	fs.BoolVar(&asJSON, "json", false, "print one JSON object instead of tables")
	if extra != nil {
		extra(fs)
	}
	pos, st, ok := parse(fs, args, stderr)
	if !ok {
		return "", false, st, false
	}
	if len(pos) != 1 {
		fmt.Fprintf(stderr, "onceflow %s inspect: want one directory, got %d arguments\n", name, len(pos))
		return "", false, exitUsage, false
	}
	return pos[0], asJSON, exitOK, true
}

// printable shows a key as a quoted string if it is text, else as hex.
func printable(b []byte) string {
	if b == nil {
		return "-"
	}
	if utf8.Valid(b) && !bytes.ContainsFunc(b, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return strconv.Quote(string(b))
	}
	return "0x" + hex.EncodeToString(b)
}

// stateReport is "state inspect"'s answer.
type stateReport struct {
	Dir        string           `json:"dir"`
	Format     string           `json:"format"`
	Partitions []statePartition `json:"partitions"`
}

type statePartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Keys      int64  `json:"keys"`
	Bytes     int64  `json:"bytes"`
	FirstKey  string `json:"first_key,omitempty"`
	LastKey   string `json:"last_key,omitempty"`
	// Checkpoint: the changelog topic's ID and the next changelog
	// offset to apply; none means the next restore replays it all.
	ChangelogTopicID string `json:"changelog_topic_id,omitempty"`
	CheckpointNext   *int64 `json:"checkpoint_next,omitempty"`
	CheckpointError  string `json:"checkpoint_error,omitempty"`
}

func runStateInspect(args []string, stdout, stderr io.Writer) int {
	dir, asJSON, st, ok := inspectArgs("state", args, stderr, nil)
	if !ok {
		return st
	}
	format, parts, err := statestore.Inspect(dir, nil)
	if err != nil {
		return fail(stderr, err)
	}
	rep := stateReport{Dir: dir, Format: format}
	var problems int
	for _, s := range parts {
		p := statePartition{Topic: s.Partition.Topic, Partition: s.Partition.Partition, Keys: s.Keys, Bytes: s.Bytes}
		if s.Keys > 0 {
			p.FirstKey, p.LastKey = printable(s.FirstKey), printable(s.LastKey)
		}
		switch {
		case s.CheckpointErr != nil:
			p.CheckpointError = s.CheckpointErr.Error()
			problems++
		case s.HasCheckpoint:
			next := s.Checkpoint.Next
			p.ChangelogTopicID, p.CheckpointNext = hex.EncodeToString(s.Checkpoint.TopicID[:]), &next
		}
		rep.Partitions = append(rep.Partitions, p)
	}
	if asJSON {
		err = printJSON(stdout, rep)
	} else {
		err = printStateReport(stdout, rep)
	}
	if err != nil {
		return fail(stderr, err)
	}
	if problems > 0 {
		return fail(stderr, fmt.Errorf("%w: %d partitions have unreadable checkpoints", errProblems, problems))
	}
	return exitOK
}

func printStateReport(w io.Writer, rep stateReport) error {
	fmt.Fprintf(w, "state store %s (%s): %d partitions\n\n", rep.Dir, rep.Format, len(rep.Partitions))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tKEYS\tBYTES\tFIRST KEY\tLAST KEY\tCHECKPOINT")
	for _, p := range rep.Partitions {
		cp := "none (restore replays the whole changelog)"
		switch {
		case p.CheckpointError != "":
			cp = "UNREADABLE: " + p.CheckpointError
		case p.CheckpointNext != nil:
			cp = fmt.Sprintf("changelog %s… next offset %d", p.ChangelogTopicID[:8], *p.CheckpointNext)
		}
		fmt.Fprintf(tw, "%s/%d\t%d\t%d\t%s\t%s\t%s\n", p.Topic, p.Partition, p.Keys, p.Bytes, dash(p.FirstKey), dash(p.LastKey), cp)
	}
	return tw.Flush()
}

// dedupeReport is "dedupe inspect"'s answer.
type dedupeReport struct {
	Dir         string        `json:"dir"`
	Format      string        `json:"format"`
	Opens       uint64        `json:"opens"`
	TTL         time.Duration `json:"ttl_ns"`
	BucketWidth time.Duration `json:"bucket_width_ns"`
	// LiveFrom is the TTL horizon: marks made before it are expired
	// (no longer seen), though maybe not yet deleted.
	LiveFrom   time.Time         `json:"live_from"`
	Marks      int64             `json:"marks"`      // indexed marks in all
	Unindexed  int64             `json:"unindexed"`  // marks only in the expiry log, indexed at the next open
	Expired    int64             `json:"expired"`    // indexed marks before LiveFrom
	Other      int64             `json:"other_keys"` // marks not in the processor's layout (a store used directly)
	Partitions []dedupePartition `json:"partitions"`
}

// dedupePartition is one input partition's part of a processor's dedupe
// store (processor/dedupetarget.go's layout).
type dedupePartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Marks are the event IDs of the current epoch; Stale those of
	// earlier epochs (a rebuild bumped it: invisible, left to expire);
	// Effects the marks of Once.
	Marks, Stale, Effects int64
	Expired               int64     `json:"expired"`
	Oldest                time.Time `json:"oldest,omitempty"`
	Newest                time.Time `json:"newest,omitempty"`
	FirstID               string    `json:"first_id,omitempty"`
	LastID                string    `json:"last_id,omitempty"`
	Epoch                 uint32    `json:"epoch"`
	// The changelog checkpoint: topic ID, next offset, and whether it
	// is valid (false: the next restore rebuilds).
	ChangelogTopicID string `json:"changelog_topic_id,omitempty"`
	CheckpointNext   *int64 `json:"checkpoint_next,omitempty"`
	CheckpointValid  bool   `json:"checkpoint_valid"`
	CheckpointError  string `json:"checkpoint_error,omitempty"`

	ids [2][]byte // first and last current ID
}

func runDedupeInspect(args []string, stdout, stderr io.Writer) int {
	opts := dedupe.Options{TTL: dedupe.DefaultTTL, BucketWidth: dedupe.DefaultBucketWidth}
	dir, asJSON, st, ok := inspectArgs("dedupe", args, stderr, func(fs *flag.FlagSet) {
		fs.DurationVar(&opts.TTL, "ttl", opts.TTL, "the store's TTL (dedupe.Options.TTL), for the expiry horizon")
		fs.DurationVar(&opts.BucketWidth, "bucket-width", opts.BucketWidth, "the store's bucket width (dedupe.Options.BucketWidth): mark times are bucket starts")
	})
	if !ok {
		return st
	}
	v, err := dedupe.OpenView(dir, &opts)
	if err != nil {
		return fail(stderr, err)
	}
	defer v.Close()
	rep, problems, err := inspectDedupe(v, dir, opts, time.Now())
	if err != nil {
		return fail(stderr, err)
	}
	if asJSON {
		err = printJSON(stdout, rep)
	} else {
		err = printDedupeReport(stdout, rep)
	}
	if err != nil {
		return fail(stderr, err)
	}
	if problems > 0 {
		return fail(stderr, fmt.Errorf("%w: %d partitions have unreadable checkpoints", errProblems, problems))
	}
	return exitOK
}

// nsKey is a partition namespace of the processor's dedupe keys.
type nsKey struct {
	topic     string
	partition int32
}

// decodeNS reads uvarint(len(topic)) | topic | partition (4 bytes).
func decodeNS(b []byte) (nsKey, []byte, bool) {
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)-w) || len(b)-w-int(n) < 4 {
		return nsKey{}, nil, false
	}
	b = b[w:]
	return nsKey{string(b[:n]), int32(binary.BigEndian.Uint32(b[n:]))}, b[n+4:], true
}

func inspectDedupe(v *dedupe.View, dir string, opts dedupe.Options, now time.Time) (*dedupeReport, int, error) {
	rep := &dedupeReport{Dir: dir, Format: v.Format(), Opens: v.Opens(), TTL: opts.TTL, BucketWidth: opts.BucketWidth, LiveFrom: v.LiveFrom(now)}
	parts := map[nsKey]*dedupePartition{}
	part := func(k nsKey) *dedupePartition {
		if p, ok := parts[k]; ok {
			return p
		}
		p := &dedupePartition{Topic: k.topic, Partition: k.partition}
		parts[k] = p
		return p
	}
	// Checkpoints first: they say each partition's current epoch.
	problems := 0
	err := v.Metas(func(key, val []byte) error {
		if len(key) == 0 || key[0] != 'c' {
			return nil
		}
		k, rest, ok := decodeNS(key[1:])
		if !ok || len(rest) != 0 {
			return nil
		}
		p := part(k)
		if len(val) != 29 {
			p.CheckpointError = fmt.Sprintf("%d bytes, want 29", len(val))
			problems++
			return nil
		}
		next := int64(binary.BigEndian.Uint64(val[16:]))
		p.ChangelogTopicID, p.CheckpointNext = hex.EncodeToString(val[:16]), &next
		p.Epoch, p.CheckpointValid = binary.BigEndian.Uint32(val[24:]), val[28] == 1
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	err = v.Marks(func(id []byte, at time.Time) error {
		rep.Marks++
		expired := at.Before(rep.LiveFrom)
		if expired {
			rep.Expired++
		}
		if len(id) == 0 || (id[0] != 'p' && id[0] != 'e') {
			rep.Other++
			return nil
		}
		k, rest, ok := decodeNS(id[1:])
		if !ok {
			rep.Other++
			return nil
		}
		p := part(k)
		if expired {
			p.Expired++
		}
		if id[0] == 'e' {
			p.Effects++
			return nil
		}
		if len(rest) < 4 {
			rep.Other++
			return nil
		}
		if binary.BigEndian.Uint32(rest) != p.Epoch {
			p.Stale++
			return nil
		}
		p.Marks++
		if p.Oldest.IsZero() || at.Before(p.Oldest) {
			p.Oldest = at
		}
		if at.After(p.Newest) {
			p.Newest = at
		}
		ev := rest[4:]
		if p.ids[0] == nil || bytes.Compare(ev, p.ids[0]) < 0 {
			p.ids[0] = bytes.Clone(ev)
		}
		if p.ids[1] == nil || bytes.Compare(ev, p.ids[1]) > 0 {
			p.ids[1] = bytes.Clone(ev)
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	if err := v.Unindexed(func([]byte, time.Time) error { rep.Unindexed++; return nil }); err != nil {
		return nil, 0, err
	}
	for _, p := range parts {
		if p.ids[0] != nil {
			p.FirstID, p.LastID = printable(p.ids[0]), printable(p.ids[1])
		}
		rep.Partitions = append(rep.Partitions, *p)
	}
	slices.SortFunc(rep.Partitions, func(a, b dedupePartition) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return rep, problems, nil
}

func printDedupeReport(w io.Writer, rep *dedupeReport) error {
	fmt.Fprintf(w, "dedupe store %s (%s, run counter %d): %d marks, %d expired (made before %s: TTL %v, buckets of %v), %d awaiting indexing\n",
		rep.Dir, rep.Format, rep.Opens, rep.Marks, rep.Expired, rep.LiveFrom.UTC().Format(time.RFC3339), rep.TTL, rep.BucketWidth, rep.Unindexed)
	if rep.Other > 0 {
		fmt.Fprintf(w, "%d marks are not in a processor's layout (the store was used directly)\n", rep.Other)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tMARKS\tEXPIRED\tSTALE\tONCE\tOLDEST\tNEWEST\tFIRST ID\tLAST ID\tCHECKPOINT")
	for _, p := range rep.Partitions {
		cp := "none"
		switch {
		case p.CheckpointError != "":
			cp = "UNREADABLE: " + p.CheckpointError
		case p.CheckpointNext != nil && !p.CheckpointValid:
			cp = fmt.Sprintf("rebuilding (epoch %d)", p.Epoch)
		case p.CheckpointNext != nil:
			cp = fmt.Sprintf("changelog %s… next offset %d, epoch %d", p.ChangelogTopicID[:8], *p.CheckpointNext, p.Epoch)
		}
		fmt.Fprintf(tw, "%s/%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", p.Topic, p.Partition, p.Marks, p.Expired, p.Stale, p.Effects,
			timeOrDash(p.Oldest), timeOrDash(p.Newest), dash(p.FirstID), dash(p.LastID), cp)
	}
	return tw.Flush()
}

func timeOrDash(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
