package console

import (
	"fmt"
	"testing"
	"time"
)

// The lag history keeps lag_samples per group, at most maxWatched groups (the
// least recently read go first), and forgets groups unread for watchWindow.
func TestLagHistoryBounds(t *testing.T) {
	h := newLagHistory(3)
	t0 := time.UnixMilli(1_000_000)
	for i := range 5 {
		h.record("g", lagSample{AtMs: t0.Add(time.Duration(i) * time.Second).UnixMilli(), Lag: int64(i)})
	}
	got := h.record("g", lagSample{AtMs: t0.Add(4500 * time.Millisecond).UnixMilli(), Lag: 9})
	if len(got) != 3 || got[0].Lag != 2 || got[2].Lag != 9 || got[2].AtMs != t0.Add(4*time.Second).UnixMilli() {
		t.Fatalf("samples %+v: want the last 3, the newest updated in place", got)
	}
	for i := range maxWatched + 5 {
		h.record(fmt.Sprintf("w%02d", i), lagSample{AtMs: t0.Add(time.Duration(10+i) * time.Second).UnixMilli()})
	}
	if n := len(h.watched); n != maxWatched {
		t.Fatalf("%d groups watched, want %d", n, maxWatched)
	}
	if _, ok := h.samples["g"]; ok {
		t.Fatal("the least recently read group was not evicted")
	}
	h.sample("unwatched", lagSample{AtMs: t0.UnixMilli()})
	if _, ok := h.samples["unwatched"]; ok {
		t.Fatal("a background sample started a history for a group nobody reads")
	}
	if due := h.due(t0.Add(watchWindow + time.Hour)); len(due) != 0 || len(h.samples) != 0 {
		t.Fatalf("after the window: due %v, %d histories left", due, len(h.samples))
	}
}
