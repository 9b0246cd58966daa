package replication

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
)

// markerTimeout bounds how long a WriteTxnMarkers request waits for its markers to be
// committed (Kafka uses request.timeout.ms, 30 s by default).
const markerTimeout = 30 * time.Second

// errMarkerTimeout: a marker was appended but not committed in time (REQUEST_TIMED_OUT).
// The marker stays in the log; the coordinator retries, and a retried marker with no
// open transaction changes nothing.
var errMarkerTimeout = fmt.Errorf("marker not committed in time: %w", context.DeadlineExceeded)

// markerWrite is one marker to write to one partition, and its outcome.
type markerWrite struct {
	tp     kernel.TopicPartition
	m      kernel.TxnMarker
	p      *Partition
	offset int64
	epoch  int32 // leader epoch of the append
	hook   bool  // queued for the TxnMarkerHook listeners
	err    error
	done   bool
}

// AddTxnMarkerListener registers fn; see kernel.TxnMarkerHook. fn is called after a
// marker on a partition of an internal topic is committed, in log order per
// partition, on the goroutine of a marker writer (the one that wrote it or one that
// wrote a later marker to the same partition and found it committed: whichever
// comes first; WriteTxnMarker returns only after its own marker's calls returned).
// fn must not write markers to the same partition (it would wait for itself).
func (m *Module) AddTxnMarkerListener(fn func(tp kernel.TopicPartition, mk kernel.TxnMarker, offset int64)) {
	m.markerMu.Lock()
	defer m.markerMu.Unlock()
	fns := slices.Clone(m.listeners())
	m.markerFns.Store(&markerListeners{fns: append(fns, fn)})
}

// listeners returns the registered marker listeners (nil: none).
func (m *Module) listeners() []func(tp kernel.TopicPartition, mk kernel.TxnMarker, offset int64) {
	if l := m.markerFns.Load(); l != nil {
		return l.fns
	}
	return nil
}

// markerListeners is the copy-on-write list of listeners.
type markerListeners struct {
	fns []func(tp kernel.TopicPartition, mk kernel.TxnMarker, offset int64)
}

// WriteTxnMarker appends mk to tp as its leader and returns once it is committed; see
// kernel.TxnMarkerWriter. The marker is stamped with this node's leader epoch and the
// current time, and written like a produce with acks=all.
func (m *Module) WriteTxnMarker(ctx context.Context, tp kernel.TopicPartition, mk kernel.TxnMarker) error {
	ws := []markerWrite{{tp: tp, m: mk}}
	if err := m.writeMarkers(ctx, ws, time.Duration(1<<63-1)); err != nil {
		return err
	}
	err := ws[0].err
	switch {
	case errors.Is(err, ErrNotLeader):
		return fmt.Errorf("write marker to %s: %w", tp, kernel.ErrNotLeader)
	case errors.Is(err, ErrClosed):
		return fmt.Errorf("write marker to %s: %w (%w)", tp, kernel.ErrNotLeader, ErrClosed)
	case err != nil:
		return fmt.Errorf("write marker to %s: %w", tp, err)
	}
	return nil
}

// writeMarkers appends every marker of ws to its partition, then waits until all of
// them are committed (HW past the marker) or failed, or timeout passes; each write's
// err says how it ended. Markers of internal topics are handed to the TxnMarkerHook
// listeners once committed. The returned error is ctx's (or errStopped): the caller
// is going away.
func (m *Module) writeMarkers(ctx context.Context, ws []markerWrite, timeout time.Duration) error {
	im := m.meta.Image()
	hooks := len(m.listeners()) > 0
	now := m.now().UnixMilli()
	var keys []kernel.TopicPartition
	for i := range ws {
		w := &ws[i]
		w.p = m.partition(w.tp)
		if w.p == nil {
			w.err = ErrNotLeader
			continue
		}
		batch := recordbatch.BuildMarker(w.m.ProducerID, w.m.ProducerEpoch,
			recordbatch.Marker{Commit: w.m.Commit, CoordinatorEpoch: w.m.CoordinatorEpoch}, now)
		mk := &markerAppend{m: w.m}
		if t := im.Topic(w.tp.Topic); hooks && t != nil && t.Internal {
			mk.queue, w.hook = true, true
		}
		res, epoch, err := w.p.appendLocked(batch, nil, true, mk)
		if err != nil {
			w.err, w.hook = err, false
			continue
		}
		m.produceBytes.Add(int64(len(batch)))
		w.offset, w.epoch = res.BaseOffset, epoch
		keys = append(keys, w.tp)
	}
	if len(keys) == 0 {
		return nil
	}
	try := func() bool {
		all := true
		for i := range ws {
			w := &ws[i]
			if w.done || w.err != nil {
				continue
			}
			// As for acks=all: committed once the HW passes the marker with the ISR at
			// least min.insync.replicas.
			done, err := w.p.ackState(w.offset, w.epoch)
			switch {
			case !done:
				all = false
			case err != nil:
				w.err = err
			default:
				w.done = true
			}
		}
		return all
	}
	done, err := m.pg.wait(ctx, keys, timeout, try)
	if !done {
		for i := range ws {
			if w := &ws[i]; !w.done && w.err == nil {
				w.err = errMarkerTimeout
			}
		}
	}
	// Committed markers (and any earlier committed ones of the same partitions) go to
	// the listeners, even when the caller is going away or the write failed after the
	// append (the ISR shrank): what is below the HW is committed, whatever the answer.
	for i := range ws {
		if w := &ws[i]; w.hook {
			w.p.deliverMarkers(m.listeners())
		}
	}
	return err
}

// deliverMarkers hands the queued markers below the HW to fns, in log order. deliverMu
// is held across the calls, so a later caller (whose marker is behind these in the
// queue) waits until they returned: listeners see a partition's markers in log order
// and a writer returns only after its own marker was delivered.
func (p *Partition) deliverMarkers(fns []func(tp kernel.TopicPartition, mk kernel.TxnMarker, offset int64)) {
	p.deliverMu.Lock()
	defer p.deliverMu.Unlock()
	p.mu.Lock()
	hw := p.hw.Load()
	n := 0
	for n < len(p.markers) && p.markers[n].offset < hw {
		n++
	}
	due := slices.Clone(p.markers[:n])
	p.markers = slices.Delete(p.markers, 0, n)
	p.mu.Unlock()
	for _, q := range due {
		for _, fn := range fns {
			fn(p.tp, q.m, q.offset)
		}
	}
}

var (
	_ kernel.TxnMarkerWriter = (*Module)(nil)
	_ kernel.TxnMarkerHook   = (*Module)(nil)
)
