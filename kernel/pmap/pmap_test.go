package pmap

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
)

// model checks m against a Go map.
func model(t *testing.T, m Map[int, int], want map[int]int) {
	t.Helper()
	if m.Len() != len(want) {
		t.Fatalf("Len %d, want %d", m.Len(), len(want))
	}
	for k, v := range want {
		if got, ok := m.Get(k); !ok || got != v {
			t.Fatalf("Get(%d) = %d, %v; want %d", k, got, ok, v)
		}
	}
	seen := map[int]int{}
	for k, v := range m.All() {
		if _, dup := seen[k]; dup {
			t.Fatalf("All yields %d twice", k)
		}
		seen[k] = v
	}
	if !maps.Equal(seen, want) {
		t.Fatalf("All = %v, want %v", seen, want)
	}
}

// diffModel checks Diff(a, b) against the difference of the Go maps.
func diffModel(t *testing.T, a, b Map[int, int], wa, wb map[int]int) {
	t.Helper()
	got := map[int][2]int{}
	Diff(a, b, func(k, ov, nv int, hadOld, hasNew bool) {
		if _, dup := got[k]; dup {
			t.Fatalf("Diff reports %d twice", k)
		}
		if !hadOld {
			ov = -1
		}
		if !hasNew {
			nv = -1
		}
		got[k] = [2]int{ov, nv}
	})
	want := map[int][2]int{}
	for k, v := range wb {
		if ov, ok := wa[k]; !ok {
			want[k] = [2]int{-1, v}
		} else if ov != v {
			want[k] = [2]int{ov, v}
		}
	}
	for k, v := range wa {
		if _, ok := wb[k]; !ok {
			want[k] = [2]int{v, -1}
		}
	}
	if !maps.Equal(got, want) {
		t.Fatalf("Diff = %v, want %v", got, want)
	}
}

func TestModel(t *testing.T) {
	hashes := []struct {
		name string
		fn   func(int) uint64
	}{
		{"maphash", nil},
		{"collide", func(k int) uint64 { return uint64(k % 7) }},     // deep paths, collision lists
		{"fewbits", func(k int) uint64 { return uint64(k%5) << 60 }}, // collisions past the first level
	}
	for _, h := range hashes {
		t.Run(h.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			m := Map[int, int]{testHash: h.fn}
			want := map[int]int{}
			var snaps []Map[int, int]
			var wants []map[int]int
			for i := range 3000 {
				k := rng.IntN(300)
				switch rng.IntN(3) {
				case 0:
					m = m.Delete(k)
					delete(want, k)
				default:
					v := rng.IntN(4)
					m = m.Set(k, v)
					want[k] = v
				}
				if i%97 == 0 {
					model(t, m, want)
					snaps = append(snaps, m)
					wants = append(wants, maps.Clone(want))
				}
			}
			model(t, m, want)
			for i := range snaps { // old maps are unchanged, and diff against any
				model(t, snaps[i], wants[i])
				diffModel(t, snaps[i], m, wants[i], want)
				diffModel(t, m, snaps[i], want, wants[i])
			}
			for k := range want {
				m = m.Delete(k)
			}
			model(t, m, map[int]int{})
			if m.root != nil {
				t.Fatal("empty map keeps nodes")
			}
		})
	}
}

func TestSetSameValueKeepsMap(t *testing.T) {
	m := Map[string, *int]{}
	v := new(int)
	m = m.Set("a", v).Set("b", new(int))
	if m2 := m.Set("a", v); m2.root != m.root {
		t.Fatal("Set of an equal value copied the path")
	}
	if m2 := m.Delete("zz"); m2.root != m.root {
		t.Fatal("Delete of a missing key copied the path")
	}
}

func TestDiffOtherLineage(t *testing.T) {
	var a, b Map[string, int]
	for i := range 100 {
		a = a.Set(fmt.Sprint(i), i)
		b = b.Set(fmt.Sprint(i+1), i+1)
	}
	n := 0
	Diff(a, b, func(k string, ov, nv int, hadOld, hasNew bool) {
		n++
		if hadOld == hasNew {
			t.Errorf("key %s differs but is in both", k)
		}
	})
	if n != 2 { // "0" removed, "100" added
		t.Fatalf("%d differences, want 2", n)
	}
}

// BenchmarkSet: one Set on maps of growing size (cost should grow as log32 n).
func BenchmarkSet(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			var m Map[int, int]
			for i := range n {
				m = m.Set(i, i)
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				_ = m.Set(i%n, -i)
			}
		})
	}
}
