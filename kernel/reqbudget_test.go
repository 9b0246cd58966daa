package kernel

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Many goroutines taking and giving back reservations of mixed sizes never hold more
// than the limit between them, and every one of them gets through.
func TestRequestBudgetHammer(t *testing.T) {
	const limit = 1 << 20
	b := newRequestBudget(limit)
	var held, peak atomic.Int64
	var wg sync.WaitGroup
	never := make(chan struct{})
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range 300 {
				n := int64(1 + r.IntN(limit/8))
				if r.IntN(4) == 0 {
					n = int64(limit/4 + r.IntN(limit)) // large, some over the limit (clamped)
				}
				if err := b.acquire(n, never, never, nil); err != nil {
					t.Error(err)
					return
				}
				c := b.clamp(n)
				h := held.Add(c)
				for p := peak.Load(); h > p && !peak.CompareAndSwap(p, h); p = peak.Load() {
				}
				held.Add(-c)
				b.release(n)
			}
		}()
	}
	wg.Wait()
	if p := peak.Load(); p > limit {
		t.Fatalf("%d bytes held at once, limit %d", p, limit)
	}
	if u := b.inUse(); u != 0 {
		t.Fatalf("%d bytes still reserved after every release", u)
	}
}

// Large frames that hold their reservations (stalled senders) leave the reserve to
// small frames, and a waiting large frame gives up cleanly when cancelled.
func TestRequestBudgetReserveAndCancel(t *testing.T) {
	const limit = 64 << 20
	b := newRequestBudget(limit)
	never := make(chan struct{})
	if err := b.acquire(32<<20, never, never, nil); err != nil {
		t.Fatal(err)
	}
	// A second 32 MiB frame would pass limit-reserve (48 MiB): it waits.
	stop := make(chan struct{})
	got := make(chan error, 1)
	waited := make(chan struct{})
	go func() { got <- b.acquire(32<<20, stop, never, func() { close(waited) }) }()
	<-waited
	// Small frames still get in, up to the reserve.
	for range 4 {
		if err := acquireWithin(b, 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	if err := <-got; err != errBudgetCancelled {
		t.Fatalf("cancelled wait returned %v", err)
	}
	if u := b.inUse(); u != 32<<20+4<<20 {
		t.Fatalf("in use %d after the cancelled wait", u)
	}
	// A frame as large as the budget is admitted once everything else is gone.
	done := make(chan error, 1)
	go func() { done <- b.acquire(limit+1, never, never, nil) }()
	for range 4 {
		b.release(1 << 20)
	}
	b.release(32 << 20)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a frame of the whole budget was never admitted")
	}
	b.release(limit + 1)
	if b.inUse() != 0 {
		t.Fatal("budget not empty")
	}
}

func acquireWithin(b *requestBudget, n int64) error {
	stop := make(chan struct{})
	t := time.AfterFunc(5*time.Second, func() { close(stop) })
	defer t.Stop()
	return b.acquire(n, stop, nil, nil)
}

func TestRateLimiter(t *testing.T) {
	r := newRateLimiter(10)
	now := time.Unix(1000, 0)
	for i := range 10 {
		if d := r.take(now); d != 0 {
			t.Fatalf("take %d of the burst waited %v", i, d)
		}
	}
	if d := r.take(now); d < 90*time.Millisecond || d > 110*time.Millisecond {
		t.Fatalf("11th take waits %v, want ~100ms", d)
	}
	if d := r.take(now.Add(time.Second)); d != 0 {
		t.Fatalf("after a second: waited %v", d)
	}
}
