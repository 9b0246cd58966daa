package diskguard

import (
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func fake(g *Guard) *atomic.Int64 {
	var free atomic.Int64
	g.SetStatfs(func(string) (int64, error) { return free.Load(), nil })
	return &free
}

func TestLevels(t *testing.T) {
	g := New(t.TempDir(), 100, nil)
	free := fake(g)
	for _, tc := range []struct {
		name          string
		free          int64
		state         State
		admit, critic bool // whether each refuses
	}{
		{"plenty", 1000, Writable, false, false},
		{"at the reserve", 100, Writable, false, false},
		{"below the reserve", 99, Low, true, false},
		{"at half", 50, Low, true, false},
		{"below half", 49, Critical, true, true},
		{"back up", 500, Writable, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			free.Store(tc.free)
			if _, err := g.Sample(); err != nil {
				t.Fatal(err)
			}
			if g.State() != tc.state {
				t.Fatalf("state %v, want %v", g.State(), tc.state)
			}
			if err := g.Admit(0); (err != nil) != tc.admit || (err != nil && !errors.Is(err, ErrLow)) {
				t.Fatalf("Admit: %v, want refused=%v", err, tc.admit)
			}
			if err := g.Critical(); (err != nil) != tc.critic {
				t.Fatalf("Critical: %v, want refused=%v", err, tc.critic)
			}
		})
	}
}

// Bytes admitted between samples count: a burst crosses into low before the next
// statfs sees it, and the sample after that sets the real figure.
func TestAdmitCounts(t *testing.T) {
	g := New(t.TempDir(), 100, nil)
	free := fake(g)
	free.Store(300)
	g.Sample()
	if err := g.Admit(150); err != nil {
		t.Fatal(err)
	}
	if err := g.Admit(100); err != nil { // crosses: admitted, the next is refused
		t.Fatal(err)
	}
	if err := g.Admit(1); !errors.Is(err, ErrLow) {
		t.Fatalf("after the crossing: %v", err)
	}
	g.Sample() // the file system still says 300: writable again
	if err := g.Admit(1); err != nil {
		t.Fatal(err)
	}
}

func TestOff(t *testing.T) {
	g := New(t.TempDir(), 0, nil)
	free := fake(g)
	free.Store(0)
	g.Sample()
	if g.Admit(1<<40) != nil || g.Critical() != nil {
		t.Fatal("a reserve of 0 refused a write")
	}
}

// The real statfs of a temp dir returns something positive.
func TestStatfs(t *testing.T) {
	g := New(t.TempDir(), 1, nil)
	free, err := g.Sample()
	if err != nil || free <= 0 {
		t.Fatalf("Sample: %d, %v", free, err)
	}
}

func TestHammer(t *testing.T) {
	g := New(t.TempDir(), 1000, nil)
	free := fake(g)
	free.Store(1 << 20)
	g.Sample()
	var wg sync.WaitGroup
	for p := 0; p < 8; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				_ = g.Admit(100)
				_ = g.Critical()
			}
		}()
	}
	for i := 0; i < 200; i++ {
		free.Store(int64(i%3) * 800)
		g.Sample()
	}
	wg.Wait()
	free.Store(1 << 20)
	g.Sample()
	if g.Admit(1) != nil {
		t.Fatal("not writable after space came back")
	}
}

func BenchmarkAdmit(b *testing.B) {
	g := New(b.TempDir(), 1<<30, nil)
	g.SetStatfs(func(string) (int64, error) { return 1 << 50, nil })
	g.Sample()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if g.Admit(1000) != nil {
				b.Fatal("refused")
			}
		}
	})
}

// A watched directory on another file system is judged by the same reserve: when it
// is the lowest, the state follows it and the error names it; not yet existing, its
// parent is sampled.
func TestWatch(t *testing.T) {
	data, other := t.TempDir(), t.TempDir()
	g := New(data, 100, nil)
	var dataFree, otherFree atomic.Int64
	dataFree.Store(1000)
	otherFree.Store(1000)
	g.SetStatfs(func(dir string) (int64, error) {
		switch dir {
		case data:
			return dataFree.Load(), nil
		case other:
			return otherFree.Load(), nil
		}
		return 0, errors.New("unexpected dir " + dir)
	})
	if err := g.Watch(filepath.Join(other, "groups", "offsets")); err != nil {
		t.Fatal(err)
	}
	if g.State() != Writable {
		t.Fatalf("state %v", g.State())
	}
	otherFree.Store(40)
	if _, err := g.Sample(); err != nil {
		t.Fatal(err)
	}
	err := g.Critical()
	if g.State() != Critical || !errors.Is(err, ErrLow) || !strings.Contains(err.Error(), other) || g.Low() != other {
		t.Fatalf("state %v, Critical %v, low %s", g.State(), err, g.Low())
	}
	otherFree.Store(1000)
	dataFree.Store(60)
	g.Sample()
	if err := g.Admit(0); g.State() != Low || err == nil || !strings.Contains(err.Error(), "data dir "+data) {
		t.Fatalf("state %v, Admit %v", g.State(), err)
	}
	dataFree.Store(1000)
	g.Sample()
	if g.Admit(1) != nil {
		t.Fatal("not writable once both have space")
	}
	if err := g.Watch(other); err != nil || len(g.extra) != 1 {
		t.Fatalf("watching the same dir twice: %v, %d extra", err, len(g.extra))
	}
}
