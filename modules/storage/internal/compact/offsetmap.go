package compact

import (
	"encoding/binary"
	"hash/maphash"
	"math/bits"
)

// slotSize is one entry of the offset map: a 128-bit key hash and the offset + 1 (0
// marks a free slot). Kafka's SkimpyOffsetMap uses the same 24 bytes (MD5 + offset).
const slotSize = 24

// minSlots keeps tiny passes from sizing a useless table.
const minSlots = 1024

// OffsetMap maps record keys to the latest offset seen for them, in a fixed amount of
// memory: an open-addressing table of 24-byte slots, sized per pass for the records it
// may hold and never beyond the budget given to NewOffsetMap
// (log.cleaner.dedupe.buffer.size / log.cleaner.threads). Keys are not stored, only two
// independent 64-bit hashes of them (seeded afresh per pass); two keys that collide on
// all 128 bits would be taken for one, the same risk Kafka takes with MD5.
//
// It is filled up to loadFactor of its slots (log.cleaner.io.buffer.load.factor); the
// cleaner asks Room before mapping a batch and stops at the first batch that may not
// fit, so a log with more keys than the map holds is cleaned in several passes.
//
// Not safe for concurrent use: each cleaner thread owns one.
type OffsetMap struct {
	maxSlots   int
	loadFactor float64
	slots      []byte
	n          uint64 // slots in use by this pass's table
	used       int
	limit      int
	s1, s2     maphash.Seed
}

// NewOffsetMap returns a map that never holds more than budget bytes of slots.
func NewOffsetMap(budget int64, loadFactor float64) *OffsetMap {
	if loadFactor <= 0 || loadFactor > 1 {
		loadFactor = 0.9
	}
	return &OffsetMap{maxSlots: int(max(budget/slotSize, 1)), loadFactor: loadFactor}
}

// Reset empties the map for a pass that may see up to want records, sizing the table
// to min(want / loadFactor, budget) slots (reusing the previous table's memory when it
// is large enough).
func (m *OffsetMap) Reset(want int64) {
	n := int64(float64(want)/m.loadFactor) + 1
	n = min(max(n, minSlots), int64(m.maxSlots))
	if cap(m.slots) >= int(n)*slotSize {
		m.slots = m.slots[:n*slotSize]
		clear(m.slots)
	} else {
		m.slots = make([]byte, n*slotSize)
	}
	m.n = uint64(n)
	m.used = 0
	m.limit = int(float64(n) * m.loadFactor)
	m.s1, m.s2 = maphash.MakeSeed(), maphash.MakeSeed()
}

// Room is how many more distinct keys fit.
func (m *OffsetMap) Room() int { return m.limit - m.used }

// Len is the number of distinct keys held.
func (m *OffsetMap) Len() int { return m.used }

// Bytes is the memory of the current table.
func (m *OffsetMap) Bytes() int { return len(m.slots) }

// Capacity is the most keys a pass can hold within the budget.
func (m *OffsetMap) Capacity() int { return int(float64(m.maxSlots) * m.loadFactor) }

// find returns the slot of key: the one holding its hash, or the free slot where it
// would go.
func (m *OffsetMap) find(key []byte) (slot []byte, h1, h2 uint64) {
	h1, h2 = maphash.Bytes(m.s1, key), maphash.Bytes(m.s2, key)
	i, _ := bits.Mul64(h1, m.n)
	for {
		s := m.slots[i*slotSize : (i+1)*slotSize]
		if binary.LittleEndian.Uint64(s[16:]) == 0 ||
			(binary.LittleEndian.Uint64(s) == h1 && binary.LittleEndian.Uint64(s[8:]) == h2) {
			return s, h1, h2
		}
		if i++; i == m.n {
			i = 0
		}
	}
}

// Put records offset as key's latest. The caller checked Room (a new key needs one
// slot); offsets put for one key must not decrease.
func (m *OffsetMap) Put(key []byte, offset int64) {
	s, h1, h2 := m.find(key)
	if binary.LittleEndian.Uint64(s[16:]) == 0 {
		if m.used >= m.limit {
			panic("compact: offset map overfilled") // Room was not checked: a bug
		}
		m.used++
		binary.LittleEndian.PutUint64(s, h1)
		binary.LittleEndian.PutUint64(s[8:], h2)
	}
	binary.LittleEndian.PutUint64(s[16:], uint64(offset)+1)
}

// Get returns the latest offset put for key.
func (m *OffsetMap) Get(key []byte) (int64, bool) {
	if m.n == 0 {
		return 0, false
	}
	s, _, _ := m.find(key)
	v := binary.LittleEndian.Uint64(s[16:])
	return int64(v) - 1, v != 0
}
