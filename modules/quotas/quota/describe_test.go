package quota

import (
	"errors"
	"reflect"
	"sort"
	"testing"
)

func TestDescribe(t *testing.T) {
	ents := map[string]Entity{
		"A": mustEntity(t, user("alice")),
		"B": mustEntity(t, user("alice"), client("app")),
		"C": mustEntity(t, user("alice"), def(TypeClientID)),
		"D": mustEntity(t, def(TypeUser)),
		"E": mustEntity(t, def(TypeUser), client("app")),
		"F": mustEntity(t, client("app")),
		"G": mustEntity(t, def(TypeClientID)),
		"H": mustEntity(t, ipc("10.0.0.1")),
		"I": mustEntity(t, def(TypeIP)),
		"J": mustEntity(t, user("bob")),
		"K": mustEntity(t, user("<default>")),
	}
	s := &Set{}
	for _, e := range ents {
		key := ProducerByteRate
		if e.IsIP() {
			key = ConnectionCreationRate
		}
		s = mustApply(t, s, e, Op{Key: key, Value: 1})
	}
	name := map[Entity]string{}
	for n, e := range ents {
		name[e] = n
	}
	exact := func(typ, m string) FilterComponent {
		return FilterComponent{Type: typ, MatchType: MatchExact, Match: m}
	}
	dflt := func(typ string) FilterComponent { return FilterComponent{Type: typ, MatchType: MatchDefault} }
	anyOf := func(typ string) FilterComponent { return FilterComponent{Type: typ, MatchType: MatchAny} }

	tests := []struct {
		name   string
		filter []FilterComponent
		strict bool
		want   string // entity names, sorted
	}{
		{"empty", nil, false, "ABCDEFGHIJK"},
		{"empty strict", nil, true, ""},
		{"user exact", []FilterComponent{exact(TypeUser, "alice")}, false, "ABC"},
		{"user exact strict", []FilterComponent{exact(TypeUser, "alice")}, true, "A"},
		{"user exact literal <default>", []FilterComponent{exact(TypeUser, "<default>")}, false, "K"},
		{"user exact unknown", []FilterComponent{exact(TypeUser, "nobody")}, false, ""},
		{"user default", []FilterComponent{dflt(TypeUser)}, false, "DE"},
		{"user default strict", []FilterComponent{dflt(TypeUser)}, true, "D"},
		{"user any", []FilterComponent{anyOf(TypeUser)}, false, "ABCDEJK"},
		{"user any strict", []FilterComponent{anyOf(TypeUser)}, true, "ADJK"},
		{"user exact, client any", []FilterComponent{exact(TypeUser, "alice"), anyOf(TypeClientID)}, false, "BC"},
		{"client any, user exact strict", []FilterComponent{anyOf(TypeClientID), exact(TypeUser, "alice")}, true, "BC"},
		{"user any, client default strict", []FilterComponent{anyOf(TypeUser), dflt(TypeClientID)}, true, "C"},
		{"user default, client exact", []FilterComponent{dflt(TypeUser), exact(TypeClientID, "app")}, false, "E"},
		{"client exact", []FilterComponent{exact(TypeClientID, "app")}, false, "BEF"},
		{"client exact strict", []FilterComponent{exact(TypeClientID, "app")}, true, "F"},
		{"client default", []FilterComponent{dflt(TypeClientID)}, false, "CG"},
		{"both any strict", []FilterComponent{anyOf(TypeUser), anyOf(TypeClientID)}, true, "BCE"},
		{"ip any", []FilterComponent{anyOf(TypeIP)}, false, "HI"},
		{"ip exact", []FilterComponent{exact(TypeIP, "10.0.0.1")}, true, "H"},
		{"ip exact mapped form", []FilterComponent{exact(TypeIP, "::ffff:10.0.0.1")}, false, "H"},
		{"ip exact not an address", []FilterComponent{exact(TypeIP, "host")}, false, ""},
		{"ip default strict", []FilterComponent{dflt(TypeIP)}, true, "I"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.Describe(tt.filter, tt.strict)
			if err != nil {
				t.Fatal(err)
			}
			var names []byte
			for _, en := range got {
				n, ok := name[en.Entity]
				if !ok {
					t.Fatalf("unknown entity %v", en.Entity)
				}
				names = append(names, n...)
				if !reflect.DeepEqual(en.Values, entriesMap(s)[en.Entity]) {
					t.Fatalf("values of %v: %v", en.Entity, en.Values)
				}
			}
			if !sort.SliceIsSorted(got, func(i, j int) bool { return got[i].Entity.Key() < got[j].Entity.Key() }) {
				t.Fatal("not ordered by Key")
			}
			sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
			if string(names) != tt.want {
				t.Fatalf("got %s, want %s", names, tt.want)
			}
		})
	}
	if got, err := (*Set)(nil).Describe(nil, false); err != nil || len(got) != 0 {
		t.Fatalf("nil set: %v %v", got, err)
	}
}

func TestDescribeErrors(t *testing.T) {
	tests := []struct {
		name   string
		filter []FilterComponent
	}{
		{"type twice", []FilterComponent{{Type: TypeUser, MatchType: MatchAny}, {Type: TypeUser, MatchType: MatchDefault}}},
		{"unknown type", []FilterComponent{{Type: "group", MatchType: MatchAny}}},
		{"empty type", []FilterComponent{{Type: "", MatchType: MatchAny}}},
		{"unknown match type", []FilterComponent{{Type: TypeUser, MatchType: 3}}},
		{"negative match type", []FilterComponent{{Type: TypeUser, MatchType: -1}}},
		{"exact without a name", []FilterComponent{{Type: TypeClientID, MatchType: MatchExact}}},
		{"default with a name", []FilterComponent{{Type: TypeClientID, MatchType: MatchDefault, Match: "x"}}},
		{"any with a name", []FilterComponent{{Type: TypeUser, MatchType: MatchAny, Match: "x"}}},
		{"ip with user", []FilterComponent{{Type: TypeIP, MatchType: MatchAny}, {Type: TypeUser, MatchType: MatchAny}}},
		{"client with ip", []FilterComponent{{Type: TypeClientID, MatchType: MatchDefault}, {Type: TypeIP, MatchType: MatchDefault}}},
	}
	s := mustApply(t, &Set{}, mustEntity(t, user("alice")), Op{Key: ProducerByteRate, Value: 1})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, strict := range []bool{false, true} {
				got, err := s.Describe(tt.filter, strict)
				if !errors.Is(err, ErrInvalidRequest) || got != nil {
					t.Fatalf("strict %v: %v, %v; want ErrInvalidRequest", strict, got, err)
				}
			}
		})
	}
}
