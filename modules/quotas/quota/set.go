package quota

import (
	"fmt"
	"hash/maphash"
	"sort"
)

// Entry is one entity and its configured quotas.
type Entry struct {
	Entity Entity
	Values Values
}

// Set is every entity's configured quotas. It is immutable: Apply and With return a
// new Set sharing the unchanged parts, so readers may hold one without locks. The zero
// value is empty and usable, and so is a nil *Set.
type Set struct {
	seed maphash.Seed // zero until the first entity is added; shared by derived Sets
	root *node
	// count[k][shape] is how many entities of that shape set the key of index k, so
	// Resolve skips the precedence levels nobody configured.
	count [numKeys][numShapes]int
}

// Entity shapes: which of user and client-id an entity has and whether each is the
// default, or which ip it is. userPart*3+clientPart for user/client-id entities.
const (
	partNone = iota
	partName
	partDefault
)

const (
	shapeIPName    = 9
	shapeIPDefault = 10
	numShapes      = 11
)

// part is partNone, partName or partDefault for the component of bits has/def in e.
func part(e Entity, has, def uint8) int {
	switch {
	case e.has&has == 0:
		return partNone
	case e.has&def != 0:
		return partDefault
	}
	return partName
}

// shape is e's shape index.
func (e Entity) shape() int {
	if e.IsIP() {
		if e.has&ipDefault != 0 {
			return shapeIPDefault
		}
		return shapeIPName
	}
	return part(e, hasUser, userDefault)*3 + part(e, hasClient, clientDefault)
}

// FromEntries builds a Set from entries, such as those loaded from storage. Of two
// entries for one entity the later wins (an empty Values then removes the entity).
// Every entity must be valid and every value pass ValidateValue, else FromEntries
// returns an error naming the entity and builds nothing. Cost: O(n log n).
func FromEntries(entries []Entry) (*Set, error) {
	last := make(map[Entity]int, len(entries))
	for i, en := range entries {
		if !en.Entity.valid() {
			return nil, fmt.Errorf("entry %d: %w: the zero Entity", i, ErrInvalidEntity)
		}
		for k, v := range en.Values {
			if err := ValidateValue(en.Entity, k, v); err != nil {
				return nil, fmt.Errorf("entity %s: %w", en.Entity, err)
			}
		}
		last[en.Entity] = i
	}
	s := &Set{seed: maphash.MakeSeed()}
	items := make([]item, 0, len(last))
	for i, en := range entries {
		if last[en.Entity] != i || len(en.Values) == 0 {
			continue
		}
		it := item{h: hashEntity(s.seed, en.Entity), e: en.Entity, v: en.Values.clone()}
		items = append(items, it)
		s.countValues(en.Entity, it.v, 1)
	}
	s.root = build(items, 0)
	return s, nil
}

// countValues adds d to the counts of the known keys in v, set on e.
func (s *Set) countValues(e Entity, v Values, d int) {
	sh := e.shape()
	for key := range v {
		if k := keyIndex(key); k >= 0 {
			s.count[k][sh] += d
		}
	}
}

// Len is the number of entities with quotas.
func (s *Set) Len() int {
	if s == nil || s.root == nil {
		return 0
	}
	return s.root.size
}

// get returns the (shared, not to be changed) values of e.
func (s *Set) get(e Entity) (Values, bool) {
	if s == nil || s.root == nil || !e.valid() {
		return nil, false
	}
	return get(s.root, hashEntity(s.seed, e), e)
}

// Get returns a copy of e's quotas; ok is false when e has none.
func (s *Set) Get(e Entity) (_ Values, ok bool) {
	v, ok := s.get(e)
	if !ok {
		return nil, false
	}
	return v.clone(), true
}

// Entries returns every entity with its quotas (copies), ordered by Entity.Key.
func (s *Set) Entries() []Entry {
	return s.collect(func(Entity) bool { return true })
}

// collect returns the entries whose entity match accepts, ordered by Entity.Key.
func (s *Set) collect(match func(Entity) bool) []Entry {
	if s.Len() == 0 {
		return nil
	}
	type keyed struct {
		key string
		en  Entry
	}
	var ks []keyed
	walk(s.root, func(it *item) {
		if match(it.e) {
			ks = append(ks, keyed{it.e.Key(), Entry{Entity: it.e, Values: it.v.clone()}})
		}
	})
	sort.Slice(ks, func(i, j int) bool { return ks[i].key < ks[j].key })
	out := make([]Entry, len(ks))
	for i := range ks {
		out[i] = ks[i].en
	}
	return out
}

// Op is one AlterClientQuotas operation.
type Op struct {
	Key    string
	Value  float64
	Remove bool // Value ignored
}

// Apply applies ops to e's quotas, as one AlterClientQuotas entry. It first checks
// every op: a value set must pass ValidateValue, a key removed must be a key of e's
// kind (removing a key that is not set is a no-op), and no key may appear twice. It
// returns the new Set and e's resulting quotas (a copy; empty when every key was
// removed, and e is then gone from the Set). On error it returns s itself: nothing
// changes. Errors wrap ErrInvalidEntity (the zero Entity) or ErrInvalidQuota.
func (s *Set) Apply(e Entity, ops []Op) (*Set, Values, error) {
	if !e.valid() {
		return s, nil, fmt.Errorf("%w: the zero Entity", ErrInvalidEntity)
	}
	seen := make(map[string]struct{}, len(ops))
	for _, op := range ops {
		if _, dup := seen[op.Key]; dup {
			return s, nil, fmt.Errorf("%w: key %q given twice", ErrInvalidQuota, op.Key)
		}
		seen[op.Key] = struct{}{}
		var err error
		if op.Remove {
			err = checkKey(e, op.Key)
		} else {
			err = ValidateValue(e, op.Key, op.Value)
		}
		if err != nil {
			return s, nil, err
		}
	}
	cur, _ := s.get(e)
	next := make(Values, len(cur)+len(ops))
	for k, v := range cur {
		next[k] = v
	}
	for _, op := range ops {
		if op.Remove {
			delete(next, op.Key)
		} else {
			next[op.Key] = op.Value
		}
	}
	out := next.clone()
	if out == nil {
		out = Values{}
	}
	if next.equal(cur) {
		return s, out, nil
	}
	return s.with(e, next), out, nil
}

// With returns a Set where e has exactly vals (a nil or empty vals: e removed),
// unvalidated: for replaying stored records. vals is copied. With of the zero Entity
// returns s.
func (s *Set) With(e Entity, vals Values) *Set {
	if !e.valid() {
		return s
	}
	return s.with(e, vals.clone())
}

// with is With taking ownership of vals (nil or empty: remove).
func (s *Set) with(e Entity, vals Values) *Set {
	var ns Set
	if s != nil {
		ns = *s
	}
	if len(vals) == 0 {
		if ns.root == nil {
			return &ns
		}
		h := hashEntity(ns.seed, e)
		old, ok := get(ns.root, h, e)
		if !ok {
			return &ns
		}
		ns.root, _ = del(ns.root, 0, h, e)
		ns.countValues(e, old, -1)
		return &ns
	}
	if ns.seed == (maphash.Seed{}) {
		ns.seed = maphash.MakeSeed()
	}
	h := hashEntity(ns.seed, e)
	if old, ok := get(ns.root, h, e); ok {
		ns.countValues(e, old, -1)
	}
	ns.root, _ = put(ns.root, 0, item{h: h, e: e, v: vals})
	ns.countValues(e, vals, 1)
	return &ns
}
