package processor

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Dead-letter reasons, in the HeaderReason header.
const (
	reasonPermanent        = "permanent"
	reasonRetriesExhausted = "retries-exhausted"
	reasonStuck            = "stuck"
	reasonEventIDTooLong   = "event-id-too-long" // WithDedupe: longer than MaxIDLen
	reasonPanic            = "panic"             // user code panicked: see PanicError
)

// dlqReasons indexes the per-reason dead-letter counters.
var dlqReasons = [...]string{reasonPermanent, reasonRetriesExhausted, reasonStuck, reasonEventIDTooLong, reasonPanic}

func reasonIndex(reason string) int {
	for i, r := range dlqReasons {
		if r == reason {
			return i
		}
	}
	return 0
}

// Dead-letter headers: where the record came from and why it failed. The
// input's own headers follow them unchanged.
const (
	HeaderSourceTopic     = "onceflow-dlq-source-topic"
	HeaderSourcePartition = "onceflow-dlq-source-partition"
	HeaderSourceOffset    = "onceflow-dlq-source-offset"
	HeaderReason          = "onceflow-dlq-reason"
	HeaderError           = "onceflow-dlq-error"
	HeaderAttempts        = "onceflow-dlq-attempts"
	HeaderFirstFailure    = "onceflow-dlq-first-failure" // RFC 3339, nanoseconds
)

// deadLetter builds the dead-letter copy of it's input record. It must be
// called by whoever owns it (the session, or the loop for a stuck record,
// which reads only fields the session does not write).
func deadLetter(topic string, it *item, reason string, err error, attempts int, firstFailure time.Time) *kgo.Record {
	in := it.rec
	first := ""
	if !firstFailure.IsZero() {
		first = firstFailure.UTC().Format(time.RFC3339Nano)
	}
	hs := make([]kgo.RecordHeader, 0, 7+len(in.Headers))
	hs = append(hs,
		kgo.RecordHeader{Key: HeaderSourceTopic, Value: []byte(in.Topic)},
		kgo.RecordHeader{Key: HeaderSourcePartition, Value: strconv.AppendInt(nil, int64(in.Partition), 10)},
		kgo.RecordHeader{Key: HeaderSourceOffset, Value: strconv.AppendInt(nil, in.Offset, 10)},
		kgo.RecordHeader{Key: HeaderReason, Value: []byte(reason)},
		kgo.RecordHeader{Key: HeaderError, Value: []byte(errText(err))},
		kgo.RecordHeader{Key: HeaderAttempts, Value: strconv.AppendInt(nil, int64(attempts), 10)},
		kgo.RecordHeader{Key: HeaderFirstFailure, Value: []byte(first)},
	)
	hs = append(hs, in.Headers...)
	return &kgo.Record{Topic: topic, Key: in.Key, Value: in.Value, Headers: hs}
}

// errText is the error header's text: a panic's with its stack.
func errText(err error) string {
	var pe *PanicError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &pe):
		return pe.detail()
	}
	return err.Error()
}

// noDLQError is Run's error for a record that needs the dead-letter
// topic when none is set.
func noDLQError(it *item) error {
	r := it.rec
	var pe *PanicError
	if it.x != nil && errors.As(it.x.failure, &pe) {
		return fmt.Errorf("processor: record %s/%d@%d: %w; %w", r.Topic, r.Partition, r.Offset, pe, ErrNoDLQ)
	}
	return fmt.Errorf("%w: %s/%d@%d: %s", ErrNoDLQ, r.Topic, r.Partition, r.Offset, headerValue(it.dlq, HeaderError))
}

// logPanic reports a recovered panic where it happened, with its stack:
// the record's fate follows (a dead letter, or Run's error without a
// dead-letter topic).
func logPanic(cfg *config, it *item, err error) {
	var pe *PanicError
	if !errors.As(err, &pe) {
		return
	}
	fate := "the record goes to the dead-letter topic"
	if cfg.dlq == "" {
		fate = "no dead-letter topic is set (WithDLQTopic): Run stops and the record is not committed"
	}
	cfg.logger.Error(pe.In+" panicked; "+fate, "topic", it.rec.Topic, "partition", it.rec.Partition,
		"offset", it.rec.Offset, "panic", fmt.Sprint(pe.Value), "at", pe.Where, "stack", pe.Stack)
}

// headerValue is the value of r's first header named key, or "".
func headerValue(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}
