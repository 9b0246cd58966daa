package segmentlog

// Temporary stubs of the leader-epoch and high-watermark methods of kernel.Log, so
// the tree builds while they are implemented (session 4, issue 8). Replaced, not
// extended.

import (
	"errors"

	"github.com/sluicehq/sluice/kernel"
)

// AssignEpoch implements kernel.Log (stub).
func (l *Log) AssignEpoch(int32, int64) error { return nil }

// Epochs implements kernel.Log (stub).
func (l *Log) Epochs() []kernel.EpochEntry { return nil }

// EndOffsetForEpoch implements kernel.Log (stub).
func (l *Log) EndOffsetForEpoch(int32) (int32, int64) { return -1, -1 }

// Reset implements kernel.Log (stub).
func (l *Log) Reset(int64) error { return errors.New("segmentlog: Reset not implemented yet") }

// SetHighWatermark implements kernel.Log (stub).
func (l *Log) SetHighWatermark(int64) {}

// HighWatermark implements kernel.Log (stub: the log end offset, as before).
func (l *Log) HighWatermark() int64 { return l.LogEndOffset() }
