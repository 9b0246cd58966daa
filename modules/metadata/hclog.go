package metadata

import (
	"log/slog"

	"github.com/hashicorp/go-hclog"

	"github.com/sluicehq/sluice/internal/hclogslog"
)

// newHCLog sends raft's hclog output to the module's slog logger. raft narrates its
// state changes at Info (entering follower state, election won, ...), which is Debug for
// a broker; Trace goes to Debug-4; Warn and Error map as they are. A single voter's
// expected election warning at every start is Debug too.
func newHCLog(l *slog.Logger, singleVoter bool) hclog.Logger {
	return hclogslog.New(l, "raft", func(lv hclog.Level, name, msg string) slog.Level {
		if lv == hclog.Info || (singleVoter && routine(msg)) {
			return slog.LevelDebug
		}
		return hclogslog.DefaultLevel(lv, name, msg)
	})
}

// routine reports raft warnings that are expected on every start of a single voter:
// it waits one heartbeat timeout for a leader that does not exist, then elects itself.
func routine(msg string) bool {
	return msg == "heartbeat timeout reached, starting election"
}
