package processor

import (
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kslog"
)

// clientLogger hands franz-go's own logs to the processor's logger, tagged
// component=kgo, at no more detail than WithClientLogLevel allows: a
// producer or group problem inside the client (a failed producer ID, a
// retried batch, a rejoin) is then visible without patching code.
type clientLogger struct {
	sl  *kslog.Logger
	max kgo.LogLevel // the most detailed level passed on
}

func newClientLogger(l *slog.Logger, level slog.Level) kgo.Logger {
	return clientLogger{kslog.New(l.With("component", "kgo")), kgoLevel(level)}
}

// Level is the less detailed of the logger's and the chosen level, so that
// franz-go does not build messages that would be dropped.
func (c clientLogger) Level() kgo.LogLevel { return min(c.sl.Level(), c.max) }

func (c clientLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	if level <= c.max {
		c.sl.Log(level, msg, keyvals...)
	}
}

// kgoLevel maps an slog level to the most detailed kgo level it admits.
func kgoLevel(l slog.Level) kgo.LogLevel {
	switch {
	case l <= slog.LevelDebug:
		return kgo.LogLevelDebug
	case l <= slog.LevelInfo:
		return kgo.LogLevelInfo
	case l <= slog.LevelWarn:
		return kgo.LogLevelWarn
	case l <= slog.LevelError:
		return kgo.LogLevelError
	}
	return kgo.LogLevelNone
}
