package coordinator

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Load is one shard's load: a shard replays its partition before it serves, and
// requests that arrive meanwhile are answered COORDINATOR_LOAD_IN_PROGRESS. Invariant: err is written once, before ready closes, and
// read only after; so a Load is safe for concurrent use once made with NewLoad.
type Load struct {
	ready chan struct{}
	err   error
}

// NewLoad returns a Load in progress.
func NewLoad() Load { return Load{ready: make(chan struct{})} }

// Done ends the load; err nil means the shard serves. Call it once.
func (l *Load) Done(err error) {
	l.err = err
	close(l.ready)
}

// Ready is closed when the load ends, however it ended.
func (l *Load) Ready() <-chan struct{} { return l.ready }

// IsReady reports whether the load ended well.
func (l *Load) IsReady() bool {
	select {
	case <-l.ready:
		return l.err == nil
	default:
		return false
	}
}

// Failed reports whether the load ended with an error.
func (l *Load) Failed() bool {
	select {
	case <-l.ready:
		return l.err != nil
	default:
		return false
	}
}

// Wait waits up to wait (or until ctx ends) for the load: nil once the shard serves,
// COORDINATOR_LOAD_IN_PROGRESS if it is still loading, COORDINATOR_NOT_AVAILABLE if
// the load failed.
func (l *Load) Wait(ctx context.Context, wait time.Duration) *kerr.Error {
	if !l.IsReady() {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-l.ready:
		case <-t.C:
			return kerr.CoordinatorLoadInProgress
		case <-ctx.Done():
			return kerr.CoordinatorLoadInProgress
		}
	}
	if l.err != nil {
		return kerr.CoordinatorNotAvailable
	}
	return nil
}
