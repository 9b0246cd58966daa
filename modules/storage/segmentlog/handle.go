package segmentlog

import (
	"errors"
	"sync/atomic"

	"github.com/sluicehq/sluice/kernel"
)

// handle is the kernel.Log the module hands out: a partition's current *Log, which
// AlterReplicaLogDirs replaces with its copy in another log dir (move.go) while the
// holder (the replication module's partition) keeps the same handle.
//
// Invariant: cur changes only inside a move's swap, which holds the old log's
// flushMu and mu, stores the new log in cur, and only then closes the old one. So a
// call that reached the old log before the swap completed there (and the swap copied
// its effect); one that reaches it after finds it closed and, seeing cur changed, runs
// again on the new log. Setters (SetConfig, SetHighWatermark) are applied again when
// cur changed under them, so the new log never misses the latest value.
type handle struct {
	cur atomic.Pointer[Log]
}

func newHandle(l *Log) *handle {
	h := &handle{}
	h.cur.Store(l)
	return h
}

// retry runs fn on the current log until it ran on a log that was not replaced
// meanwhile.
func retry[T any](h *handle, fn func(*Log) (T, error)) (T, error) {
	for {
		l := h.cur.Load()
		v, err := fn(l)
		if err != nil && errors.Is(err, kernel.ErrLogClosed) && h.cur.Load() != l {
			continue
		}
		return v, err
	}
}

func retryErr(h *handle, fn func(*Log) error) error {
	_, err := retry(h, func(l *Log) (struct{}, error) { return struct{}{}, fn(l) })
	return err
}

func (h *handle) set(fn func(*Log)) {
	for {
		l := h.cur.Load()
		fn(l)
		if h.cur.Load() == l {
			return
		}
	}
}

// AdmitWrite implements kernel.SpaceLog: the current log's directory's reserve.
func (h *handle) AdmitWrite(n int64) error { return h.cur.Load().store.admit(n) }

func (h *handle) AppendLeader(records []byte) (kernel.AppendResult, error) {
	return retry(h, func(l *Log) (kernel.AppendResult, error) { return l.AppendLeader(records) })
}

func (h *handle) AppendFollower(records []byte) (kernel.AppendResult, error) {
	return retry(h, func(l *Log) (kernel.AppendResult, error) { return l.AppendFollower(records) })
}

func (h *handle) AppendProducer(batch []byte, seq kernel.SeqRange) (kernel.AppendResult, error) {
	return retry(h, func(l *Log) (kernel.AppendResult, error) { return l.AppendProducer(batch, seq) })
}

func (h *handle) Read(offset, maxBytes, maxOffset int64, minOneBatch bool) (kernel.ReadResult, error) {
	return retry(h, func(l *Log) (kernel.ReadResult, error) { return l.Read(offset, maxBytes, maxOffset, minOneBatch) })
}

type tsOffset struct {
	offset, ts int64
	ok         bool
}

func (h *handle) OffsetForTimestamp(ts int64) (int64, int64, bool, error) {
	r, err := retry(h, func(l *Log) (tsOffset, error) {
		o, t, ok, err := l.OffsetForTimestamp(ts)
		return tsOffset{o, t, ok}, err
	})
	return r.offset, r.ts, r.ok, err
}

func (h *handle) DeleteRecordsBefore(offset int64) error {
	return retryErr(h, func(l *Log) error { return l.DeleteRecordsBefore(offset) })
}

func (h *handle) Truncate(offset int64) error {
	return retryErr(h, func(l *Log) error { return l.Truncate(offset) })
}

func (h *handle) Reset(offset int64) error {
	return retryErr(h, func(l *Log) error { return l.Reset(offset) })
}

func (h *handle) Flush() error { return retryErr(h, (*Log).Flush) }

func (h *handle) AssignEpoch(epoch int32, startOffset int64) error {
	return retryErr(h, func(l *Log) error { return l.AssignEpoch(epoch, startOffset) })
}

// Close closes the current log; a move in progress is abandoned by the store's
// Close or Remove, which the module calls for a closing partition.
func (h *handle) Close() error { return retryErr(h, (*Log).Close) }

func (h *handle) SetConfig(cfg kernel.LogConfig) { h.set(func(l *Log) { l.SetConfig(cfg) }) }
func (h *handle) SetHighWatermark(hw int64)      { h.set(func(l *Log) { l.SetHighWatermark(hw) }) }

func (h *handle) LogStartOffset() int64 { return h.cur.Load().LogStartOffset() }
func (h *handle) LogEndOffset() int64   { return h.cur.Load().LogEndOffset() }
func (h *handle) HighWatermark() int64  { return h.cur.Load().HighWatermark() }
func (h *handle) Size() int64           { return h.cur.Load().Size() }
func (h *handle) MaxTimestamp() (int64, int64, bool) {
	return h.cur.Load().MaxTimestamp()
}
func (h *handle) Producer(id int64) (kernel.ProducerState, bool) { return h.cur.Load().Producer(id) }
func (h *handle) Producers() []kernel.ProducerState              { return h.cur.Load().Producers() }
func (h *handle) FirstUnstableOffset() (int64, bool)             { return h.cur.Load().FirstUnstableOffset() }
func (h *handle) AbortedTxns(dst []kernel.AbortedTxn, from, to int64) []kernel.AbortedTxn {
	return h.cur.Load().AbortedTxns(dst, from, to)
}
func (h *handle) Epochs() []kernel.EpochEntry { return h.cur.Load().Epochs() }
func (h *handle) EndOffsetForEpoch(requested int32) (int32, int64) {
	return h.cur.Load().EndOffsetForEpoch(requested)
}

// Offline implements kernel.OfflineLog.
func (h *handle) Offline() error { return h.cur.Load().Offline() }

var (
	_ kernel.Log        = (*handle)(nil)
	_ kernel.OfflineLog = (*handle)(nil)
)

var _ kernel.SpaceLog = (*handle)(nil)
