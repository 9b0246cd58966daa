package quota

import (
	"hash/maphash"
	"math/bits"
)

// The entities of a Set live in a persistent hash trie: a node is a leaf (a short
// slice of items) or a branch of trieFanout children chosen by trieBits bits of the
// entity's hash, lowest bits first. Nodes are never changed once built: put and del
// copy the path from the root to the leaf they change (depth ~log16(n/trieLeaf)) and
// share every other node with the old trie.
//
// Shape invariant: a node is a branch exactly when it holds more than trieLeaf items
// and is above trieMaxDepth (where the hash bits run out and a leaf holds every item
// whose 64-bit hash is equal). So the shape depends only on the items, not on the
// order of puts and dels.
const (
	trieBits     = 4
	trieFanout   = 1 << trieBits
	trieLeaf     = 8
	trieMaxDepth = 64 / trieBits
)

type item struct {
	h uint64
	e Entity
	v Values // never changed once in a trie
}

type node struct {
	size  int     // items under this node
	items []item  // leaf: the items, in no order
	kids  []*node // branch: trieFanout children (nil: none), else nil
}

// slot is the child index of hash h at depth.
func slot(h uint64, depth int) int {
	return int(h>>(uint(depth)*trieBits)) & (trieFanout - 1)
}

// get returns the values of e (hash h) under n.
func get(n *node, h uint64, e Entity) (Values, bool) {
	for depth := 0; n != nil; depth++ {
		if n.kids == nil {
			for i := range n.items {
				if it := &n.items[i]; it.h == h && it.e == e {
					return it.v, true
				}
			}
			return nil, false
		}
		n = n.kids[slot(h, depth)]
	}
	return nil, false
}

// build returns a node at depth holding items (distinct entities; the slice is not
// kept).
func build(items []item, depth int) *node {
	if len(items) == 0 {
		return nil
	}
	if len(items) <= trieLeaf || depth >= trieMaxDepth {
		return &node{size: len(items), items: append([]item(nil), items...)}
	}
	var groups [trieFanout][]item
	for _, it := range items {
		s := slot(it.h, depth)
		groups[s] = append(groups[s], it)
	}
	b := &node{size: len(items), kids: make([]*node, trieFanout)}
	for i := range groups {
		b.kids[i] = build(groups[i], depth+1)
	}
	return b
}

// put returns n with it added, or replacing the item of the same entity; added
// reports which.
func put(n *node, depth int, it item) (_ *node, added bool) {
	if n == nil {
		return &node{size: 1, items: []item{it}}, true
	}
	if n.kids == nil {
		for i := range n.items {
			if n.items[i].h == it.h && n.items[i].e == it.e {
				items := append([]item(nil), n.items...)
				items[i] = it
				return &node{size: n.size, items: items}, false
			}
		}
		items := make([]item, 0, len(n.items)+1)
		items = append(append(items, n.items...), it)
		return build(items, depth), true
	}
	s := slot(it.h, depth)
	kid, added := put(n.kids[s], depth+1, it)
	b := &node{size: n.size, kids: append([]*node(nil), n.kids...)}
	b.kids[s] = kid
	if added {
		b.size++
	}
	return b, added
}

// del returns n without the item of e (hash h); removed reports whether it was there.
func del(n *node, depth int, h uint64, e Entity) (_ *node, removed bool) {
	if n == nil {
		return nil, false
	}
	if n.kids == nil {
		for i := range n.items {
			if n.items[i].h == h && n.items[i].e == e {
				if n.size == 1 {
					return nil, true
				}
				items := make([]item, 0, len(n.items)-1)
				items = append(append(items, n.items[:i]...), n.items[i+1:]...)
				return &node{size: n.size - 1, items: items}, true
			}
		}
		return n, false
	}
	s := slot(h, depth)
	kid, removed := del(n.kids[s], depth+1, h, e)
	if !removed {
		return n, false
	}
	b := &node{size: n.size - 1, kids: append([]*node(nil), n.kids...)}
	b.kids[s] = kid
	if b.size <= trieLeaf {
		items := make([]item, 0, b.size)
		walk(b, func(it *item) { items = append(items, *it) })
		return &node{size: b.size, items: items}, true
	}
	return b, true
}

// walk calls fn for every item under n, in no particular order.
func walk(n *node, fn func(*item)) {
	if n == nil {
		return
	}
	for i := range n.items {
		fn(&n.items[i])
	}
	for _, k := range n.kids {
		walk(k, fn)
	}
}

// Hashing. An entity's hash combines per-component hashes, so Resolve hashes the user
// and client names once and combines them for each precedence level.

// nameHash is the hash of a user or client-id name.
func nameHash(seed maphash.Seed, name string) uint64 { return maphash.String(seed, name) }

// ipHash is the hash of e's (canonical) IP address.
func ipHash(seed maphash.Seed, e Entity) uint64 {
	b := e.ip.As16()
	return maphash.Bytes(seed, b[:])
}

// combine mixes component hashes (0 for an absent or default component) and the
// entity's component bits into its hash.
func combine(hu, hc, hip uint64, has uint8) uint64 {
	x := hu ^ bits.RotateLeft64(hc, 21) ^ bits.RotateLeft64(hip, 42) ^ uint64(has)*0x9e3779b97f4a7c15
	// splitmix64's finalizer.
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// hashEntity is e's hash under seed.
func hashEntity(seed maphash.Seed, e Entity) uint64 {
	var hu, hc, hip uint64
	if e.has&(hasUser|userDefault) == hasUser {
		hu = nameHash(seed, e.user)
	}
	if e.has&(hasClient|clientDefault) == hasClient {
		hc = nameHash(seed, e.client)
	}
	if e.has&(hasIP|ipDefault) == hasIP {
		hip = ipHash(seed, e)
	}
	return combine(hu, hc, hip, e.has)
}
