package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/readback"
	"github.com/onceflow/onceflow/processor"
)

// changelogTopic is the processor's changelog of input under group.
func changelogTopic(group, input string) string { return group + "-" + input + "-changelog" }

// verifyState reads a stateful run's changelog back (read_committed) and
// returns how many sessions (or stray keys) end with a count other than
// their number of records among inputs 0..n-1.
func verifyState(ctx context.Context, log *slog.Logger, brokers []string, opts []kgo.Opt, changelog string, n, sessions int) (int, error) {
	recs, err := readback.ReadCommittedLog(ctx, log, brokers, opts, changelog)
	if err != nil {
		return 0, fmt.Errorf("reading the state changelog back: %w", err)
	}
	return stateViolations(recs, n, sessions), nil
}

// stateViolations folds changelog records (the last value per key; a nil
// value deletes) and counts the keys whose final count is wrong: session s
// holds inputs s, s+sessions, ... below n, so its counter must be their
// number; keys of no session, and malformed values, count too.
func stateViolations(recs []*kgo.Record, n, sessions int) int {
	final := make(map[string][]byte)
	for _, r := range recs {
		if r.Value == nil {
			delete(final, string(r.Key))
			continue
		}
		final[string(r.Key)] = r.Value
	}
	bad := 0
	for s := range sessions {
		key := string(SessionKey(s)) + countSuffix
		want := 0
		if s < n {
			want = (n - s + sessions - 1) / sessions
		}
		v, ok := final[key]
		delete(final, key)
		switch {
		case !ok:
			if want != 0 {
				bad++
			}
		case len(v) != 8 || binary.BigEndian.Uint64(v) != uint64(want):
			bad++
		}
	}
	return bad + len(final) // what is left belongs to no session
}

// stateDeadLetter reports whether a dead-letter record was caused by the
// stateful handler finding its session's state out of step.
func stateDeadLetter(r *kgo.Record) bool {
	for _, h := range r.Headers {
		if h.Key == processor.HeaderError && strings.Contains(string(h.Value), stateOutOfStep) {
			return true
		}
	}
	return false
}
