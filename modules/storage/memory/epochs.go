package memory

import (
	"fmt"

	"github.com/sluicehq/sluice/kernel"
)

// AssignEpoch implements kernel.Log. Besides the documented rules, a start offset
// below the log start is kernel.ErrInvalidOffset (the cache's entries never start
// below it).
func (l *Log) AssignEpoch(epoch int32, startOffset int64) error {
	p := l.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if l.closed.Load() {
		return kernel.ErrLogClosed
	}
	if epoch < 0 || epoch <= p.epochs.LatestEpoch() {
		return nil
	}
	if leo := p.leo(); startOffset > leo || startOffset < p.logStart {
		return fmt.Errorf("%w: epoch %d at %d, log %d..%d", kernel.ErrInvalidOffset, epoch, startOffset, p.logStart, leo)
	}
	_, err := p.epochs.Assign(epoch, startOffset)
	return err
}

// Epochs implements kernel.Log.
func (l *Log) Epochs() []kernel.EpochEntry {
	l.p.mu.RLock()
	defer l.p.mu.RUnlock()
	return l.p.epochs.Entries()
}

// EndOffsetForEpoch implements kernel.Log.
func (l *Log) EndOffsetForEpoch(requested int32) (int32, int64) {
	p := l.p
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.epochs.EndOffsetFor(requested, p.leo())
}

// Reset implements kernel.Log: one fresh, empty segment at offset; producer state,
// epochs and the high watermark start over there.
func (l *Log) Reset(offset int64) error {
	p := l.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if l.closed.Load() {
		return kernel.ErrLogClosed
	}
	if offset < 0 {
		return fmt.Errorf("%w: reset to %d", kernel.ErrInvalidOffset, offset)
	}
	p.segs = []*segment{p.newSegment(offset)}
	p.logStart = offset
	p.prod.Reset()
	p.epochs.Clear()
	p.hw.Store(offset)
	p.firstDirty = offset
	return nil
}

// SetHighWatermark implements kernel.Log: one atomic store (called on every HW move).
func (l *Log) SetHighWatermark(hw int64) { l.p.hw.Store(hw) }

// HighWatermark implements kernel.Log.
func (l *Log) HighWatermark() int64 {
	p := l.p
	p.mu.RLock()
	defer p.mu.RUnlock()
	return min(max(p.hw.Load(), p.logStart), p.leo())
}

// lowerHW clamps the recorded high watermark to leo (the log end after a truncation),
// so records appended later at those offsets are not taken as replicated. A concurrent
// SetHighWatermark wins or is clamped; either is a value the replication module set
// for this log.
func (p *partition) lowerHW(leo int64) {
	for {
		hw := p.hw.Load()
		if hw <= leo || p.hw.CompareAndSwap(hw, leo) {
			return
		}
	}
}
