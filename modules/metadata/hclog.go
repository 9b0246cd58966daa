package metadata

import (
	"log/slog"

	"github.com/hashicorp/go-hclog"

	"github.com/sluicehq/sluice/internal/hclogslog"
)

// newHCLog sends raft's hclog output to the module's slog logger. raft narrates its
// state changes at Info (entering follower state, election won, ...), which is Debug for
// a broker; Trace goes to Debug-4; Warn and Error map as they are, except:
//   - a single voter's expected election warning at every start is Debug;
//   - a peer that cannot be reached (raft says Error) is a Warn: it is the peer's
//     trouble, and the fencing lines say which broker is gone; once this module is
//     stopping (stopping reports it; nil: never) it is Debug, since the other voters
//     stopping at the same time is what an orderly cluster stop looks like.
func newHCLog(l *slog.Logger, singleVoter bool, stopping func() bool) hclog.Logger {
	return hclogslog.New(l, "raft", func(lv hclog.Level, name, msg string) slog.Level {
		switch {
		case lv == hclog.Info || (singleVoter && routine(msg)):
			return slog.LevelDebug
		case (lv == hclog.Error || lv == hclog.Warn) && peerTrouble(msg):
			if stopping != nil && stopping() {
				return slog.LevelDebug
			}
			return slog.LevelWarn
		}
		return hclogslog.DefaultLevel(lv, name, msg)
	})
}

// routine reports raft warnings that are expected on every start of a single voter:
// it waits one heartbeat timeout for a leader that does not exist, then elects itself.
func routine(msg string) bool {
	return msg == "heartbeat timeout reached, starting election"
}

// peerTrouble reports raft's messages about a peer it cannot reach or that went
// away mid-exchange.
func peerTrouble(msg string) bool {
	switch msg {
	case "failed to appendEntries to", "failed to heartbeat to", "failed to make requestVote RPC",
		"failed to contact", "failed to contact quorum of nodes, stepping down",
		"failed to decode incoming command", "failed to pipeline appendEntries",
		"failed to start pipeline", "failed to send snapshot to":
		return true
	}
	return false
}
