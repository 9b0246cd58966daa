// Package pmap is a persistent hash map (a hash array mapped trie): Set and Delete
// return a new Map that shares every node but the O(log32 n) on the changed key's path
// with the old one, and the old Map stays valid and unchanged. The metadata image keeps
// its topics in it, so applying one change costs the same on an image of ten topics or
// of a hundred thousand, and every image ever published stays readable without locks.
//
//	var m pmap.Map[string, *T]
//	m2 := m.Set("a", a)      // m is still empty
//	v, ok := m2.Get("a")
//	pmap.Diff(m, m2, func(k string, old, new *T, hadOld, hasNew bool) { ... })
//
// # Invariants
//
//   - A node is never modified once a Map holding it has been returned: Set and Delete
//     copy the path they change. Hence Maps are safe to read from any number of
//     goroutines and Diff may skip any subtree two Maps share by pointer.
//   - Keys hash with the Map's seed (maphash, random per lineage: a Map derived by Set
//     and Delete from another keeps its seed), so an adversary choosing keys cannot
//     aim them at one bucket. Diff of Maps of different lineages (say, one decoded
//     from a snapshot) falls back to comparing key by key.
//   - Below depth 13 (64 bits of hash used), keys with equal hashes share a collision
//     node: a list searched linearly.
//
// # Concurrency
//
// None needed: Maps are values over immutable nodes.
package pmap

import (
	"hash/maphash"
	"iter"
	"math/bits"
)

const (
	bitsPerLevel = 5
	fanout       = 1 << bitsPerLevel
	maxShift     = 64 // at this shift a node is a collision list
)

// Map is a persistent hash map. The zero Map is empty and ready to use. V must be
// comparable so that Set of an equal value can keep the Map unchanged and Diff can
// tell changed values (for pointers: identity).
type Map[K comparable, V comparable] struct {
	root *node[K, V]
	n    int
	seed *maphash.Seed // nil until the first Set
	// testHash replaces maphash in tests (to force collisions); nil otherwise.
	testHash func(K) uint64
}

type node[K comparable, V comparable] struct {
	bitmap uint32       // which of the 32 slots are present (unused in a collision list)
	kids   []slot[K, V] // present slots in bit order, or the collision list
}

type slot[K comparable, V comparable] struct {
	sub  *node[K, V] // non-nil: a subtree; else a leaf
	hash uint64
	key  K
	val  V
}

// Len returns the number of keys.
func (m Map[K, V]) Len() int { return m.n }

func (m Map[K, V]) hash(k K) uint64 {
	if m.testHash != nil {
		return m.testHash(k)
	}
	return maphash.Comparable(*m.seed, k)
}

// Get returns the value of k.
func (m Map[K, V]) Get(k K) (v V, ok bool) {
	if m.root == nil {
		return v, false
	}
	h := m.hash(k)
	n := m.root
	for shift := uint(0); ; shift += bitsPerLevel {
		if shift >= maxShift {
			for _, s := range n.kids {
				if s.key == k {
					return s.val, true
				}
			}
			return v, false
		}
		bit := uint32(1) << ((h >> shift) & (fanout - 1))
		if n.bitmap&bit == 0 {
			return v, false
		}
		s := &n.kids[bits.OnesCount32(n.bitmap&(bit-1))]
		if s.sub == nil {
			if s.key == k {
				return s.val, true
			}
			return v, false
		}
		n = s.sub
	}
}

// Set returns m with k set to v. When k already has v, it returns m itself.
func (m Map[K, V]) Set(k K, v V) Map[K, V] {
	if m.seed == nil {
		seed := maphash.MakeSeed()
		m.seed = &seed
	}
	root, added, changed := set(m.root, slot[K, V]{hash: m.hash(k), key: k, val: v}, 0)
	if !changed {
		return m
	}
	m.root = root
	if added {
		m.n++
	}
	return m
}

// set returns n with leaf l stored; added when the key is new, changed false when n
// already held exactly l (then n itself is returned).
func set[K comparable, V comparable](n *node[K, V], l slot[K, V], shift uint) (out *node[K, V], added, changed bool) {
	if shift >= maxShift {
		if n == nil {
			return &node[K, V]{kids: []slot[K, V]{l}}, true, true
		}
		for i, s := range n.kids {
			if s.key == l.key {
				if s.val == l.val {
					return n, false, false
				}
				c := n.clone(0)
				c.kids[i].val = l.val
				return c, false, true
			}
		}
		c := n.clone(1)
		c.kids = append(c.kids, l)
		return c, true, true
	}
	bit := uint32(1) << ((l.hash >> shift) & (fanout - 1))
	if n == nil {
		return &node[K, V]{bitmap: bit, kids: []slot[K, V]{l}}, true, true
	}
	i := bits.OnesCount32(n.bitmap & (bit - 1))
	if n.bitmap&bit == 0 {
		c := &node[K, V]{bitmap: n.bitmap | bit, kids: make([]slot[K, V], len(n.kids)+1)}
		copy(c.kids, n.kids[:i])
		c.kids[i] = l
		copy(c.kids[i+1:], n.kids[i:])
		return c, true, true
	}
	s := n.kids[i]
	var ns slot[K, V]
	switch {
	case s.sub != nil:
		sub, a, ch := set(s.sub, l, shift+bitsPerLevel)
		if !ch {
			return n, false, false
		}
		ns, added = slot[K, V]{sub: sub}, a
	case s.key == l.key:
		if s.val == l.val {
			return n, false, false
		}
		ns = l
	default: // two keys in one slot: push both a level down
		sub, _, _ := set(nil, s, shift+bitsPerLevel)
		sub, _, _ = set(sub, l, shift+bitsPerLevel)
		ns, added = slot[K, V]{sub: sub}, true
	}
	c := n.clone(0)
	c.kids[i] = ns
	return c, added, true
}

func (n *node[K, V]) clone(extra int) *node[K, V] {
	c := &node[K, V]{bitmap: n.bitmap, kids: make([]slot[K, V], len(n.kids), len(n.kids)+extra)}
	copy(c.kids, n.kids)
	return c
}

// Delete returns m without k (m itself when it has no k).
func (m Map[K, V]) Delete(k K) Map[K, V] {
	if m.root == nil {
		return m
	}
	root, removed := del(m.root, m.hash(k), k, 0)
	if !removed {
		return m
	}
	m.root = root
	m.n--
	return m
}

// del returns n without k (nil when nothing is left).
func del[K comparable, V comparable](n *node[K, V], h uint64, k K, shift uint) (*node[K, V], bool) {
	if shift >= maxShift {
		for i, s := range n.kids {
			if s.key == k {
				if len(n.kids) == 1 {
					return nil, true
				}
				c := &node[K, V]{kids: make([]slot[K, V], 0, len(n.kids)-1)}
				c.kids = append(append(c.kids, n.kids[:i]...), n.kids[i+1:]...)
				return c, true
			}
		}
		return n, false
	}
	bit := uint32(1) << ((h >> shift) & (fanout - 1))
	if n.bitmap&bit == 0 {
		return n, false
	}
	i := bits.OnesCount32(n.bitmap & (bit - 1))
	s := n.kids[i]
	var ns slot[K, V]
	switch {
	case s.sub != nil:
		sub, removed := del(s.sub, h, k, shift+bitsPerLevel)
		if !removed {
			return n, false
		}
		switch {
		case sub == nil:
			return n.without(i, bit), true
		case len(sub.kids) == 1 && sub.kids[0].sub == nil:
			ns = sub.kids[0] // a lone leaf moves up
		default:
			ns = slot[K, V]{sub: sub}
		}
	case s.key == k:
		return n.without(i, bit), true
	default:
		return n, false
	}
	c := n.clone(0)
	c.kids[i] = ns
	return c, true
}

// without returns n minus its slot i (bit), or nil when that was the last.
func (n *node[K, V]) without(i int, bit uint32) *node[K, V] {
	if len(n.kids) == 1 {
		return nil
	}
	c := &node[K, V]{bitmap: n.bitmap &^ bit, kids: make([]slot[K, V], 0, len(n.kids)-1)}
	c.kids = append(append(c.kids, n.kids[:i]...), n.kids[i+1:]...)
	return c
}

// All yields every key and value, in no particular order (the same for equal Maps of
// one lineage).
func (m Map[K, V]) All() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) { walk(m.root, yield) }
}

func walk[K comparable, V comparable](n *node[K, V], yield func(K, V) bool) bool {
	if n == nil {
		return true
	}
	for i := range n.kids {
		s := &n.kids[i]
		if s.sub != nil {
			if !walk(s.sub, yield) {
				return false
			}
		} else if !yield(s.key, s.val) {
			return false
		}
	}
	return true
}

// Diff calls fn for every key whose value differs between a and b: old/hadOld from a,
// new/hasNew from b. Maps of one lineage (b derived from a by Set and Delete, or both
// from a common Map) are compared by walking only the nodes they do not share, so the
// cost is proportional to the changes between them, not to their size.
func Diff[K comparable, V comparable](a, b Map[K, V], fn func(k K, old, new V, hadOld, hasNew bool)) {
	if a.root == b.root {
		return
	}
	if a.seed != nil && b.seed != nil && a.seed != b.seed {
		var zero V
		for k, nv := range b.All() {
			if ov, ok := a.Get(k); !ok || ov != nv {
				fn(k, ov, nv, ok, true)
			}
		}
		for k, ov := range a.All() {
			if _, ok := b.Get(k); !ok {
				fn(k, ov, zero, true, false)
			}
		}
		return
	}
	diffNode(a.root, b.root, 0, fn)
}

func diffNode[K comparable, V comparable](x, y *node[K, V], shift uint, fn func(k K, old, new V, hadOld, hasNew bool)) {
	var zero V
	switch {
	case x == y:
		return
	case x == nil:
		walk(y, func(k K, v V) bool { fn(k, zero, v, false, true); return true })
		return
	case y == nil:
		walk(x, func(k K, v V) bool { fn(k, v, zero, true, false); return true })
		return
	case shift >= maxShift: // collision lists: short
		for _, sy := range y.kids {
			found := false
			for _, sx := range x.kids {
				if sx.key == sy.key {
					found = true
					if sx.val != sy.val {
						fn(sy.key, sx.val, sy.val, true, true)
					}
				}
			}
			if !found {
				fn(sy.key, zero, sy.val, false, true)
			}
		}
		for _, sx := range x.kids {
			found := false
			for _, sy := range y.kids {
				found = found || sx.key == sy.key
			}
			if !found {
				fn(sx.key, sx.val, zero, true, false)
			}
		}
		return
	}
	for union := x.bitmap | y.bitmap; union != 0; union &= union - 1 {
		bit := union & -union
		sx, sy := slotAt(x, bit), slotAt(y, bit)
		switch {
		case sx == nil || sy == nil || sx.sub != nil || sy.sub != nil:
			diffNode(asNode(sx, shift), asNode(sy, shift), shift+bitsPerLevel, fn)
		case sx.key == sy.key:
			if sx.val != sy.val {
				fn(sy.key, sx.val, sy.val, true, true)
			}
		default:
			fn(sx.key, sx.val, zero, true, false)
			fn(sy.key, zero, sy.val, false, true)
		}
	}
}

func slotAt[K comparable, V comparable](n *node[K, V], bit uint32) *slot[K, V] {
	if n.bitmap&bit == 0 {
		return nil
	}
	return &n.kids[bits.OnesCount32(n.bitmap&(bit-1))]
}

// asNode returns the subtree a slot at shift stands for: its subtree, a one-leaf node
// one level down for a leaf, nil for no slot.
func asNode[K comparable, V comparable](s *slot[K, V], shift uint) *node[K, V] {
	switch {
	case s == nil:
		return nil
	case s.sub != nil:
		return s.sub
	}
	n, _, _ := set(nil, *s, shift+bitsPerLevel)
	return n
}
