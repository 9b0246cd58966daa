package metadata

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/metadata/image"
)

func publishN(h *hub, from, n int) {
	for i := from; i < from+n; i++ {
		s := &image.State{Image: &kernel.Image{Version: uint64(i)}}
		h.publish(s)
	}
}

func TestSubscribeInOrder(t *testing.T) {
	h := newHub()
	var mu sync.Mutex
	var got []uint64
	cancel := h.subscribe(func(im *kernel.Image) {
		mu.Lock()
		got = append(got, im.Version)
		mu.Unlock()
	})
	defer cancel()
	publishN(h, 1, 100)
	waitFor(t, 5*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 101 })
	for i, v := range got {
		if v != uint64(i) {
			t.Fatalf("image %d has version %d (got %v)", i, v, got)
		}
	}
}

func TestSubscribeCancelWaitsForFn(t *testing.T) {
	h := newHub()
	inFn, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	cancel := h.subscribe(func(*kernel.Image) {
		if calls.Add(1) == 1 {
			close(inFn)
			<-release
		}
	})
	<-inFn
	publishN(h, 1, 5)
	done := make(chan struct{})
	go func() { cancel(); close(done) }()
	select {
	case <-done:
		t.Fatal("cancel returned while fn was running")
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	<-done
	if n := calls.Load(); n != 1 {
		t.Errorf("fn called %d times; queued images must be dropped after cancel", n)
	}
	cancel() // idempotent
}

func TestWaitFor(t *testing.T) {
	h := newHub()
	go publishN(h, 1, 10)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.waitFor(ctx, func(im *kernel.Image) bool { return im.Version == 10 }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := h.waitFor(ctx, func(im *kernel.Image) bool { return false }); err == nil {
		t.Fatal("waitFor returned without its condition")
	}
}

// TestHubHammer subscribes and cancels from many goroutines while one publishes, as
// modules do while the FSM applies.
func TestHubHammer(t *testing.T) {
	h := newHub()
	stop := make(chan struct{})
	var pub sync.WaitGroup
	pub.Add(1)
	go func() {
		defer pub.Done()
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			default:
				publishN(h, i, 1)
			}
		}
	}()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < 20; n++ {
				var last uint64
				var bad atomic.Bool
				var seen atomic.Int32
				cancel := h.subscribe(func(im *kernel.Image) {
					if im.Version < last {
						bad.Store(true)
					}
					last = im.Version
					seen.Add(1)
				})
				for seen.Load() < 2 {
					time.Sleep(time.Microsecond)
				}
				cancel()
				if bad.Load() {
					t.Error("versions went backwards")
				}
				_ = h.image()
			}
		}()
	}
	wg.Wait()
	close(stop)
	pub.Wait()
	h.closeAll()
}

func TestSubscribeAfterClose(t *testing.T) {
	h := newHub()
	h.closeAll()
	called := false
	cancel := h.subscribe(func(*kernel.Image) { called = true })
	publishN(h, 1, 1)
	cancel()
	if called {
		t.Error("subscriber of a stopped hub was called")
	}
}
