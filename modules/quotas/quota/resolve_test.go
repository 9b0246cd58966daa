package quota

import (
	"testing"
)

// levelEntities are the entities of the 8 precedence levels for user U and client C.
func levelEntities(t testing.TB, u, c string) [8]Entity {
	return [8]Entity{
		mustEntity(t, user(u), client(c)),
		mustEntity(t, user(u), def(TypeClientID)),
		mustEntity(t, user(u)),
		mustEntity(t, def(TypeUser), client(c)),
		mustEntity(t, def(TypeUser), def(TypeClientID)),
		mustEntity(t, def(TypeUser)),
		mustEntity(t, client(c)),
		mustEntity(t, def(TypeClientID)),
	}
}

// levelGroups are the groups of the 8 levels for user U and client C.
func levelGroups(u, c string) [8]Group {
	return [8]Group{{u, c}, {u, c}, {u, ""}, {u, c}, {u, c}, {u, ""}, {"", c}, {"", c}}
}

func mustApply(t testing.TB, s *Set, e Entity, ops ...Op) *Set {
	t.Helper()
	ns, _, err := s.Apply(e, ops)
	if err != nil {
		t.Fatalf("Apply(%v, %v): %v", e, ops, err)
	}
	return ns
}

func TestResolvePrecedence(t *testing.T) {
	const u, c = "alice", "app"
	lv := levelEntities(t, u, c)
	groups := levelGroups(u, c)
	// Noise: entities of another user and client at every level that names them, and
	// entities of alice/app that set only another key.
	noise := &Set{}
	for _, e := range levelEntities(t, "bob", "other") {
		if named(e, TypeUser) || named(e, TypeClientID) {
			noise = mustApply(t, noise, e, Op{Key: ProducerByteRate, Value: 999})
		}
	}
	noise = mustApply(t, noise, lv[0], Op{Key: ConsumerByteRate, Value: 5})

	t.Run("added from least to most specific", func(t *testing.T) {
		s := noise
		if _, _, ok := s.Resolve(ProducerByteRate, u, c); ok {
			t.Fatal("resolved with no applicable entity")
		}
		for i := 7; i >= 0; i-- {
			s = mustApply(t, s, lv[i], Op{Key: ProducerByteRate, Value: float64(100 + i)})
			lim, g, ok := s.Resolve(ProducerByteRate, u, c)
			if !ok || lim != float64(100+i) || g != groups[i] {
				t.Fatalf("with levels %d..8: got %v %+v %v, want level %d (%v %+v)", i+1, lim, g, ok, i+1, 100+i, groups[i])
			}
		}
	})
	t.Run("added from most to least specific", func(t *testing.T) {
		s := noise
		for i := range 8 {
			s = mustApply(t, s, lv[i], Op{Key: ProducerByteRate, Value: float64(100 + i)})
			lim, g, ok := s.Resolve(ProducerByteRate, u, c)
			if !ok || lim != 100 || g != groups[0] {
				t.Fatalf("with levels 1..%d: got %v %+v %v, want level 1", i+1, lim, g, ok)
			}
		}
	})
	t.Run("each level alone", func(t *testing.T) {
		for i := range 8 {
			s := mustApply(t, noise, lv[i], Op{Key: RequestPercentage, Value: float64(10 + i)})
			lim, g, ok := s.Resolve(RequestPercentage, u, c)
			if !ok || lim != float64(10+i) || g != groups[i] {
				t.Fatalf("level %d alone: got %v %+v %v, want %+v", i+1, lim, g, ok, groups[i])
			}
		}
	})
	t.Run("removing from the top", func(t *testing.T) {
		s := noise
		for i := range 8 {
			s = mustApply(t, s, lv[i], Op{Key: ControllerMutationRate, Value: float64(1 + i)})
		}
		for i := range 8 {
			lim, g, ok := s.Resolve(ControllerMutationRate, u, c)
			if !ok || lim != float64(1+i) || g != groups[i] {
				t.Fatalf("levels %d..8: got %v %+v %v", i+1, lim, g, ok)
			}
			s = mustApply(t, s, lv[i], Op{Key: ControllerMutationRate, Remove: true})
		}
		if _, _, ok := s.Resolve(ControllerMutationRate, u, c); ok {
			t.Fatal("resolved after removing every level")
		}
	})
}

// named reports whether e has a named (not default) component of typ.
func named(e Entity, typ string) bool {
	c, ok := e.Component(typ)
	return ok && !c.Default
}

func TestResolveKeysIndependent(t *testing.T) {
	lv := levelEntities(t, "alice", "app")
	s := &Set{}
	s = mustApply(t, s, lv[6], Op{Key: ProducerByteRate, Value: 7000})                                        // client-id=app
	s = mustApply(t, s, lv[2], Op{Key: ConsumerByteRate, Value: 3000}, Op{Key: RequestPercentage, Value: 30}) // user=alice
	s = mustApply(t, s, lv[4], Op{Key: RequestPercentage, Value: 50})                                         // both defaults

	tests := []struct {
		key   string
		limit float64
		group Group
		ok    bool
	}{
		{ProducerByteRate, 7000, Group{"", "app"}, true},
		{ConsumerByteRate, 3000, Group{"alice", ""}, true},
		{RequestPercentage, 30, Group{"alice", ""}, true},
		{ControllerMutationRate, 0, Group{}, false},
		{ConnectionCreationRate, 0, Group{}, false},
		{"no_such_key", 0, Group{}, false},
	}
	for _, tt := range tests {
		lim, g, ok := s.Resolve(tt.key, "alice", "app")
		if lim != tt.limit || g != tt.group || ok != tt.ok {
			t.Errorf("Resolve(%s) = %v %+v %v, want %v %+v %v", tt.key, lim, g, ok, tt.limit, tt.group, tt.ok)
		}
	}
	// Another user and client: only the defaults apply.
	if lim, g, ok := s.Resolve(RequestPercentage, "bob", "x"); !ok || lim != 50 || g != (Group{"bob", "x"}) {
		t.Errorf("bob: %v %+v %v", lim, g, ok)
	}
	if _, _, ok := s.Resolve(ProducerByteRate, "bob", "x"); ok {
		t.Error("bob got app's producer quota")
	}
}

func TestResolveGroupsShareSensors(t *testing.T) {
	// user=<default>: one group per user, shared by its client ids.
	s := mustApply(t, &Set{}, mustEntity(t, def(TypeUser)), Op{Key: ProducerByteRate, Value: 1})
	_, g1, _ := s.Resolve(ProducerByteRate, "alice", "a")
	_, g2, _ := s.Resolve(ProducerByteRate, "alice", "b")
	_, g3, _ := s.Resolve(ProducerByteRate, "bob", "a")
	if g1 != g2 || g1 == g3 || g1 != (Group{User: "alice"}) {
		t.Errorf("user=<default>: %+v %+v %+v", g1, g2, g3)
	}
	// client-id=<default>: one group per client id, whatever the user.
	s = mustApply(t, &Set{}, mustEntity(t, def(TypeClientID)), Op{Key: ProducerByteRate, Value: 1})
	_, g1, _ = s.Resolve(ProducerByteRate, "alice", "a")
	_, g2, _ = s.Resolve(ProducerByteRate, "bob", "a")
	_, g3, _ = s.Resolve(ProducerByteRate, "alice", "b")
	if g1 != g2 || g1 == g3 || g1 != (Group{ClientID: "a"}) {
		t.Errorf("client-id=<default>: %+v %+v %+v", g1, g2, g3)
	}
}

func TestResolveOddNames(t *testing.T) {
	odd := []string{"a;user=1:b", "<default>", "\x00\xff", "client-id=*", "*", "", "ANONYMOUS", "a,b=c"}
	for _, u := range odd {
		for _, c := range odd {
			s := &Set{}
			lv := levelEntities(t, "x", "y") // defaults only matter below
			// Level 1 for (u, c), if names allow an entity.
			var e1 Entity
			if u != "" && c != "" {
				e1 = mustEntity(t, user(u), client(c))
				s = mustApply(t, s, e1, Op{Key: ProducerByteRate, Value: 11})
			}
			s = mustApply(t, s, lv[7], Op{Key: ProducerByteRate, Value: 88}) // client-id=<default>
			lim, g, ok := s.Resolve(ProducerByteRate, u, c)
			switch {
			case !ok:
				t.Fatalf("(%q, %q): nothing resolved", u, c)
			case e1.valid() && (lim != 11 || g != Group{u, c}):
				t.Fatalf("(%q, %q): %v %+v, want level 1", u, c, lim, g)
			case !e1.valid() && (lim != 88 || g != Group{"", c}):
				t.Fatalf("(%q, %q): %v %+v, want level 8", u, c, lim, g)
			}
			// A name that differs in one byte does not match level 1.
			lim, g, _ = s.Resolve(ProducerByteRate, u+"x", c)
			if lim != 88 || g != (Group{"", c}) {
				t.Fatalf("(%q, %q): %v %+v, want level 8", u+"x", c, lim, g)
			}
		}
	}
	// A client id literally named "<default>" is not the default.
	s := mustApply(t, &Set{}, mustEntity(t, client("<default>")), Op{Key: ConsumerByteRate, Value: 1})
	if _, _, ok := s.Resolve(ConsumerByteRate, "u", "other"); ok {
		t.Fatal(`client-id="<default>" applied to another client id`)
	}
	if lim, _, ok := s.Resolve(ConsumerByteRate, "u", "<default>"); !ok || lim != 1 {
		t.Fatal(`client-id="<default>" did not apply to itself`)
	}
}

func TestResolveEmptySet(t *testing.T) {
	var nilSet *Set
	if _, _, ok := nilSet.Resolve(ProducerByteRate, "a", "b"); ok {
		t.Fatal("nil set resolved")
	}
	if _, ok := nilSet.ResolveIP("10.0.0.1"); ok {
		t.Fatal("nil set resolved ip")
	}
	var zero Set
	if _, _, ok := zero.Resolve(ProducerByteRate, "a", "b"); ok {
		t.Fatal("zero set resolved")
	}
}

func TestResolveUnvalidatedKeys(t *testing.T) {
	// With stores what it is given; Resolve finds keys it does not know too.
	s := (&Set{}).With(mustEntity(t, user("alice")), Values{"custom_rate": 3})
	if lim, g, ok := s.Resolve("custom_rate", "alice", "c"); !ok || lim != 3 || g != (Group{User: "alice"}) {
		t.Fatalf("custom key: %v %+v %v", lim, g, ok)
	}
}

func TestResolveIP(t *testing.T) {
	s := &Set{}
	if _, ok := s.ResolveIP("10.0.0.1"); ok {
		t.Fatal("empty set resolved")
	}
	s = mustApply(t, s, mustEntity(t, ipc("10.0.0.1")), Op{Key: ConnectionCreationRate, Value: 5})
	s = mustApply(t, s, mustEntity(t, ipc("2001:db8::1")), Op{Key: ConnectionCreationRate, Value: 6})
	tests := []struct {
		ip    string
		limit float64
		ok    bool
	}{
		{"10.0.0.1", 5, true},
		{"::ffff:10.0.0.1", 5, true},
		{"10.0.0.2", 0, false},
		{"2001:DB8:0::1", 6, true},
		{"2001:db8::1%eth0", 6, true},
		{"not an ip", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		if lim, ok := s.ResolveIP(tt.ip); lim != tt.limit || ok != tt.ok {
			t.Errorf("ResolveIP(%q) = %v %v, want %v %v", tt.ip, lim, ok, tt.limit, tt.ok)
		}
	}
	s = mustApply(t, s, mustEntity(t, def(TypeIP)), Op{Key: ConnectionCreationRate, Value: 1})
	for _, ip := range []string{"10.0.0.2", "not an ip", ""} {
		if lim, ok := s.ResolveIP(ip); !ok || lim != 1 {
			t.Errorf("ResolveIP(%q) = %v %v, want the default", ip, lim, ok)
		}
	}
	if lim, ok := s.ResolveIP("10.0.0.1"); !ok || lim != 5 {
		t.Errorf("specific ip lost to the default: %v", lim)
	}
	// User quotas do not leak into ip resolution and back.
	s = mustApply(t, s, mustEntity(t, def(TypeUser)), Op{Key: ProducerByteRate, Value: 9})
	if _, _, ok := s.Resolve(ConnectionCreationRate, "10.0.0.1", "10.0.0.1"); ok {
		t.Error("Resolve found an ip quota")
	}
}
