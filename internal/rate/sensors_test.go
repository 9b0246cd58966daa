package rate

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestSensorsBasic(t *testing.T) {
	m := NewSensors[string](Config{}, 0)
	if m.max != DefaultMax {
		t.Fatalf("max %d, want %d", m.max, DefaultMax)
	}
	if d := m.RecordAndThrottle("a", 2000, 100, t0); d != 10*time.Second {
		t.Errorf("throttle %v, want 10s", d)
	}
	if d := m.Throttle("a", 100, at(time.Second)); d != 10*time.Second {
		t.Errorf("Throttle %v, want 10s", d)
	}
	m.Unrecord("a", 1000, at(time.Second))
	if r := m.Rate("a", at(time.Second)); r != 100 {
		t.Errorf("rate %v, want 100", r)
	}
	// Unknown keys: zero, and not added.
	if m.Rate("b", t0) != 0 || m.Throttle("b", 1, t0) != 0 {
		t.Error("unknown key: nonzero")
	}
	m.Unrecord("b", 1, t0)
	if n := m.Len(); n != 1 {
		t.Errorf("Len %d, want 1", n)
	}
}

// keysOf lists m's keys, sorted.
func keysOf(m *Sensors[string]) []string {
	var ks []string
	m.Each(t0, func(k string, _ float64) { ks = append(ks, k) })
	slices.Sort(ks)
	return ks
}

func TestSensorsBoundDropsIdleFirst(t *testing.T) {
	m := NewSensors[string](Config{}, 4)
	m.RecordAndThrottle("a", 1, 0, t0)
	m.RecordAndThrottle("b", 1, 0, t0)
	m.RecordAndThrottle("c", 1, 0, at(5*time.Second))
	m.RecordAndThrottle("d", 1, 0, at(5*time.Second))
	// At 11 s a and b are idle; c and d are the least recently used but not idle.
	m.RecordAndThrottle("e", 1, 0, at(11*time.Second))
	if got, want := keysOf(m), []string{"c", "d", "e"}; !slices.Equal(got, want) {
		t.Errorf("keys %v, want %v (every idle sensor dropped, no other)", got, want)
	}
}

func TestSensorsBoundDropsLeastRecentlyUsed(t *testing.T) {
	m := NewSensors[string](Config{}, 4)
	for i, k := range []string{"a", "b", "c", "d"} {
		m.RecordAndThrottle(k, 1, 0, at(time.Duration(i)*time.Second))
	}
	m.Throttle("a", 1, at(4*time.Second)) // a check is a use
	m.RecordAndThrottle("e", 1, 0, at(5*time.Second))
	if got, want := keysOf(m), []string{"a", "c", "d", "e"}; !slices.Equal(got, want) {
		t.Errorf("keys %v, want %v (b least recently used)", got, want)
	}
	m.Rate("c", at(6*time.Second)) // reading a rate is not a use
	m.Each(at(6*time.Second), func(string, float64) {})
	m.RecordAndThrottle("f", 1, 0, at(6*time.Second))
	if got, want := keysOf(m), []string{"a", "d", "e", "f"}; !slices.Equal(got, want) {
		t.Errorf("keys %v, want %v (c least recently used)", got, want)
	}
	m.Unrecord("d", 1, at(7*time.Second)) // an unrecord is a use
	m.RecordAndThrottle("g", 1, 0, at(7*time.Second))
	if got, want := keysOf(m), []string{"d", "e", "f", "g"}; !slices.Equal(got, want) {
		t.Errorf("keys %v, want %v (a least recently used)", got, want)
	}
}

// With a larger bound a full map frees a batch of the least recently used at once.
func TestSensorsBoundBatch(t *testing.T) {
	const max = 1000 // batch 16
	m := NewSensors[int](Config{}, max)
	for i := range max {
		m.RecordAndThrottle(i, 1, 0, t0.Add(time.Duration(i)*time.Millisecond))
	}
	m.RecordAndThrottle(max, 1, 0, at(2*time.Second))
	if n, want := m.Len(), max+1-16; n != want {
		t.Fatalf("Len %d, want %d", n, want)
	}
	for i := range max + 1 {
		if got, want := m.Rate(i, at(2*time.Second)) > 0, i >= 16; got != want {
			t.Errorf("key %d kept %v, want %v", i, got, want)
		}
	}
	// Fill it again, then make 7 idle and stamp the rest in key order.
	for i := max + 1; i < max+16; i++ {
		m.RecordAndThrottle(i, 1, 0, at(2*time.Second))
	}
	for i := 23; i < max+16; i++ {
		m.RecordAndThrottle(i, 1, 0, at(12*time.Second+time.Duration(i)*time.Microsecond))
	}
	// Fewer idle than a batch: all of them go, and the least recently used make 16.
	m.RecordAndThrottle(2000, 1, 0, at(13*time.Second))
	present := map[int]bool{}
	m.Each(at(13*time.Second), func(k int, _ float64) { present[k] = true })
	var gone []int
	for i := 16; i < max+16; i++ {
		if !present[i] {
			gone = append(gone, i)
		}
	}
	// 7 idle (16 to 22) and the 9 least recently used (23 to 31).
	want := []int{16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31}
	if !slices.Equal(gone, want) || !present[2000] || len(present) != max-15 {
		t.Errorf("dropped %v, want %v; %d left, want %d", gone, want, len(present), max-15)
	}
}

func TestSensorsSweep(t *testing.T) {
	m := NewSensors[string](Config{}, 10)
	if n := m.Sweep(t0); n != 0 {
		t.Fatalf("Sweep on an empty map: %d", n)
	}
	m.RecordAndThrottle("a", 1, 0, t0)
	m.RecordAndThrottle("b", 1, 0, at(3*time.Second))
	m.RecordAndThrottle("c", 1, 0, at(6*time.Second))
	if n := m.Sweep(at(10 * time.Second)); n != 0 {
		t.Errorf("Sweep at 10 s dropped %d, want 0", n)
	}
	if n := m.Sweep(at(14 * time.Second)); n != 2 {
		t.Errorf("Sweep at 14 s dropped %d, want 2", n)
	}
	if got, want := keysOf(m), []string{"c"}; !slices.Equal(got, want) {
		t.Errorf("keys %v, want %v", got, want)
	}
	// A sensor that a check left without samples is idle too.
	m.Throttle("c", 1, at(20*time.Second))
	if n := m.Sweep(at(20 * time.Second)); n != 1 || m.Len() != 0 {
		t.Errorf("Sweep at 20 s dropped %d, Len %d; want 1, 0", n, m.Len())
	}
	m.RecordAndThrottle("d", math.NaN(), 0, at(30*time.Second)) // nothing recorded
	if n := m.Sweep(at(30 * time.Second)); n != 1 {
		t.Errorf("Sweep of a sensor with nothing recorded: %d, want 1", n)
	}
}

func TestSensorsEach(t *testing.T) {
	m := NewSensors[int](Config{}, 100)
	for i := range 50 {
		m.RecordAndThrottle(i, float64(10*i), 0, t0)
	}
	got := map[int]float64{}
	m.Each(t0, func(k int, r float64) {
		got[k] = r
		m.RecordAndThrottle(1000+k, 1, 0, t0) // fn may use the map
	})
	if len(got) != 50 {
		t.Fatalf("Each saw %d keys, want 50", len(got))
	}
	for k, r := range got {
		if r != float64(k) {
			t.Errorf("key %d: rate %v, want %v", k, r, float64(k))
		}
	}
}

// A record that finds a sensor just dropped looks the key up again, so it lands in the
// map, not in the dropped sensor.
func TestSensorsDroppedEntryIsNotRecordedInto(t *testing.T) {
	m := NewSensors[string](Config{}, 10)
	m.RecordAndThrottle("a", 100, 0, t0)
	m.mu.RLock()
	old := m.m["a"]
	m.mu.RUnlock()
	old.mu.Lock()
	done := make(chan struct{})
	go func() {
		m.RecordAndThrottle("a", 50, 0, t0) // blocks on old.mu, or finds no "a"
		close(done)
	}()
	m.mu.Lock()
	delete(m.m, "a")
	old.dead = true
	m.mu.Unlock()
	old.mu.Unlock()
	<-done
	if r := m.Rate("a", t0); r != 5 {
		t.Errorf("rate %v, want 50/10 in a new sensor", r)
	}
	if r := old.s.Rate(t0); r != 10 {
		t.Errorf("dropped sensor's rate %v, want 100/10", r)
	}
}

// Many goroutines on few keys, at one instant: nothing is lost.
func TestSensorsHammer(t *testing.T) {
	const (
		P    = 16
		N    = 2000
		keys = 4
	)
	m := NewSensors[int](Config{}, 10)
	var wg sync.WaitGroup
	for p := range P {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range N {
				k := (p + i) % keys
				m.RecordAndThrottle(k, 1, 1e9, t0)
				if i%10 == 0 {
					m.Unrecord(k, 0, t0)
					m.Throttle(k, 1, t0)
					m.Rate(k, t0)
				}
			}
		}()
	}
	wg.Wait()
	var total float64
	m.Each(t0, func(_ int, r float64) { total += r * 10 })
	if total != P*N {
		t.Errorf("recorded %v, want %d", total, P*N)
	}
}

// Many goroutines on more keys than the bound, with sweeps and metrics running: the
// bound holds and the race detector finds nothing.
func TestSensorsHammerChurn(t *testing.T) {
	const (
		P   = 8
		N   = 3000
		max = 16
	)
	m := NewSensors[string](Config{}, max)
	keys := make([]string, 64)
	for i := range keys {
		keys[i] = fmt.Sprint("client-", i)
	}
	var clock atomic.Int64 // fake ns since t0, shared
	now := func() time.Time { return t0.Add(time.Duration(clock.Add(int64(time.Millisecond)))) }
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var side sync.WaitGroup
	side.Add(1)
	go func() {
		defer side.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			m.Sweep(now())
			m.Each(now(), func(string, float64) {})
			if n := m.Len(); n > max {
				t.Errorf("Len %d over the bound %d", n, max)
			}
		}
	}()
	for p := range P {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range N {
				k := keys[(p*7+i*13)%len(keys)]
				m.RecordAndThrottle(k, 100, 1000, now())
				m.Throttle(k, 1000, now())
				m.Unrecord(k, 10, now())
			}
		}()
	}
	wg.Wait()
	close(stop)
	side.Wait()
	if n := m.Len(); n > max {
		t.Errorf("Len %d over the bound %d", n, max)
	}
}
