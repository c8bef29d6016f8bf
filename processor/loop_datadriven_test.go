package processor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/stretchr/testify/require"

	"github.com/onceflow/onceflow/internal/offsetmeta"
)

// TestLoopDataDriven walks one lifetime's loop through the scripts in
// testdata/loop, without a broker: the loopHarness and its fakeClient
// stand in for the client. Each script reads as a record's walk, fetch ->
// dispatch -> completion -> commit -> abort and rewind -> revoke, and its
// expected output is the state the loop shows after each step. The
// commands:
//
//	new [block=(<offset>,...)] [metadata=<bytes>] [buffered=(<per partition>,<total>)]
//	    a lifetime whose handler copies each record to "out", holding the
//	    records at the block offsets until released
//	intake [partition=<n>] from=<offset> to=<offset> sessions=<n>
//	    one fetch of in/<partition>: records of sessions s0..s(n-1) in turn
//	settle [unfinished=<n>] [held=<n>]
//	    drains completions until the loop has that many records unfinished
//	    and completions held (with neither given: none); prints the state
//	release <offset>       lets a blocked record's handler return
//	backpressure           runs the loop's backpressure step; prints the state
//	abort-next             the fake refuses the next commit (as a rebalance would)
//	fail-produce           the fake fails the next produced record
//	commit                 commits as the loop does; prints the partitions its
//	                       offset commit named and the committed offsets
//	revoke partition=<n>   the group revokes in/<n> and the loop takes the news
//	outputs                the committed outputs per session key, in order
//	stats                  the Stats counters a step may change
//
// Run with -rewrite to regenerate the expected output after a change that
// is meant to change it.
func TestLoopDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata/loop", func(t *testing.T, path string) {
		var h *loopHarness
		var b *blocker
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if h == nil && d.Cmd != "new" {
				t.Fatalf("%s: the script must start with new", d.Pos)
			}
			switch d.Cmd {
			case "new":
				var opts []Opt
				var block []int64
				if arg, ok := d.Arg("block"); ok {
					for _, v := range arg.Vals {
						o, err := strconv.ParseInt(v, 10, 64)
						require.NoError(t, err)
						block = append(block, o)
					}
				}
				if d.HasArg("metadata") {
					var n int
					d.ScanArgs(t, "metadata", &n)
					opts = append(opts, WithMaxCommitMetadataBytes(n))
				}
				if d.HasArg("buffered") {
					var per, total int
					d.ScanArgs(t, "buffered", &per, &total)
					opts = append(opts, WithMaxBuffered(per, total))
				}
				b = newBlocker(block...)
				h = newLoopHarness(t, b.handle, opts...)
				return ""
			case "intake":
				var part int
				var from, to int64
				var sessions int
				d.MaybeScanArgs(t, "partition", &part)
				d.ScanArgs(t, "from", &from)
				d.ScanArgs(t, "to", &to)
				d.ScanArgs(t, "sessions", &sessions)
				recs := records(from, to, sessions)
				require.NoError(t, h.l.ps.intake(fetchesOf("in", int32(part), recs), h.l.now))
				return ""
			case "settle":
				unfinished, held := -1, -1 // -1: not checked
				d.MaybeScanArgs(t, "unfinished", &unfinished)
				d.MaybeScanArgs(t, "held", &held)
				if unfinished < 0 && held < 0 {
					unfinished, held = 0, 0
				}
				h.settle(func() bool {
					return (unfinished < 0 || h.l.ps.unfinished() == unfinished) && (held < 0 || h.held() == held)
				})
				return h.state()
			case "release":
				o, err := strconv.ParseInt(d.CmdArgs[0].Key, 10, 64)
				require.NoError(t, err)
				b.release(o)
				return ""
			case "backpressure":
				h.l.ps.backpressure()
				return h.state()
			case "abort-next":
				h.c.abortNext = true
				return ""
			case "fail-produce":
				h.c.failNext = errors.New("record too large")
				return ""
			case "commit":
				h.commit()
				return h.commits()
			case "revoke":
				var part int
				d.ScanArgs(t, "partition", &part)
				h.l.group.onRevoked(context.Background(), nil, map[string][]int32{"in": {int32(part)}})
				require.NoError(t, h.l.handleEvents())
				return h.state()
			case "outputs":
				out := h.outputValues()
				keys := make([]string, 0, len(out))
				for k := range out {
					keys = append(keys, k)
				}
				slices.Sort(keys)
				var sb strings.Builder
				for _, k := range keys {
					fmt.Fprintf(&sb, "%s: %s\n", k, strings.Join(out[k], " "))
				}
				return sb.String()
			case "stats":
				s := h.p.Stats()
				return fmt.Sprintf("consumed=%d outputs=%d commits=%d aborts=%v reprocessed=%d\n",
					s.Consumed, s.Outputs, h.c.commits, s.AbortsBy, s.Reprocessed)
			}
			t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
			return ""
		})
	})
}

// held counts the completions held, over every partition.
func (h *loopHarness) held() int {
	n := 0
	for _, p := range h.l.ps.all {
		n += len(p.held)
	}
	return n
}

// state prints each tracked partition (next offset to take, committed
// offset, unfinished and held records, whether fetching is paused) and
// whether the open transaction holds work.
func (h *loopHarness) state() string {
	var sb strings.Builder
	for _, k := range h.sortedParts() {
		p := h.l.ps.all[k]
		paused := ""
		if h.c.isPaused(k.topic, k.partition) {
			paused = " paused"
		}
		fmt.Fprintf(&sb, "%s/%d: next=%d committed=%d unfinished=%d held=%d%s\n",
			k.topic, k.partition, p.next, p.committed, p.unfinished(), len(p.held), paused)
	}
	fmt.Fprintf(&sb, "open transaction: used=%t\n", h.l.c.open.used)
	return sb.String()
}

// commits prints the partitions the last offset commit named, then each
// partition's committed offset and the finished ranges above it in its
// metadata, as the fake holds them, for the partitions the loop tracks
// and those committed.
func (h *loopHarness) commits() string {
	keys := h.sortedParts()
	h.c.mu.Lock()
	for k := range h.c.offsets {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	h.c.mu.Unlock()
	slices.SortFunc(keys, func(a, b tp) int { return int(a.partition - b.partition) })
	if len(keys) == 0 {
		return "nothing committed\n"
	}
	var sb strings.Builder
	h.c.mu.Lock()
	named := slices.Clone(h.c.named)
	h.c.mu.Unlock()
	slices.SortFunc(named, func(a, b tp) int { return int(a.partition - b.partition) })
	sb.WriteString("named:")
	for _, k := range named {
		fmt.Fprintf(&sb, " %s/%d", k.topic, k.partition)
	}
	sb.WriteString("\n")
	for _, k := range keys {
		off, meta, ok := h.c.committed(k.topic, k.partition)
		if !ok {
			fmt.Fprintf(&sb, "%s/%d: not committed\n", k.topic, k.partition)
			continue
		}
		done, err := offsetmeta.Decode(off, meta)
		require.NoError(h.t, err)
		fmt.Fprintf(&sb, "%s/%d: offset=%d done=[", k.topic, k.partition, off)
		for i, r := range done {
			if i > 0 {
				sb.WriteByte(' ')
			}
			if r.End-r.Start == 1 {
				fmt.Fprintf(&sb, "%d", r.Start)
			} else {
				fmt.Fprintf(&sb, "%d-%d", r.Start, r.End-1)
			}
		}
		sb.WriteString("]\n")
	}
	return sb.String()
}

func (h *loopHarness) sortedParts() []tp {
	keys := make([]tp, 0, len(h.l.ps.all))
	for k := range h.l.ps.all {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b tp) int { return int(a.partition - b.partition) })
	return keys
}
