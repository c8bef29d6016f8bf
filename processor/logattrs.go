package processor

import (
	"context"
	"log/slog"
	"slices"
	"strings"
)

// jobAttrsHandler adds the job's coordinates (group, instance, brokers and
// topics) to every record at slog.LevelWarn and above, franz-go's own
// included: a warning or an error must say where to look without the
// reader knowing which process wrote it, while Info and Debug lines stay
// as lean as their call sites make them. Call sites add what only they
// know: a partition, an offset, the record's topic.
type jobAttrsHandler struct {
	next  slog.Handler
	attrs []slog.Attr
}

// withJobAttrs wraps l so that its warnings and errors name the job of c.
func withJobAttrs(l *slog.Logger, c *config) *slog.Logger {
	attrs := []slog.Attr{
		slog.String("group", c.group),
		slog.String("instance", c.instanceID),
		slog.String("brokers", strings.Join(c.brokers, ",")),
		slog.String("inputs", strings.Join(c.inputs, ",")),
	}
	if c.output != "" {
		attrs = append(attrs, slog.String("output", c.output))
	}
	if c.dlq != "" {
		attrs = append(attrs, slog.String("dlq", c.dlq))
	}
	return slog.New(&jobAttrsHandler{next: l.Handler(), attrs: attrs})
}

func (h *jobAttrsHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

func (h *jobAttrsHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn && len(h.attrs) > 0 {
		attrs := h.attrs
		r.Attrs(func(a slog.Attr) bool {
			attrs = without(attrs, a.Key) // the line's own value wins
			return true
		})
		r = r.Clone() // the caller's record may share its attribute array
		r.AddAttrs(attrs...)
	}
	return h.next.Handle(ctx, r)
}

// WithAttrs leaves out of the job's attributes those the logger now
// carries itself (a user's logger.With("instance", ...)): one key, once.
func (h *jobAttrsHandler) WithAttrs(as []slog.Attr) slog.Handler {
	attrs := h.attrs
	for _, a := range as {
		attrs = without(attrs, a.Key)
	}
	return &jobAttrsHandler{next: h.next.WithAttrs(as), attrs: attrs}
}

// without returns attrs without the one of key, copied if it was there.
func without(attrs []slog.Attr, key string) []slog.Attr {
	i := slices.IndexFunc(attrs, func(a slog.Attr) bool { return a.Key == key })
	if i < 0 {
		return attrs
	}
	return slices.Delete(slices.Clone(attrs), i, i+1)
}

func (h *jobAttrsHandler) WithGroup(name string) slog.Handler {
	return &jobAttrsHandler{next: h.next.WithGroup(name), attrs: h.attrs}
}
