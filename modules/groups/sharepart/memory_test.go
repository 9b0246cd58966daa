package sharepart

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestMemoryBoundedByRuns acquires and releases a million offsets in big
// batches: the window must cost a handful of runs, not an entry per offset.
func TestMemoryBoundedByRuns(t *testing.T) {
	const n = 1_000_000
	p := New(Config{MaxLocks: n, MaxInFlight: n}, 0)
	var bs []Batch
	for off := int64(0); off < n; off += 10_000 {
		bs = append(bs, Batch{First: off, Last: off + 9_999})
	}
	wantRanges(t, "acquired", acquire(t, p, "a", bs, n, t0), Range{0, n - 1, 1})
	wantRuns := func(max int) {
		t.Helper()
		checkInvariants(t, p)
		if c := p.runCount(); c > max {
			t.Fatalf("%d runs, want at most %d", c, max)
		}
	}
	wantRuns(1)
	p.ReleaseMember("a", t0)
	wantRuns(1)
	if a, v, w := p.Stats(); a != 0 || v != n || w != n {
		t.Fatalf("Stats = %d %d %d", a, v, w)
	}

	// Redelivered piece by piece to four members, then all released: one run again.
	now := t0.Add(time.Second)
	for i := range 100 {
		from, ok := p.FetchOffset()
		if !ok {
			t.Fatalf("piece %d: nothing to fetch", i)
		}
		got := p.Acquire(fmt.Sprint("m", i%4), from, bs[from/10_000:], 10_000, false, now)
		wantRanges(t, "piece", got, Range{from, from + 9_999, 2})
	}
	wantRuns(100)
	for i := range 4 {
		p.ReleaseMember(fmt.Sprint("m", i), now)
	}
	wantRuns(1)

	// Half of it accepted in alternate pieces, the rest times out: the runs
	// follow the pieces, not the offsets.
	now = now.Add(time.Second)
	for i := range 100 {
		from, _ := p.FetchOffset()
		p.Acquire("a", from, bs[from/10_000:], 10_000, false, now)
		if i%2 == 0 {
			mustAck(t, p, "a", now, ack(from, from+9_999, Accept))
		}
	}
	wantRuns(100)
	p.Tick(now.Add(time.Hour))
	wantRuns(100)
	wantWindow(t, p, 10_000, n)
	if a, v, _ := p.Stats(); a != 0 || v != n/2 {
		t.Fatalf("Stats = %d acquired %d available", a, v)
	}
	if c := cap(p.runs); c > 1024 {
		t.Fatalf("runs slice capacity %d", c)
	}
}

// TestConcurrentMembers hammers one partition from several goroutines (run it
// with -race): no offset is ever held by two members, every offset is accepted
// exactly once, and the invariants hold at the end.
func TestConcurrentMembers(t *testing.T) {
	const (
		members = 8
		total   = 20_000
	)
	p := New(Config{MaxLocks: 300}, 0)
	var (
		mu       sync.Mutex
		owner    = map[int64]int{}
		accepted = map[int64]bool{}
		wg       sync.WaitGroup
		failed   = make(chan string, members)
	)
	for m := range members {
		wg.Go(func() {
			name := fmt.Sprint("m", m)
			for i := 0; p.StartOffset() < total; i++ {
				if i > 1_000_000 {
					failed <- name + ": no progress"
					return
				}
				from, ok := p.FetchOffset()
				if !ok || from >= total {
					continue
				}
				first := from - from%10
				var bs []Batch
				for off := first; off < min(first+50, total); off += 10 {
					bs = append(bs, Batch{First: off, Last: off + 9})
				}
				got := p.Acquire(name, from, bs, 20+m, m%2 == 0, t0)
				mu.Lock()
				for _, r := range got {
					for o := r.First; o <= r.Last; o++ {
						if prev, ok := owner[o]; ok {
							mu.Unlock()
							failed <- fmt.Sprintf("offset %d acquired by m%d while m%d holds it", o, m, prev)
							return
						}
						owner[o] = m
					}
				}
				var acks []AckBatch
				for j, r := range got {
					typ := Accept
					if (i+j)%5 == 0 {
						typ = Release
					}
					for o := r.First; o <= r.Last; o++ {
						delete(owner, o)
						if typ == Accept {
							if accepted[o] {
								mu.Unlock()
								failed <- fmt.Sprintf("offset %d accepted twice", o)
								return
							}
							accepted[o] = true
						}
					}
					acks = append(acks, ack(r.First, r.Last, typ))
				}
				mu.Unlock()
				if err := p.Acknowledge(name, acks, t0); err != nil {
					failed <- fmt.Sprintf("%s: ack %v: %v", name, acks, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(failed)
	for msg := range failed {
		t.Error(msg)
	}
	checkInvariants(t, p)
	if len(accepted) != total {
		t.Fatalf("%d offsets accepted, want %d", len(accepted), total)
	}
	wantWindow(t, p, total, total)
}
