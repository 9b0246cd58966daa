package groups

import (
	"log/slog"

	"github.com/hashicorp/go-hclog"

	"github.com/sluicehq/sluice/internal/hclogslog"
)

// newHCLog sends go-plugin's hclog output (its own messages and the plugin's stderr,
// line by line) to the module's slog logger, with plugin=<name>. A plugin's Info is
// the broker's Info: plugins talk little and what they say is theirs.
//
// go-plugin logs the plugin's stderr through Named(filepath.Base(path)): lines in
// hclog's JSON format keep their level, plain lines arrive at Debug. The logger of that
// name (stderrName) promotes Debug to Info so a plugin's plain stderr is seen at the
// broker's default level.
func newHCLog(l *slog.Logger, plugin, stderrName string) hclog.Logger {
	return hclogslog.New(l.With("plugin", plugin), "", func(lv hclog.Level, name, msg string) slog.Level {
		if stderrName != "" && name == stderrName && lv == hclog.Debug {
			return slog.LevelInfo
		}
		return hclogslog.DefaultLevel(lv, name, msg)
	})
}
