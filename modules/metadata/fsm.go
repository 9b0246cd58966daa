package metadata

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/hashicorp/raft"

	"github.com/sluicehq/sluice/modules/metadata/image"
)

// fsm is the raft state machine: it applies metadata entries to the current state and
// publishes each new image through the hub. raft calls Apply, Snapshot and Restore from
// one goroutine.
type fsm struct {
	log *slog.Logger
	hub *hub
}

// Apply applies one committed entry (image.State.ApplyEntry) and publishes the new
// state, once for a batch of records. It returns an image.ApplyResult.
func (f *fsm) Apply(l *raft.Log) any {
	cur := f.hub.state()
	if l.Type != raft.LogCommand {
		return image.ApplyResult{Index: l.Index}
	}
	next, rec, res := cur.ApplyEntry(l.Index, l.Data)
	switch {
	case rec == nil:
		// An entry this broker cannot read: it keeps its image (version aside) and says
		// so loudly. Writers gate new record versions on every broker understanding
		// them (see doc.go), so this means a downgrade or a bug.
		f.log.Error("skipping unreadable metadata entry", "index", l.Index, "err", res.Err)
	case res.Err != nil && f.log.Enabled(context.Background(), slog.LevelDebug):
		f.log.Debug("metadata entry rejected", "index", l.Index, "type", fmt.Sprintf("%T", rec), "err", res.Err)
	case res.Batch != nil && f.log.Enabled(context.Background(), slog.LevelDebug):
		for i, r := range res.Batch {
			if r.Err != nil {
				f.log.Debug("metadata entry rejected", "index", l.Index, "record", i, "type", fmt.Sprintf("%T", rec.(*image.BatchRecord).Records[i]), "err", r.Err)
			}
		}
	}
	f.hub.publish(next)
	return res
}

// Snapshot captures the current state; states are immutable, so this is a pointer copy.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	return &fsmSnapshot{s: f.hub.state()}, nil
}

// Restore replaces the state with a snapshot's.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	s, err := image.DecodeSnapshot(rc)
	if err != nil {
		return err
	}
	f.hub.publish(s)
	return nil
}

type fsmSnapshot struct{ s *image.State }

// Persist writes the snapshot to sink.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	b, err := image.EncodeSnapshot(s.s)
	if err == nil {
		_, err = sink.Write(b)
	}
	if err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("persist snapshot: %w", err)
	}
	return sink.Close()
}

// Release does nothing: the state is garbage collected.
func (s *fsmSnapshot) Release() {}

var (
	_ raft.FSM         = (*fsm)(nil)
	_ raft.FSMSnapshot = (*fsmSnapshot)(nil)
)
