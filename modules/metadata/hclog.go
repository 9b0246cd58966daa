package metadata

import (
	"context"
	"io"
	"log"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// hclogAdapter sends raft's hclog output to the module's slog logger. raft narrates its
// state changes at Info (entering follower state, election won, ...), which is Debug
// for a broker; Trace goes to Debug-4; Warn and Error map as they are.
type hclogAdapter struct {
	singleVoter bool
	base        *slog.Logger // without name and args
	l           *slog.Logger // base with name and args
	name        string
	args        []any
}

func newHCLog(l *slog.Logger, singleVoter bool) hclog.Logger {
	return makeHCLog(l, singleVoter, "raft", nil)
}

func makeHCLog(base *slog.Logger, singleVoter bool, name string, args []any) *hclogAdapter {
	return &hclogAdapter{singleVoter: singleVoter, base: base, l: base.With("logger", name).With(args...), name: name, args: args}
}

func slogLevel(lv hclog.Level) slog.Level {
	switch lv {
	case hclog.Trace:
		return slog.LevelDebug - 4
	case hclog.Debug, hclog.Info:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

// routine reports raft warnings that are expected on every start of a single voter:
// it waits one heartbeat timeout for a leader that does not exist, then elects itself.
func routine(msg string) bool {
	return msg == "heartbeat timeout reached, starting election"
}

func (a *hclogAdapter) Log(lv hclog.Level, msg string, args ...any) {
	if lv == hclog.Off {
		return
	}
	level := slogLevel(lv)
	if a.singleVoter && routine(msg) {
		level = slog.LevelDebug
	}
	a.l.Log(context.Background(), level, msg, args...)
}

func (a *hclogAdapter) Trace(msg string, args ...any) { a.Log(hclog.Trace, msg, args...) }
func (a *hclogAdapter) Debug(msg string, args ...any) { a.Log(hclog.Debug, msg, args...) }
func (a *hclogAdapter) Info(msg string, args ...any)  { a.Log(hclog.Info, msg, args...) }
func (a *hclogAdapter) Warn(msg string, args ...any)  { a.Log(hclog.Warn, msg, args...) }
func (a *hclogAdapter) Error(msg string, args ...any) { a.Log(hclog.Error, msg, args...) }

func (a *hclogAdapter) enabled(lv hclog.Level) bool {
	return a.l.Enabled(context.Background(), slogLevel(lv))
}

func (a *hclogAdapter) IsTrace() bool { return a.enabled(hclog.Trace) }
func (a *hclogAdapter) IsDebug() bool { return a.enabled(hclog.Debug) }
func (a *hclogAdapter) IsInfo() bool  { return a.enabled(hclog.Info) }
func (a *hclogAdapter) IsWarn() bool  { return a.enabled(hclog.Warn) }
func (a *hclogAdapter) IsError() bool { return a.enabled(hclog.Error) }

func (a *hclogAdapter) ImpliedArgs() []any { return a.args }

func (a *hclogAdapter) With(args ...any) hclog.Logger {
	return makeHCLog(a.base, a.singleVoter, a.name, append(a.args[:len(a.args):len(a.args)], args...))
}

func (a *hclogAdapter) Name() string { return a.name }

func (a *hclogAdapter) Named(name string) hclog.Logger {
	n := name
	if a.name != "" {
		n = a.name + "." + name
	}
	return a.ResetNamed(n)
}

func (a *hclogAdapter) ResetNamed(name string) hclog.Logger {
	return makeHCLog(a.base, a.singleVoter, name, a.args)
}

// SetLevel does nothing: the slog handler decides what is written.
func (a *hclogAdapter) SetLevel(hclog.Level) {}

func (a *hclogAdapter) GetLevel() hclog.Level {
	for _, lv := range []hclog.Level{hclog.Trace, hclog.Debug, hclog.Info, hclog.Warn} {
		if a.enabled(lv) {
			return lv
		}
	}
	return hclog.Error
}

func (a *hclogAdapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	lv := slog.LevelInfo
	if opts != nil && opts.ForceLevel != hclog.NoLevel {
		lv = slogLevel(opts.ForceLevel)
	}
	return slog.NewLogLogger(a.l.Handler(), lv)
}

func (a *hclogAdapter) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	return a.StandardLogger(opts).Writer()
}

var _ hclog.Logger = (*hclogAdapter)(nil)
