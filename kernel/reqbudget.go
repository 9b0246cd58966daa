package kernel

import (
	"errors"
	"sync"
)

// The broker-wide request budget (queued.max.request.bytes).
//
// Every frame's declared size is reserved here when its size prefix has been read,
// before any of its body is read, and released once the request is answered (or its
// frame dropped). While the budget is spent, readers wait instead of reading their
// sockets, so clients see TCP back-pressure, never an error; memory follows the
// budget whatever clients send. A frame's buffer still grows only as its bytes arrive
// (ReadFrame), so a reservation costs no memory until the bytes come.
//
// Two lanes keep stalled large requests from starving ordinary traffic:
//
//	large frames (> limit/16): FIFO among themselves, together at most limit-reserve
//	                           (reserve = limit/4), but one large frame is always
//	                           admitted when no other large frame holds any budget;
//	small frames (<= limit/16): admitted whenever the total fits, so the reserve is
//	                           always theirs; while a large frame waits they may use
//	                           only the reserve, so the large lane drains to it.
//
// So clients that announce big requests and stall (or trickle) hold at most
// limit-reserve between them, and a producer's small requests keep flowing through
// the reserve. A frame never needs more than the whole budget: New refuses a budget
// smaller than socket.request.max.bytes (as Kafka does), and a reservation is clamped
// to the limit anyway, so a frame as large as the budget is admitted alone.
//
// Invariant: used == large + small <= limit; every acquire that returned nil is
// matched by exactly one release of the same n. Lock order: a conn's dmu is never held
// while taking mu.
type requestBudget struct {
	limit   int64 // > 0
	reserve int64 // part of limit only small frames use
	smallN  int64 // frames of at most smallN bytes are small

	mu           sync.Mutex
	large, small int64
	// waiters are the large frames waiting, oldest first; each is woken (its channel
	// closed) once admitted.
	waiters []*budgetWaiter
	// changed wakes small frames waiting when budget is released.
	changed broadcast
}

type budgetWaiter struct {
	n     int64
	ready chan struct{}
	done  bool // admitted (guarded by mu)
}

// errBudgetCancelled: the wait for request budget ended because the connection is
// stopping or closed.
var errBudgetCancelled = errors.New("request budget wait cancelled")

func newRequestBudget(limit int64) *requestBudget {
	return &requestBudget{limit: limit, reserve: limit / 4, smallN: limit / 16}
}

// clamp bounds a reservation to the whole budget.
func (b *requestBudget) clamp(n int64) int64 { return min(n, b.limit) }

// acquire reserves n bytes (clamped), waiting while they do not fit; it returns
// errBudgetCancelled once stop or quit is closed. blocked, when not nil, is called once if
// the frame has to wait (for the back-pressure metric and log).
func (b *requestBudget) acquire(n int64, stop, quit <-chan struct{}, blocked func()) error {
	n = b.clamp(n)
	if n <= b.smallN {
		return b.acquireSmall(n, stop, quit, blocked)
	}
	b.mu.Lock()
	if len(b.waiters) == 0 && b.fitsLarge(n) {
		b.large += n
		b.mu.Unlock()
		return nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()
	if blocked != nil {
		blocked()
	}
	select {
	case <-w.ready:
		return nil
	case <-stop:
	case <-quit:
	}
	b.mu.Lock()
	if w.done {
		b.large -= n // admitted as we gave up: hand it back
	} else {
		b.waiters = removeWaiter(b.waiters, w)
	}
	// The head (or its absence) changed: the next large frame or small ones may fit.
	b.admitLocked()
	b.wakeSmallLocked()
	b.mu.Unlock()
	return errBudgetCancelled
}

func (b *requestBudget) acquireSmall(n int64, stop, quit <-chan struct{}, blocked func()) error {
	waited := false
	for {
		b.mu.Lock()
		if b.smallFitsLocked(n) {
			b.small += n
			b.mu.Unlock()
			return nil
		}
		ch := b.changed.wait()
		b.mu.Unlock()
		if !waited && blocked != nil {
			waited = true
			blocked()
		}
		select {
		case <-ch:
		case <-stop:
			return errBudgetCancelled
		case <-quit:
			return errBudgetCancelled
		}
	}
}

// smallFitsLocked reports whether a small frame of n bytes may be admitted now (mu
// held): when the total fits and, while a large frame waits, within the reserve and
// without taking the room the head waiter is waiting for (when only small frames stand
// in its way), so it cannot be starved.
func (b *requestBudget) smallFitsLocked(n int64) bool {
	if b.large+b.small+n > b.limit {
		return false
	}
	if len(b.waiters) == 0 {
		return true
	}
	if b.small+n > b.reserve {
		return false
	}
	head := b.waiters[0].n
	if b.large == 0 || b.large+head <= b.limit-b.reserve {
		return b.large+b.small+n+head <= b.limit
	}
	return true
}

// fitsLarge reports whether a large frame of n bytes may be admitted now (mu held).
func (b *requestBudget) fitsLarge(n int64) bool {
	if b.large+b.small+n > b.limit {
		return false
	}
	return b.large == 0 || b.large+n <= b.limit-b.reserve
}

// admitLocked admits waiting large frames in order while the head fits (mu held).
func (b *requestBudget) admitLocked() {
	for len(b.waiters) > 0 && b.fitsLarge(b.waiters[0].n) {
		w := b.waiters[0]
		b.waiters[0] = nil
		b.waiters = b.waiters[1:]
		b.large += w.n
		w.done = true
		close(w.ready)
	}
}

func (b *requestBudget) wakeSmallLocked() {
	b.changed.wake()
}

// release returns n bytes (as given to acquire) to the budget.
func (b *requestBudget) release(n int64) {
	n = b.clamp(n)
	b.mu.Lock()
	if n <= b.smallN {
		b.small -= n
	} else {
		b.large -= n
	}
	b.admitLocked()
	b.wakeSmallLocked()
	b.mu.Unlock()
}

// inUse returns the bytes reserved now (for metrics and tests).
func (b *requestBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.large + b.small
}

func removeWaiter(ws []*budgetWaiter, w *budgetWaiter) []*budgetWaiter {
	for i, x := range ws {
		if x == w {
			return append(ws[:i], ws[i+1:]...)
		}
	}
	return ws
}

// broadcast wakes every goroutine waiting for a change of the state its owner's mutex
// guards. The channel is made only when someone waits, so a change with no waiter (the
// common case: every request's release) allocates nothing. Guarded by the owner's
// mutex; the zero value is ready.
type broadcast struct{ ch chan struct{} }

// wait returns a channel closed at the next wake.
func (b *broadcast) wait() <-chan struct{} {
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}

// wake wakes the waiters, if any.
func (b *broadcast) wake() {
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
	}
}
