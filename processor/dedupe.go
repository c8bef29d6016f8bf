package processor

import (
	"context"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/dedupe"
)

// HeaderEventID is the record header that holds a record's event ID by
// default (see WithDedupe and WithEventID).
const HeaderEventID = "event-id"

// MaxEffectNameLen bounds the effect names of OnceNamed.
const MaxEffectNameLen = 255

// dedupeKeyOverhead is what the processor adds to an event ID in the
// store's keys (see markKey and effectKey): a tag, the input topic (at most
// 249 bytes) and partition, an epoch or an effect name.
const dedupeKeyOverhead = 1 + 2 + 249 + 4 + 4 + 2 + MaxEffectNameLen

// headerEventID is the default event ID: the first HeaderEventID header.
func headerEventID(r *kgo.Record) []byte {
	for _, h := range r.Headers {
		if h.Key == HeaderEventID {
			return h.Value
		}
	}
	return nil
}

// EventID returns the event ID of the record whose handler got ctx, or nil
// if it has none or the processor has no WithDedupe. Pass it to external
// systems as an idempotency key.
func EventID(ctx context.Context) []byte {
	if it := itemFrom(ctx); it != nil {
		return it.eventID()
	}
	return nil
}

// Once runs fn, an external effect of the record whose handler got ctx,
// unless it already ran for the record's event ID; it reports whether fn
// ran. It is OnceNamed with the empty name; use OnceNamed for several
// effects per record.
func Once(ctx context.Context, fn func(ctx context.Context) error) (ran bool, err error) {
	return OnceNamed(ctx, "", fn)
}

// OnceNamed runs fn, the effect named effect of the record whose handler
// got ctx, unless it already ran for the record's event ID, and reports
// whether fn ran. The effect is marked as done, durably (fsynced), as soon
// as fn returns nil, without waiting for the record's transaction: if the
// transaction then aborts and the record is handled again, fn is skipped.
// If fn fails nothing is marked, and the handler's error decides as usual
// (retry, dead letter).
//
// What remains at-least-once: fn runs again if the process dies after fn
// succeeded but before its mark was written (a window of one fsync), and
// if the partition moves to another instance before the record's
// transaction commits (effect marks are local to the instance; marks of
// committed records travel with the partition, and such records are
// skipped as a whole). To close both windows, pass EventID(ctx) to the
// external system as an idempotency key.
//
// A record without an event ID has nothing to deduplicate on: fn just runs.
// Once returns ErrNoDedupe if ctx is not a handler's context of a processor
// with WithDedupe.
func OnceNamed(ctx context.Context, effect string, fn func(ctx context.Context) error) (ran bool, err error) {
	it := itemFrom(ctx)
	var d *partDedupe
	if it != nil {
		d = partOf[*partDedupe](it.part)
	}
	if d == nil {
		return false, ErrNoDedupe
	}
	if len(effect) > MaxEffectNameLen {
		return false, fmt.Errorf("processor: effect name of %d bytes, longer than %d", len(effect), MaxEffectNameLen)
	}
	id := it.eventID()
	if id == nil {
		return true, fn(ctx)
	}
	return d.tgt.store.Once(ctx, d.tgt.effectKey(effect, id), fn)
}

// storeOptions are the dedupe store's options: the user's, with Once's
// marks synced and room for the processor's key prefixes.
func storeOptions(o dedupe.Options) *dedupe.Options {
	o.SyncOnce = true
	o.MaxIDLen += dedupeKeyOverhead
	return &o
}

func dedupeTopicConfigs(o dedupe.Options) map[string]*string {
	policy := "compact,delete"
	retention := strconv.FormatInt((o.TTL + o.BucketWidth).Milliseconds(), 10)
	return map[string]*string{"cleanup.policy": &policy, "retention.ms": &retention}
}

func dedupeTopic(group, input string) string { return changelogName(group, input, dedupeSuffix) }
