package rate

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// evictBatch divides Max (rounding up) to give how many sensors an insert into a full
// Sensors frees at least: the scan that finds them reads every sensor, so freeing
// Max/evictBatch at once bounds its cost to about evictBatch sensor reads per insert.
const evictBatch = 64

// Sensors is a concurrency-safe map of sensors by a comparable key K (a client id, a
// user, a (user, client id) pair), bounded in size: it holds at most Max sensors. Each
// sensor has its own lock, so calls on different keys run in parallel; the map itself
// is behind a read-write lock, taken for reading on a lookup and for writing only to add
// or drop sensors.
//
// When an insert finds the map full, it drops every idle sensor, and if that frees
// fewer than a batch (Max/64 rounded up), the least recently used sensors make up
// the rest: "used" is the latest now of a RecordAndThrottle, Throttle or Unrecord on the
// key (Rate and Each do not count). A batch, not one sensor, so that a stream of new
// keys into a full map costs one scan of the map per batch, not per key. Dropping is
// safe: a dropped sensor only forgets history, and a sensor that remembers less
// measures a lower rate, so the worst a drop does is let a client through that would
// have been throttled (under-throttle); it never blocks a client wrongly.
//
// The zero Sensors is not usable; create one with NewSensors.
type Sensors[K comparable] struct {
	p     *params
	max   int
	batch int

	mu      sync.RWMutex
	m       map[K]*entry
	base    time.Time  // the time origin of every sensor, set by the first insert
	based   bool       // base is set
	scratch []keyed[K] // the eviction heap, kept between evictions (held under mu)
}

// entry is one sensor of a Sensors with its lock.
type entry struct {
	mu   sync.Mutex
	dead bool   // dropped from the map: a caller that finds it looks the key up again
	s    Sensor // guarded by mu

	// Read without mu by the scans that pick sensors to drop, written under mu.
	used    atomic.Int64 // the LRU stamp: latest now of a keyed call, ns since base
	expires atomic.Int64 // s.expiry(): when s turns idle unless more is recorded
}

// keyed is an entry with its key (and LRU stamp while evicting).
type keyed[K comparable] struct {
	key  K
	e    *entry
	used int64
}

// NewSensors returns an empty map of sensors configured by c, holding at most max
// sensors (max <= 0: DefaultMax).
func NewSensors[K comparable](c Config, max int) *Sensors[K] {
	if max <= 0 {
		max = DefaultMax
	}
	return &Sensors[K]{
		p:     newParams(c),
		max:   max,
		batch: 1 + (max-1)/evictBatch,
		m:     make(map[K]*entry),
	}
}

// RecordAndThrottle records v for key (creating its sensor) and returns the throttle
// time for limit, as Sensor.RecordAndThrottle.
func (m *Sensors[K]) RecordAndThrottle(key K, v, limit float64, now time.Time) time.Duration {
	e := m.acquire(key, true, now)
	d := e.s.RecordAndThrottle(v, limit, now)
	e.touch(now)
	e.mu.Unlock()
	return d
}

// Throttle is the throttle time of key for limit at now without recording, as
// Sensor.Throttle; 0 for an unknown key (which it does not add).
func (m *Sensors[K]) Throttle(key K, limit float64, now time.Time) time.Duration {
	e := m.acquire(key, false, now)
	if e == nil {
		return 0
	}
	d := e.s.Throttle(limit, now)
	e.touch(now)
	e.mu.Unlock()
	return d
}

// Unrecord takes v back from key's newest sample, as Sensor.Unrecord; nothing for an
// unknown key.
func (m *Sensors[K]) Unrecord(key K, v float64, now time.Time) {
	e := m.acquire(key, false, now)
	if e == nil {
		return
	}
	e.s.Unrecord(v, now)
	e.touch(now)
	e.mu.Unlock()
}

// Rate is key's rate at now; 0 for an unknown key. It does not count as a use.
func (m *Sensors[K]) Rate(key K, now time.Time) float64 {
	e := m.acquire(key, false, now)
	if e == nil {
		return 0
	}
	r := e.s.Rate(now)
	e.mu.Unlock()
	return r
}

// Len is the number of sensors held, idle ones included until they are dropped.
func (m *Sensors[K]) Len() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.m)
}

// Sweep drops the sensors idle at now and returns how many it dropped. It finds them
// under the read lock and takes the write lock only to drop them.
func (m *Sensors[K]) Sweep(now time.Time) int {
	var idle []keyed[K]
	m.mu.RLock()
	if m.based {
		t := int64(now.Sub(m.base))
		for k, e := range m.m {
			if t >= e.expires.Load() {
				idle = append(idle, keyed[K]{key: k, e: e})
			}
		}
	}
	m.mu.RUnlock()
	if len(idle) == 0 {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, c := range idle {
		if m.m[c.key] == c.e && m.drop(c.key, c.e, now, true) {
			n++
		}
	}
	return n
}

// Each calls fn with every sensor's key and rate at now (for metrics), in no particular
// order. It copies the keys under the read lock and calls fn with no lock held; a sensor
// dropped meanwhile is skipped, one added meanwhile may be missed.
func (m *Sensors[K]) Each(now time.Time, fn func(key K, rate float64)) {
	m.mu.RLock()
	all := make([]keyed[K], 0, len(m.m))
	for k, e := range m.m {
		all = append(all, keyed[K]{key: k, e: e})
	}
	m.mu.RUnlock()
	for _, c := range all {
		c.e.mu.Lock()
		if c.e.dead {
			c.e.mu.Unlock()
			continue
		}
		r := c.e.s.Rate(now)
		c.e.mu.Unlock()
		fn(c.key, r)
	}
}

// acquire returns key's entry, locked, adding it if create (else nil for an unknown
// key). An entry dropped between the lookup and the lock is looked up again, so nothing
// is recorded into a sensor that is no longer in the map.
func (m *Sensors[K]) acquire(key K, create bool, now time.Time) *entry {
	for {
		m.mu.RLock()
		e := m.m[key]
		m.mu.RUnlock()
		if e == nil {
			if !create {
				return nil
			}
			e = m.insert(key, now)
		}
		e.mu.Lock()
		if !e.dead {
			return e
		}
		e.mu.Unlock()
	}
}

// insert returns key's entry, adding an empty one (after making room) if there is none.
func (m *Sensors[K]) insert(key K, now time.Time) *entry {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.m[key]; e != nil {
		return e
	}
	if !m.based {
		m.base, m.based = now, true
	}
	t := int64(now.Sub(m.base))
	if len(m.m) >= m.max {
		m.makeRoom(t, now)
	}
	e := &entry{}
	e.s.init(m.p)
	e.s.base, e.s.based = m.base, true
	e.used.Store(t)
	e.expires.Store(math.MinInt64)
	m.m[key] = e
	return e
}

// makeRoom drops at least one sensor, at least a batch if the map holds that many:
// every sensor idle at now (t in the map's nanoseconds), then the least recently used
// ones. The caller holds mu for writing.
func (m *Sensors[K]) makeRoom(t int64, now time.Time) {
	freed := 0
	for k, e := range m.m {
		if t >= e.expires.Load() && m.drop(k, e, now, true) {
			freed++
		}
	}
	need := m.batch - freed
	if need <= 0 {
		return
	}
	// The need least recently used, in a max-heap by stamp: its root is the most
	// recently used of those kept so far, the first to go when an older one turns up.
	h := m.scratch[:0]
	for k, e := range m.m {
		u := e.used.Load()
		switch {
		case len(h) < need:
			h = append(h, keyed[K]{key: k, e: e, used: u})
			heapUp(h, len(h)-1)
		case u < h[0].used:
			h[0] = keyed[K]{key: k, e: e, used: u}
			heapDown(h, 0)
		}
	}
	for _, c := range h {
		m.drop(c.key, c.e, now, false)
	}
	clear(h) // let go of the keys and entries
	m.scratch = h[:0]
}

// drop removes key's entry e, only if it is idle at now when idleOnly, and reports
// whether it did. The caller holds mu for writing; e's lock is taken after it (the lock
// order: m.mu, then an entry's mu; nothing takes m.mu holding an entry's mu).
func (m *Sensors[K]) drop(key K, e *entry, now time.Time, idleOnly bool) bool {
	e.mu.Lock()
	if idleOnly && !e.s.Idle(now) {
		e.expires.Store(e.s.expiry())
		e.mu.Unlock()
		return false
	}
	e.dead = true
	e.mu.Unlock()
	delete(m.m, key)
	return true
}

// touch stamps e used at now and refreshes its expiry. The caller holds e.mu.
func (e *entry) touch(now time.Time) {
	if t := int64(now.Sub(e.s.base)); t > e.used.Load() {
		e.used.Store(t)
	}
	e.expires.Store(e.s.expiry())
}

// heapUp and heapDown keep h a max-heap by used.
func heapUp[K comparable](h []keyed[K], i int) {
	for i > 0 {
		p := (i - 1) / 2
		if h[p].used >= h[i].used {
			return
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
}

func heapDown[K comparable](h []keyed[K], i int) {
	for {
		l, big := 2*i+1, i
		if l < len(h) && h[l].used > h[big].used {
			big = l
		}
		if r := l + 1; r < len(h) && h[r].used > h[big].used {
			big = r
		}
		if big == i {
			return
		}
		h[i], h[big] = h[big], h[i]
		i = big
	}
}
