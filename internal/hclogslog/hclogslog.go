// Package hclogslog adapts hashicorp's hclog.Logger (used by hashicorp/raft and
// hashicorp/go-plugin) to log/slog, so those libraries log through the broker's
// structured logger. Each user decides how hclog levels map to slog levels with a
// LevelFunc (raft narrates state changes at Info, which is Debug for a broker;
// go-plugin reports a plugin's plain stderr at Debug, which a broker wants at Info).
package hclogslog

import (
	"context"
	"io"
	"log"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// LevelFunc maps one message to its slog level. name is the hclog logger name
// ("raft", "raft.snapshot", ...).
type LevelFunc func(lv hclog.Level, name, msg string) slog.Level

// DefaultLevel maps Trace to Debug-4, Debug to Debug, Info to Info, Warn to Warn and
// Error to Error.
func DefaultLevel(lv hclog.Level, _, _ string) slog.Level {
	switch lv {
	case hclog.Trace:
		return slog.LevelDebug - 4
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

// New returns an hclog.Logger named name writing to base (with logger=<name> when
// name is not empty). level nil means DefaultLevel.
func New(base *slog.Logger, name string, level LevelFunc) hclog.Logger {
	if level == nil {
		level = DefaultLevel
	}
	return build(base, name, nil, level)
}

type adapter struct {
	base  *slog.Logger // without name and args
	l     *slog.Logger // base with logger=<name> and args
	name  string
	args  []any
	level LevelFunc
}

func build(base *slog.Logger, name string, args []any, level LevelFunc) *adapter {
	l := base
	if name != "" {
		l = l.With("logger", name)
	}
	return &adapter{base: base, l: l.With(args...), name: name, args: args, level: level}
}

func (a *adapter) Log(lv hclog.Level, msg string, args ...any) {
	if lv == hclog.Off {
		return
	}
	a.l.Log(context.Background(), a.level(lv, a.name, msg), msg, args...)
}

func (a *adapter) Trace(msg string, args ...any) { a.Log(hclog.Trace, msg, args...) }
func (a *adapter) Debug(msg string, args ...any) { a.Log(hclog.Debug, msg, args...) }
func (a *adapter) Info(msg string, args ...any)  { a.Log(hclog.Info, msg, args...) }
func (a *adapter) Warn(msg string, args ...any)  { a.Log(hclog.Warn, msg, args...) }
func (a *adapter) Error(msg string, args ...any) { a.Log(hclog.Error, msg, args...) }

func (a *adapter) enabled(lv hclog.Level) bool {
	return a.l.Enabled(context.Background(), a.level(lv, a.name, ""))
}

func (a *adapter) IsTrace() bool { return a.enabled(hclog.Trace) }
func (a *adapter) IsDebug() bool { return a.enabled(hclog.Debug) }
func (a *adapter) IsInfo() bool  { return a.enabled(hclog.Info) }
func (a *adapter) IsWarn() bool  { return a.enabled(hclog.Warn) }
func (a *adapter) IsError() bool { return a.enabled(hclog.Error) }

func (a *adapter) ImpliedArgs() []any { return a.args }

func (a *adapter) With(args ...any) hclog.Logger {
	return build(a.base, a.name, append(a.args[:len(a.args):len(a.args)], args...), a.level)
}

func (a *adapter) Name() string { return a.name }

func (a *adapter) Named(name string) hclog.Logger {
	n := name
	if a.name != "" {
		n = a.name + "." + name
	}
	return a.ResetNamed(n)
}

func (a *adapter) ResetNamed(name string) hclog.Logger { return build(a.base, name, a.args, a.level) }

// SetLevel does nothing: the slog handler decides what is written.
func (a *adapter) SetLevel(hclog.Level) {}

func (a *adapter) GetLevel() hclog.Level {
	for _, lv := range []hclog.Level{hclog.Trace, hclog.Debug, hclog.Info, hclog.Warn} {
		if a.enabled(lv) {
			return lv
		}
	}
	return hclog.Error
}

func (a *adapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	lv := slog.LevelInfo
	if opts != nil && opts.ForceLevel != hclog.NoLevel {
		lv = a.level(opts.ForceLevel, a.name, "")
	}
	return slog.NewLogLogger(a.l.Handler(), lv)
}

func (a *adapter) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	return a.StandardLogger(opts).Writer()
}

var _ hclog.Logger = (*adapter)(nil)
