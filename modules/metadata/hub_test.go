package metadata

import (
	"context"
	"fmt"
	"maps"
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
	waitFor(t, 5*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) > 0 && got[len(got)-1] == 100 })
	mu.Lock()
	defer mu.Unlock()
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Fatalf("versions not increasing: %v", got)
		}
	}
}

// TestSubscribeCoalesces: a subscriber busy while 1,000 images are published is next
// called once, with the newest, not 1,000 times.
func TestSubscribeCoalesces(t *testing.T) {
	h := newHub()
	inFn, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var got []uint64
	cancel := h.subscribe(func(im *kernel.Image) {
		mu.Lock()
		got = append(got, im.Version)
		first := len(got) == 1
		mu.Unlock()
		if first {
			close(inFn)
			<-release
		}
	})
	defer cancel()
	<-inFn
	publishN(h, 1, 1000)
	close(release)
	waitFor(t, 5*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 2 })
	mu.Lock()
	defer mu.Unlock()
	if got[0] != 0 || got[1] != 1000 {
		t.Fatalf("calls with versions %v, want [0 1000]", got)
	}
}

// TestSubscribeDiffTopics: a subscriber that keeps its previous image sees, through
// kernel.DiffTopics, exactly the topics changed since then, however many images were
// coalesced in between.
func TestSubscribeDiffTopics(t *testing.T) {
	h := newHub()
	st := image.EmptyState()
	apply := func(r image.Record) {
		t.Helper()
		next, err := st.Apply(st.Image.Version+1, r)
		if err != nil {
			t.Fatal(err)
		}
		st = next
		h.publish(st)
	}
	for i := range 200 {
		apply(&image.CreateTopicRecord{Name: fmt.Sprint("t", i), ID: image.UUID{byte(i), 1},
			Partitions: []image.PartitionAssignment{{Replicas: []int32{1}, Leader: 1, ISR: []int32{1}}}})
	}
	var mu sync.Mutex
	var prev *kernel.Image
	changed := map[string]int{} // name -> times reported
	cancel := h.subscribe(func(im *kernel.Image) {
		mu.Lock()
		defer mu.Unlock()
		if prev != nil {
			kernel.DiffTopics(prev, im, func(before, after *kernel.TopicImage) {
				switch {
				case after != nil:
					changed[after.Name]++
				default:
					changed[before.Name]++
				}
			})
		}
		prev = im
	})
	defer cancel()
	waitFor(t, 5*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return prev != nil })
	apply(&image.DeleteTopicRecord{Name: "t3", ID: image.UUID{3, 1}})
	apply(&image.CreateTopicRecord{Name: "new", ID: image.UUID{9, 9},
		Partitions: []image.PartitionAssignment{{Replicas: []int32{1}, Leader: 1, ISR: []int32{1}}}})
	isr := []int32{1}
	apply(&image.PartitionChangeRecord{Topic: "t7", ID: image.UUID{7, 1}, Partition: 0, PartitionEpoch: -1, ISR: isr})
	last := st.Image.Version
	waitFor(t, 5*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return prev.Version == last })
	mu.Lock()
	defer mu.Unlock()
	want := map[string]int{"t3": 1, "new": 1, "t7": 1}
	if !maps.Equal(changed, want) {
		t.Fatalf("changes seen %v, want %v", changed, want)
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
