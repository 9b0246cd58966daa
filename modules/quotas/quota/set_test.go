package quota

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"sort"
	"testing"
)

// checkSet verifies s's internal invariants: sizes, the trie's shape, the hashes, no
// empty values, and the per-key counts.
func checkSet(t testing.TB, s *Set) {
	t.Helper()
	var want [numKeys][numShapes]int
	var check func(n *node, depth int, prefix uint64) int
	check = func(n *node, depth int, prefix uint64) int {
		if n == nil {
			return 0
		}
		mask := uint64(1)<<(uint(depth)*trieBits) - 1
		if n.kids == nil {
			if len(n.items) != n.size || n.size == 0 {
				t.Fatalf("leaf size %d with %d items", n.size, len(n.items))
			}
			if n.size > trieLeaf && depth < trieMaxDepth {
				t.Fatalf("leaf of %d items at depth %d", n.size, depth)
			}
			for _, it := range n.items {
				if it.h != hashEntity(s.seed, it.e) || it.h&mask != prefix {
					t.Fatalf("item %v in the wrong place", it.e)
				}
				if len(it.v) == 0 {
					t.Fatalf("entity %v with no values", it.e)
				}
				for key := range it.v {
					if k := keyIndex(key); k >= 0 {
						want[k][it.e.shape()]++
					}
				}
			}
			return n.size
		}
		if len(n.kids) != trieFanout || len(n.items) != 0 || n.size <= trieLeaf {
			t.Fatalf("bad branch of size %d at depth %d", n.size, depth)
		}
		total := 0
		for i, k := range n.kids {
			total += check(k, depth+1, prefix|uint64(i)<<(uint(depth)*trieBits))
		}
		if total != n.size {
			t.Fatalf("branch size %d, holds %d", n.size, total)
		}
		return total
	}
	if s == nil {
		return
	}
	check(s.root, 0, 0)
	if want != s.count {
		t.Fatalf("counts %v, want %v", s.count, want)
	}
}

// entriesMap is s's entries keyed by Entity.
func entriesMap(s *Set) map[Entity]Values {
	m := map[Entity]Values{}
	for _, en := range s.Entries() {
		m[en.Entity] = en.Values
	}
	return m
}

func TestApply(t *testing.T) {
	alice := mustEntity(t, user("alice"))
	ip := mustEntity(t, ipc("10.0.0.1"))
	var s0 Set // the zero value is usable
	if s0.Len() != 0 {
		t.Fatal("zero Set not empty")
	}

	s1, vals, err := s0.Apply(alice, []Op{{Key: ProducerByteRate, Value: 1000}, {Key: RequestPercentage, Value: 50}})
	if err != nil {
		t.Fatal(err)
	}
	want := Values{ProducerByteRate: 1000, RequestPercentage: 50}
	if !reflect.DeepEqual(vals, want) || s1.Len() != 1 {
		t.Fatalf("add: %v, len %d", vals, s1.Len())
	}
	if got, ok := s1.Get(alice); !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("Get = %v, %v", got, ok)
	}

	// Change one key, remove another, add a third.
	s2, vals, err := s1.Apply(alice, []Op{
		{Key: ProducerByteRate, Value: 2000},
		{Key: RequestPercentage, Remove: true, Value: 12},
		{Key: ConsumerByteRate, Value: 3000},
	})
	if err != nil {
		t.Fatal(err)
	}
	want2 := Values{ProducerByteRate: 2000, ConsumerByteRate: 3000}
	if !reflect.DeepEqual(vals, want2) {
		t.Fatalf("change: %v", vals)
	}
	// Immutability: s1 is as it was.
	if got, _ := s1.Get(alice); !reflect.DeepEqual(got, want) {
		t.Fatalf("s1 changed by Apply: %v", got)
	}
	// Returned and gotten values are copies.
	vals[ProducerByteRate] = 1
	got, _ := s2.Get(alice)
	got[ConsumerByteRate] = 1
	if got, _ := s2.Get(alice); !reflect.DeepEqual(got, want2) {
		t.Fatalf("s2 changed through a copy: %v", got)
	}

	// Removing a key that is not set is a no-op; no ops is a no-op.
	s3, vals, err := s2.Apply(alice, []Op{{Key: ControllerMutationRate, Remove: true}})
	if err != nil || !reflect.DeepEqual(vals, want2) || s3.Len() != 1 {
		t.Fatalf("remove unset: %v %v", vals, err)
	}
	if _, vals, err := s3.Apply(alice, nil); err != nil || !reflect.DeepEqual(vals, want2) {
		t.Fatalf("no ops: %v %v", vals, err)
	}

	// Remove everything: the entity is gone.
	s4, vals, err := s3.Apply(alice, []Op{{Key: ProducerByteRate, Remove: true}, {Key: ConsumerByteRate, Remove: true}})
	if err != nil {
		t.Fatal(err)
	}
	if vals == nil || len(vals) != 0 || s4.Len() != 0 {
		t.Fatalf("remove all: %v (nil %v), len %d", vals, vals == nil, s4.Len())
	}
	if _, ok := s4.Get(alice); ok {
		t.Fatal("removed entity still there")
	}
	if s3.Len() != 1 {
		t.Fatal("s3 changed")
	}

	// ip entities.
	s5, _, err := s4.Apply(ip, []Op{{Key: ConnectionCreationRate, Value: 10}})
	if err != nil || s5.Len() != 1 {
		t.Fatalf("ip: %v", err)
	}
	for _, s := range []*Set{&s0, s1, s2, s3, s4, s5} {
		checkSet(t, s)
	}
}

func TestApplyErrors(t *testing.T) {
	alice := mustEntity(t, user("alice"))
	ip := mustEntity(t, ipc("10.0.0.1"))
	s, _, err := (*Set)(nil).Apply(alice, []Op{{Key: ProducerByteRate, Value: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		e    Entity
		ops  []Op
		want error
	}{
		{"zero entity", Entity{}, []Op{{Key: ProducerByteRate, Value: 1}}, ErrInvalidEntity},
		{"duplicate key", alice, []Op{{Key: ConsumerByteRate, Value: 1}, {Key: ConsumerByteRate, Value: 2}}, ErrInvalidQuota},
		{"duplicate key, set and remove", alice, []Op{{Key: ConsumerByteRate, Value: 1}, {Key: ConsumerByteRate, Remove: true}}, ErrInvalidQuota},
		{"bad value after good ops", alice, []Op{{Key: ConsumerByteRate, Value: 5}, {Key: ProducerByteRate, Value: -1}}, ErrInvalidQuota},
		{"unknown key", alice, []Op{{Key: "fetch_rate", Value: 5}}, ErrInvalidQuota},
		{"remove unknown key", alice, []Op{{Key: ProducerByteRate, Remove: true}, {Key: "fetch_rate", Remove: true}}, ErrInvalidQuota},
		{"remove ip key from user", alice, []Op{{Key: ConnectionCreationRate, Remove: true}}, ErrInvalidQuota},
		{"remove user key from ip", ip, []Op{{Key: ProducerByteRate, Remove: true}}, ErrInvalidQuota},
		{"NaN", alice, []Op{{Key: RequestPercentage, Value: math.NaN()}}, ErrInvalidQuota},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := entriesMap(s)
			ns, vals, err := s.Apply(tt.e, tt.ops)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if ns != s || vals != nil {
				t.Fatalf("on error Apply returned a new set or values: %v", vals)
			}
			if after := entriesMap(s); !reflect.DeepEqual(before, after) {
				t.Fatalf("set changed: %v -> %v", before, after)
			}
		})
	}
}

func TestWith(t *testing.T) {
	alice := mustEntity(t, user("alice"))
	bob := mustEntity(t, user("bob"))
	vals := Values{ProducerByteRate: 5, "unknown_key": 7, RequestPercentage: math.NaN()}
	s1 := (&Set{}).With(alice, vals)
	vals[ProducerByteRate] = 6 // With copied
	got, ok := s1.Get(alice)
	if !ok || got[ProducerByteRate] != 5 || got["unknown_key"] != 7 || len(got) != 3 {
		t.Fatalf("With stored %v", got)
	}
	s2 := s1.With(bob, Values{ConsumerByteRate: 1})
	s3 := s2.With(alice, nil)
	s4 := s3.With(alice, Values{})
	s5 := s4.With(Entity{}, Values{ProducerByteRate: 1})
	if s1.Len() != 1 || s2.Len() != 2 || s3.Len() != 1 || s4.Len() != 1 || s5 != s4 {
		t.Fatalf("lens %d %d %d %d", s1.Len(), s2.Len(), s3.Len(), s4.Len())
	}
	if _, ok := s3.Get(alice); ok {
		t.Fatal("With nil did not remove")
	}
	var nilSet *Set
	if nilSet.Len() != 0 || nilSet.Entries() != nil || nilSet.With(alice, nil).Len() != 0 {
		t.Fatal("nil set")
	}
	if _, ok := nilSet.Get(alice); ok {
		t.Fatal("nil set Get")
	}
	for _, s := range []*Set{s1, s2, s3, s4} {
		checkSet(t, s)
	}
}

func TestFromEntries(t *testing.T) {
	alice := mustEntity(t, user("alice"))
	bob := mustEntity(t, user("bob"))
	appDef := mustEntity(t, def(TypeClientID))
	ip := mustEntity(t, def(TypeIP))
	in := Values{ProducerByteRate: 1}
	s, err := FromEntries([]Entry{
		{alice, in},
		{bob, Values{ConsumerByteRate: 2}},
		{appDef, Values{RequestPercentage: 3}},
		{alice, Values{ProducerByteRate: 4}}, // last wins
		{bob, nil},                           // removes bob
		{ip, Values{ConnectionCreationRate: 5}},
	})
	if err != nil {
		t.Fatal(err)
	}
	in[ProducerByteRate] = 100 // copied
	checkSet(t, s)
	want := []Entry{
		{appDef, Values{RequestPercentage: 3}},
		{ip, Values{ConnectionCreationRate: 5}},
		{alice, Values{ProducerByteRate: 4}},
	}
	if got := s.Entries(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Entries = %v, want %v", got, want)
	}
	if _, err := FromEntries([]Entry{{alice, Values{ProducerByteRate: 1.5}}}); !errors.Is(err, ErrInvalidQuota) {
		t.Fatalf("bad value: %v", err)
	}
	if _, err := FromEntries([]Entry{{ip, Values{ProducerByteRate: 1}}}); !errors.Is(err, ErrInvalidQuota) {
		t.Fatalf("bad key: %v", err)
	}
	if _, err := FromEntries([]Entry{{Entity{}, Values{ProducerByteRate: 1}}}); !errors.Is(err, ErrInvalidEntity) {
		t.Fatalf("zero entity: %v", err)
	}
	if s, err := FromEntries(nil); err != nil || s.Len() != 0 {
		t.Fatalf("empty: %v", err)
	}
}

// TestSetModel drives a Set with random Apply and With calls against a plain map,
// checking every version it keeps against the model it had then.
func TestSetModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var ents []Entity
	for i := range 300 {
		name := fmt.Sprintf("n%d", i)
		switch i % 5 {
		case 0:
			ents = append(ents, mustEntity(t, user(name)))
		case 1:
			ents = append(ents, mustEntity(t, user(name), client(name)))
		case 2:
			ents = append(ents, mustEntity(t, client(name)))
		case 3:
			ents = append(ents, mustEntity(t, def(TypeUser), client(name)))
		case 4:
			ents = append(ents, mustEntity(t, ipc(fmt.Sprintf("10.0.%d.%d", i/256, i%256))))
		}
	}
	type version struct {
		s     *Set
		model map[Entity]Values
	}
	s := &Set{}
	model := map[Entity]Values{}
	var versions []version
	for step := range 5000 {
		e := ents[rng.IntN(len(ents))]
		key := ProducerByteRate
		if rng.IntN(2) == 0 {
			key = ConsumerByteRate
		}
		if e.IsIP() {
			key = ConnectionCreationRate
		}
		switch rng.IntN(4) {
		case 0, 1:
			v := float64(1 + rng.IntN(1000))
			ns, _, err := s.Apply(e, []Op{{Key: key, Value: v}})
			if err != nil {
				t.Fatal(err)
			}
			s = ns
			next := model[e].clone()
			if next == nil {
				next = Values{}
			}
			next[key] = v
			model[e] = next
		case 2:
			ns, _, err := s.Apply(e, []Op{{Key: key, Remove: true}})
			if err != nil {
				t.Fatal(err)
			}
			s = ns
			next := model[e].clone()
			delete(next, key)
			if len(next) == 0 {
				delete(model, e)
			} else {
				model[e] = next
			}
		case 3:
			s = s.With(e, nil)
			delete(model, e)
		}
		if step%250 == 0 {
			cp := make(map[Entity]Values, len(model))
			for k, v := range model {
				cp[k] = v
			}
			versions = append(versions, version{s, cp})
		}
	}
	versions = append(versions, version{s, model})
	for i, v := range versions {
		checkSet(t, v.s)
		if v.s.Len() != len(v.model) {
			t.Fatalf("version %d: Len %d, model %d", i, v.s.Len(), len(v.model))
		}
		got := entriesMap(v.s)
		if !reflect.DeepEqual(got, v.model) {
			t.Fatalf("version %d differs from its model", i)
		}
		for e, vals := range v.model {
			if g, ok := v.s.Get(e); !ok || !reflect.DeepEqual(g, vals) {
				t.Fatalf("version %d: Get(%v) = %v", i, e, g)
			}
		}
		// Entries are ordered by Key.
		es := v.s.Entries()
		if !sort.SliceIsSorted(es, func(a, b int) bool { return es[a].Entity.Key() < es[b].Entity.Key() }) {
			t.Fatalf("version %d: Entries not ordered by Key", i)
		}
		// A Set rebuilt from the entries is the same.
		rebuilt, err := FromEntries(es)
		if err != nil {
			t.Fatal(err)
		}
		checkSet(t, rebuilt)
		if !reflect.DeepEqual(entriesMap(rebuilt), v.model) {
			t.Fatalf("version %d: FromEntries(Entries) differs", i)
		}
	}
}

// TestSetManyEntities grows a Set past several trie levels and shrinks it to empty.
func TestSetManyEntities(t *testing.T) {
	s := &Set{}
	var ents []Entity
	for i := range 3000 {
		e := mustEntity(t, user(fmt.Sprint(i)), client("c"))
		ents = append(ents, e)
		s = s.With(e, Values{ProducerByteRate: float64(i + 1)})
	}
	checkSet(t, s)
	if s.Len() != 3000 {
		t.Fatalf("Len %d", s.Len())
	}
	for i, e := range ents {
		if v, ok := s.Get(e); !ok || v[ProducerByteRate] != float64(i+1) {
			t.Fatalf("Get(%v) = %v", e, v)
		}
	}
	full := s
	for i, e := range ents {
		s = s.With(e, nil)
		if i%500 == 0 {
			checkSet(t, s)
		}
	}
	if s.Len() != 0 || s.root != nil || full.Len() != 3000 {
		t.Fatalf("after removing all: Len %d, full %d", s.Len(), full.Len())
	}
	checkSet(t, full)
}

// TestSetConcurrentReaders reads one Set from many goroutines while another derives
// new Sets from it: run with -race, it shows that deriving never writes to shared parts.
func TestSetConcurrentReaders(t *testing.T) {
	s := &Set{}
	for i := range 200 {
		s = mustApply(t, s, mustEntity(t, user(fmt.Sprint(i))), Op{Key: ProducerByteRate, Value: float64(i + 1)})
	}
	base := s
	done := make(chan struct{})
	errs := make(chan error, 4)
	for r := range 4 {
		go func() {
			for i := range 2000 {
				n := (i + r) % 200
				lim, _, ok := base.Resolve(ProducerByteRate, fmt.Sprint(n), "c")
				if !ok || lim != float64(n+1) {
					errs <- fmt.Errorf("reader %d: user %d resolved to %v %v", r, n, lim, ok)
					return
				}
				if i%500 == 0 && len(base.Entries()) != 200 {
					errs <- fmt.Errorf("reader %d: entries changed", r)
					return
				}
			}
			errs <- nil
		}()
	}
	var writes []Entity
	for i := range 300 {
		writes = append(writes, mustEntity(t, user(fmt.Sprint(i))))
	}
	go func() {
		defer close(done)
		w := base
		for i := range 2000 {
			e := writes[i%300]
			if i%3 == 0 {
				w = w.With(e, nil)
			} else {
				w = w.With(e, Values{ProducerByteRate: -1})
			}
		}
	}()
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	<-done
	checkSet(t, base)
}
