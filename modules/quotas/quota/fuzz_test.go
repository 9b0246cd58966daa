package quota

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// fuzzComponents decodes up to max components from data, returning the rest. Each
// component is a selector byte (type, default bit, name mode), a length byte and name
// bytes.
func fuzzComponents(data []byte, max int) ([]Component, []byte) {
	// The type alphabet: the real types and some near misses.
	fuzzTypes := [...]string{TypeUser, TypeClientID, TypeIP, "", "USER", "group", "ip "}
	// Names an ip component may get instead of random bytes.
	fuzzIPs := [...]string{"10.0.0.1", "::1", "0:0:0:0:0:0:0:1", "::ffff:10.0.0.1", "fe80::1%eth0", "2001:db8::"}
	var cs []Component
	for len(cs) < max && len(data) >= 2 {
		sel, n := data[0], int(data[1])
		data = data[2:]
		c := Component{Type: fuzzTypes[int(sel)%len(fuzzTypes)], Default: sel&0x08 != 0}
		switch {
		case sel&0x30 == 0x10:
			c.Name = fuzzIPs[n%len(fuzzIPs)]
		case sel&0x30 == 0x20: // around MaxNameBytes
			c.Name = strings.Repeat("n", MaxNameBytes-2+n%4)
		default:
			n %= 24
			if n > len(data) {
				n = len(data)
			}
			c.Name, data = string(data[:n]), data[n:]
		}
		cs = append(cs, c)
	}
	return cs, data
}

func FuzzEntity(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0x00, 5, 'a', 'l', 'i', 'c', 'e'})
	f.Add([]byte{0x00, 1, 'a', 0x01, 1, 'b', 0x00, 1, 'b', 0x01, 1, 'a'})
	f.Add([]byte{0x08, 0, 0x09, 0, 0x00, 1, 'x'})
	f.Add([]byte{0x12, 0, 0x12, 2, 0x0a, 0})
	f.Add([]byte{0x00, 3, 'a', ';', 'b', 0x00, 9, '<', 'd', 'e', 'f', 'a', 'u', 'l', 't', '>'})
	f.Add([]byte{0x20, 2, 0x03, 1, 'x', 0x04, 1, 'y'})
	f.Add([]byte{0x01, 4, 'a', ',', '=', '"', 0x00, 2, 0xff, 0x00})
	f.Fuzz(func(t *testing.T, data []byte) {
		csA, rest := fuzzComponents(data, 4)
		csB, _ := fuzzComponents(rest, 4)
		var valid []Entity
		for _, cs := range [][]Component{csA, csB} {
			e, err := NewEntity(cs...)
			if err != nil {
				if !errors.Is(err, ErrInvalidEntity) || e != (Entity{}) {
					t.Fatalf("NewEntity(%+v) = %v, %v", cs, e, err)
				}
				continue
			}
			comps := e.Components()
			back, err := parseKey(e.Key())
			if err != nil || !reflect.DeepEqual(back, comps) {
				t.Fatalf("Key %q of %v parses to %v, %v", e.Key(), comps, back, err)
			}
			if again, err := NewEntity(comps...); err != nil || again != e {
				t.Fatalf("NewEntity(Components) = %v, %v; want %v", again, err, e)
			}
			valid = append(valid, e)
		}
		if len(valid) == 2 {
			a, b := valid[0], valid[1]
			same := a == b
			if (a.Key() == b.Key()) != same || reflect.DeepEqual(a.Components(), b.Components()) != same {
				t.Fatalf("%v and %v: == %v, Keys %q %q", a, b, same, a.Key(), b.Key())
			}
			if (a.String() == b.String()) != same {
				t.Fatalf("%v and %v: == %v, Strings %q %q", a, b, same, a.String(), b.String())
			}
		}

		// A Set of the valid entities: nothing panics, and the entities find themselves.
		var entries []Entry
		for i, e := range valid {
			v := Values{ProducerByteRate: float64(10 + i), RequestPercentage: 5}
			if e.IsIP() {
				v = Values{ConnectionCreationRate: float64(10 + i)}
			}
			entries = append(entries, Entry{e, v})
		}
		s, err := FromEntries(entries)
		if err != nil {
			t.Fatal(err)
		}
		for _, cs := range [][]Component{csA, csB} {
			var filter []FilterComponent
			names := map[string]string{}
			for i, c := range cs {
				fc := FilterComponent{Type: c.Type, MatchType: int8(i%4) - 1 + int8(len(cs)%2)}
				if !c.Default {
					fc.MatchType, fc.Match = MatchExact, c.Name
					names[c.Type] = c.Name
				}
				filter = append(filter, fc)
			}
			for _, strict := range []bool{false, true} {
				if _, err := s.Describe(filter, strict); err != nil && !errors.Is(err, ErrInvalidRequest) {
					t.Fatalf("Describe(%v): %v", filter, err)
				}
			}
			for _, key := range []string{ProducerByteRate, RequestPercentage, ConnectionCreationRate, "x"} {
				s.Resolve(key, names[TypeUser], names[TypeClientID])
			}
			s.ResolveIP(names[TypeIP])
		}
		want := map[Entity]float64{} // the last entry of an entity wins
		for i, e := range valid {
			want[e] = float64(10 + i)
		}
		for _, e := range valid {
			var filter []FilterComponent
			for _, c := range e.Components() {
				fc := FilterComponent{Type: c.Type, MatchType: MatchDefault}
				if !c.Default {
					fc.MatchType, fc.Match = MatchExact, c.Name
				}
				filter = append(filter, fc)
			}
			got, err := s.Describe(filter, true)
			if err != nil || len(got) != 1 || got[0].Entity != e {
				t.Fatalf("Describe of %v itself: %v, %v", e, got, err)
			}
			u, uok := e.Component(TypeUser)
			c, cok := e.Component(TypeClientID)
			if uok && cok && !u.Default && !c.Default {
				lim, g, ok := s.Resolve(ProducerByteRate, u.Name, c.Name)
				if !ok || lim != want[e] || g != (Group{u.Name, c.Name}) {
					t.Fatalf("Resolve of %v itself: %v %+v %v", e, lim, g, ok)
				}
			}
			if ipc, ok := e.Component(TypeIP); ok && !ipc.Default {
				if lim, ok := s.ResolveIP(ipc.Name); !ok || lim != want[e] {
					t.Fatalf("ResolveIP of %v itself: %v %v", e, lim, ok)
				}
			}
		}
	})
}
