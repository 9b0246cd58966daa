package replication

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/kernel"
)

// errStopped: the module is stopping; a waiting operation completes with what it has.
var errStopped = errors.New("replication: stopping")

// purgatory parks delayed operations (a fetch waiting for min_bytes, a produce waiting
// for acks=all) until something changes on one of the partitions they watch, they time
// out, their request is cancelled, or the module stops.
//
// An operation waits on the goroutine of the request that made it (the kernel's), so
// the purgatory owns no goroutines and needs no timer wheel: each waiter has one timer
// and one wake channel. A change (append, HW move, log start move, leadership change)
// calls wake for the partition, which signals every waiter watching it; the waiter then
// re-runs its completion check. There is no polling.
type purgatory struct {
	mu       sync.Mutex
	watchers map[kernel.TopicPartition]map[*waiter]struct{}
	// n counts registered waiters so that wake is a single atomic load when nobody
	// waits (the common case on the produce path).
	n atomic.Int64

	stop   chan struct{} // closed by close
	closed bool          // under mu
	active int           // waiting operations, under mu
	idle   chan struct{} // closed once closed && active == 0
}

type waiter struct {
	ch chan struct{} // cap 1: a pending wake is never lost and never blocks the waker
}

func newPurgatory() *purgatory {
	return &purgatory{
		watchers: make(map[kernel.TopicPartition]map[*waiter]struct{}),
		stop:     make(chan struct{}),
		idle:     make(chan struct{}),
	}
}

// wait returns when try reports done (true), the timeout passes (false, nil), ctx is
// done (false, ctx.Err()) or the purgatory closes (false, errStopped). try is called
// once before waiting, once more after the waiter is registered (so a change between
// the first check and the registration is not missed), and after every wake of one of
// keys. try runs on the caller's goroutine, never concurrently with itself.
func (pg *purgatory) wait(ctx context.Context, keys []kernel.TopicPartition, timeout time.Duration, try func() bool) (bool, error) {
	if try() {
		return true, nil
	}
	if timeout <= 0 {
		return false, nil
	}
	w := &waiter{ch: make(chan struct{}, 1)}
	if !pg.watch(w, keys) {
		return false, errStopped
	}
	defer pg.unwatch(w, keys)
	if try() {
		return true, nil
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case <-w.ch:
			if try() {
				return true, nil
			}
		case <-t.C:
			return false, nil
		case <-ctx.Done():
			return false, ctx.Err()
		case <-pg.stop:
			return false, errStopped
		}
	}
}

func (pg *purgatory) watch(w *waiter, keys []kernel.TopicPartition) bool {
	pg.mu.Lock()
	if pg.closed {
		pg.mu.Unlock()
		return false
	}
	pg.active++
	for _, k := range keys {
		set := pg.watchers[k]
		if set == nil {
			set = make(map[*waiter]struct{}, 1)
			pg.watchers[k] = set
		}
		set[w] = struct{}{}
	}
	pg.mu.Unlock()
	pg.n.Add(1)
	return true
}

func (pg *purgatory) unwatch(w *waiter, keys []kernel.TopicPartition) {
	pg.n.Add(-1)
	pg.mu.Lock()
	for _, k := range keys {
		if set := pg.watchers[k]; set != nil {
			delete(set, w)
			if len(set) == 0 {
				delete(pg.watchers, k)
			}
		}
	}
	pg.active--
	if pg.closed && pg.active == 0 {
		close(pg.idle)
	}
	pg.mu.Unlock()
}

// wake signals every operation watching tp. It never blocks.
func (pg *purgatory) wake(tp kernel.TopicPartition) {
	if pg.n.Load() == 0 {
		return
	}
	pg.mu.Lock()
	for w := range pg.watchers[tp] {
		select {
		case w.ch <- struct{}{}:
		default: // a wake is already pending
		}
	}
	pg.mu.Unlock()
}

// watching returns how many operations watch tp (tests).
func (pg *purgatory) watching(tp kernel.TopicPartition) int {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	return len(pg.watchers[tp])
}

// close makes every current and future wait return errStopped.
func (pg *purgatory) close() {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	if pg.closed {
		return
	}
	pg.closed = true
	close(pg.stop)
	if pg.active == 0 {
		close(pg.idle)
	}
}

// drain waits, after close, until no operation is waiting any more, or ctx is done.
func (pg *purgatory) drain(ctx context.Context) error {
	select {
	case <-pg.idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
