package metadata

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestHCLogAdapter(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	h := newHCLog(l, true, nil)
	h.Info("entering leader state", "leader", "1") // raft narration: Debug
	h.Warn("heartbeat timeout reached, starting election")
	if buf.Len() != 0 {
		t.Errorf("routine raft output at Info: %s", buf.String())
	}
	h.Named("snapshot").With("id", "x").Warn("failed to persist", "err", "disk")
	out := buf.String()
	for _, want := range []string{"level=WARN", "logger=raft.snapshot", "id=x", "err=disk", "failed to persist"} {
		if !strings.Contains(out, want) {
			t.Errorf("output %q lacks %q", out, want)
		}
	}
	if h.IsDebug() || !h.IsWarn() || h.GetLevel() != hclog.Warn {
		t.Errorf("levels: debug %v warn %v level %v", h.IsDebug(), h.IsWarn(), h.GetLevel())
	}
	buf.Reset()
	newHCLog(l, false, nil).Warn("heartbeat timeout reached, starting election")
	if !strings.Contains(buf.String(), "starting election") {
		t.Errorf("with several voters an election is worth a warning: %q", buf.String())
	}
	h.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Error}).Print("std")
	if !strings.Contains(buf.String(), "level=ERROR msg=std") {
		t.Errorf("standard logger: %q", buf.String())
	}
}

// A peer that cannot be reached is a warning, and nothing at all once this broker is
// stopping.
func TestHCLogPeerTrouble(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	stopping := false
	h := newHCLog(l, false, func() bool { return stopping })
	h.Error("failed to appendEntries to", "peer", "2", "error", "connection refused")
	if out := buf.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "failed to appendEntries to") {
		t.Fatalf("peer trouble: %q", out)
	}
	buf.Reset()
	h.Error("failed to take snapshot", "error", "disk")
	if !strings.Contains(buf.String(), "level=ERROR") {
		t.Fatalf("other errors stay errors: %q", buf.String())
	}
	buf.Reset()
	stopping = true
	h.Error("failed to heartbeat to", "peer", "3")
	if buf.Len() != 0 {
		t.Fatalf("peer trouble while stopping: %q", buf.String())
	}
}
