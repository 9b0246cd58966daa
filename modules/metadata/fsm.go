package metadata

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/hashicorp/raft"
)

// fsm is the raft state machine: it applies metadata entries to the current state and
// publishes each new image through the hub. raft calls Apply, Snapshot and Restore from
// one goroutine.
type fsm struct {
	log *slog.Logger
	hub *hub
}

// Apply applies one committed entry. It returns an applyResult.
func (f *fsm) Apply(l *raft.Log) any {
	cur := f.hub.state()
	if l.Type != raft.LogCommand {
		return applyResult{Index: l.Index}
	}
	r, err := decodeRecord(l.Data)
	var next *state
	if err != nil {
		// An entry this broker cannot read: it keeps its image (version aside) and says
		// so loudly. Writers gate new record versions on every broker understanding
		// them (see doc.go), so this means a downgrade or a bug.
		f.log.Error("skipping unreadable metadata entry", "index", l.Index, "err", err)
		next, _ = cur.apply(l.Index, nil)
	} else {
		next, err = cur.apply(l.Index, r)
		if err != nil && f.log.Enabled(context.Background(), slog.LevelDebug) {
			f.log.Debug("metadata entry rejected", "index", l.Index, "type", fmt.Sprintf("%T", r), "err", err)
		}
	}
	f.hub.publish(next)
	res := applyResult{Index: l.Index, Err: err}
	if _, ok := r.(*producerIDsRecord); ok && err == nil {
		// The block starts where the counter stood before this entry. Entries apply
		// one at a time, so this is the proposer's block and nobody else's.
		res.FirstProducerID = cur.nextProducerID
	}
	return res
}

// Snapshot captures the current state; states are immutable, so this is a pointer copy.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	return &fsmSnapshot{s: f.hub.state()}, nil
}

// Restore replaces the state with a snapshot's.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	s, err := decodeSnapshot(rc)
	if err != nil {
		return err
	}
	f.hub.publish(s)
	return nil
}

type fsmSnapshot struct{ s *state }

// Persist writes the snapshot to sink.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	b, err := encodeSnapshot(s.s)
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
