package metadata

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/metadata/image"
)

// hub holds the current state and hands new images to subscribers. publish never
// blocks: each subscriber has a one-image mailbox drained by its own goroutine.
//
// Guarantees to a subscriber (kernel.Metadata.Subscribe):
//   - its first call has the image current at subscribe time, or a newer one;
//   - later calls have the latest image at the time the previous call returned: images
//     published while fn runs are coalesced (a slow subscriber skips versions and so
//     holds at most one pending image, never a queue of every version);
//   - versions only increase from one call to the next (publish runs under mu in log
//     order, and the mailbox keeps the newest), so it never sees an older image after
//     a newer one;
//   - calls are sequential, from one goroutine; cancel waits for a running call.
//
// A subscriber finds what changed since its previous call with kernel.DiffTopics, at a
// cost proportional to the change.
type hub struct {
	cur atomic.Pointer[image.State]

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every publish
	subs    map[*subscriber]struct{}
	closed  bool // after closeAll: no new subscribers
}

func newHub() *hub {
	h := &hub{changed: make(chan struct{}), subs: map[*subscriber]struct{}{}}
	h.cur.Store(image.EmptyState())
	return h
}

func (h *hub) state() *image.State { return h.cur.Load() }

func (h *hub) image() *kernel.Image { return h.cur.Load().Image }

// publish makes s current and hands its image to every subscriber's mailbox.
func (h *hub) publish(s *image.State) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cur.Store(s)
	for sub := range h.subs {
		sub.push(s.Image)
	}
	close(h.changed)
	h.changed = make(chan struct{})
}

// waitFor returns once ok holds for the current image, or ctx is done.
func (h *hub) waitFor(ctx context.Context, ok func(*kernel.Image) bool) error {
	for {
		h.mu.Lock()
		im, ch := h.cur.Load().Image, h.changed
		h.mu.Unlock()
		if ok(im) {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// subscribe starts a goroutine calling fn with the current image and then the latest
// one each time it changes. After closeAll it does nothing.
func (h *hub) subscribe(fn func(*kernel.Image)) (cancel func()) {
	s := &subscriber{fn: fn, wake: make(chan struct{}, 1), done: make(chan struct{})}
	h.mu.Lock()
	if h.closed { // the module stopped: no goroutine nobody would stop
		h.mu.Unlock()
		return func() {}
	}
	s.push(h.cur.Load().Image)
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	go s.run()
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			delete(h.subs, s)
			h.mu.Unlock()
			s.stop()
		})
	}
}

// closeAll stops every subscriber (the module is stopping).
func (h *hub) closeAll() {
	h.mu.Lock()
	subs := h.subs
	h.subs = map[*subscriber]struct{}{}
	h.closed = true
	h.mu.Unlock()
	for s := range subs {
		s.stop()
	}
}

type subscriber struct {
	fn   func(*kernel.Image)
	wake chan struct{} // capacity 1: "the mailbox may be full"
	done chan struct{} // closed when run returns

	mu      sync.Mutex
	pending *kernel.Image // newest image not yet handed to fn; nil when none
	last    *kernel.Image // the image fn was last called with
	stopped bool
}

// push puts im in the mailbox, replacing an older pending image.
func (s *subscriber) push(im *kernel.Image) {
	s.mu.Lock()
	if s.pending == nil || im.Version >= s.pending.Version {
		s.pending = im
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *subscriber) run() {
	defer close(s.done)
	for range s.wake {
		for {
			s.mu.Lock()
			if s.stopped {
				s.mu.Unlock()
				return
			}
			im := s.pending
			s.pending = nil
			if im == nil {
				s.mu.Unlock()
				break
			}
			if s.last != nil && (im == s.last || im.Version < s.last.Version) {
				s.mu.Unlock()
				continue // nothing newer than what fn has seen
			}
			s.last = im
			s.mu.Unlock()
			s.fn(im)
		}
	}
}

// stop makes run return after the fn call in progress, and waits for it. It must not
// be called from fn.
func (s *subscriber) stop() {
	s.mu.Lock()
	s.stopped = true
	s.pending = nil
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	<-s.done
}
