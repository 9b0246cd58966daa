package groups

import (
	"context"
	"io"
	"log"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// hclogAdapter sends go-plugin's hclog output (its own messages and the plugin's
// stderr, line by line) to the module's slog logger, with plugin=<name>. A plugin's
// Info is the broker's Info: plugins talk little and what they say is theirs.
//
// go-plugin logs the plugin's stderr through Named(filepath.Base(path)): lines in
// hclog's JSON format keep their level, plain lines arrive at Debug. The adapter of
// that name (stderr) promotes Debug to Info so a plugin's plain stderr is seen at
// the broker's default level.
type hclogAdapter struct {
	base   *slog.Logger // with plugin=<name>, without name and args
	l      *slog.Logger // base with logger and args
	name   string
	args   []any
	stderr string // the logger name go-plugin gives the plugin's stderr
}

func newHCLog(l *slog.Logger, plugin, stderrName string) hclog.Logger {
	return makeHCLog(l.With("plugin", plugin), "", nil, stderrName)
}

func makeHCLog(base *slog.Logger, name string, args []any, stderr string) *hclogAdapter {
	l := base
	if name != "" {
		l = l.With("logger", name)
	}
	return &hclogAdapter{base: base, l: l.With(args...), name: name, args: args, stderr: stderr}
}

func slogLevel(lv hclog.Level) slog.Level {
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

func (a *hclogAdapter) Log(lv hclog.Level, msg string, args ...any) {
	if lv == hclog.Off {
		return
	}
	level := slogLevel(lv)
	if a.stderr != "" && a.name == a.stderr && lv == hclog.Debug {
		level = slog.LevelInfo
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
	return makeHCLog(a.base, a.name, append(a.args[:len(a.args):len(a.args)], args...), a.stderr)
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
	return makeHCLog(a.base, name, a.args, a.stderr)
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
