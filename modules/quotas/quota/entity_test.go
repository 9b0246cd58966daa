package quota

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func user(n string) Component   { return Component{Type: TypeUser, Name: n} }
func client(n string) Component { return Component{Type: TypeClientID, Name: n} }
func ipc(n string) Component    { return Component{Type: TypeIP, Name: n} }
func def(typ string) Component  { return Component{Type: typ, Default: true} }

// mustEntity builds an entity or fails the test.
func mustEntity(t testing.TB, cs ...Component) Entity {
	t.Helper()
	e, err := NewEntity(cs...)
	if err != nil {
		t.Fatalf("NewEntity(%v): %v", cs, err)
	}
	return e
}

// parseKey decodes Entity.Key's format, failing on anything that is not exactly it.
func parseKey(key string) ([]Component, error) {
	var cs []Component
	for rest := key; ; {
		eq := strings.IndexByte(rest, '=')
		if eq < 0 {
			return nil, errors.New("no '='")
		}
		c := Component{Type: rest[:eq]}
		rest = rest[eq+1:]
		if strings.HasPrefix(rest, "*") {
			c.Default = true
			rest = rest[1:]
		} else {
			colon := strings.IndexByte(rest, ':')
			if colon < 1 {
				return nil, errors.New("no length")
			}
			n, err := strconv.Atoi(rest[:colon])
			if err != nil || n < 1 || strconv.Itoa(n) != rest[:colon] || len(rest) < colon+1+n {
				return nil, errors.New("bad length")
			}
			c.Name = rest[colon+1 : colon+1+n]
			rest = rest[colon+1+n:]
		}
		cs = append(cs, c)
		if rest == "" {
			return cs, nil
		}
		if rest[0] != ';' {
			return nil, errors.New("no ';'")
		}
		rest = rest[1:]
	}
}

func TestNewEntity(t *testing.T) {
	long := strings.Repeat("x", MaxNameBytes)
	tests := []struct {
		name    string
		in      []Component
		wantErr bool
		want    []Component // canonical components
		key     string
		str     string
	}{
		{name: "no components", wantErr: true},
		{name: "unknown type", in: []Component{{Type: "group", Name: "g"}}, wantErr: true},
		{name: "empty type", in: []Component{{Type: "", Name: "g"}}, wantErr: true},
		{name: "type case matters", in: []Component{{Type: "User", Name: "g"}}, wantErr: true},
		{name: "user twice", in: []Component{user("a"), user("b")}, wantErr: true},
		{name: "user twice, once default", in: []Component{user("a"), def(TypeUser)}, wantErr: true},
		{name: "ip with user", in: []Component{ipc("10.0.0.1"), user("a")}, wantErr: true},
		{name: "ip default with client default", in: []Component{def(TypeIP), def(TypeClientID)}, wantErr: true},
		{name: "empty name", in: []Component{user("")}, wantErr: true},
		{name: "name too long", in: []Component{client(long + "y")}, wantErr: true},
		{name: "ip not an address", in: []Component{ipc("example.com")}, wantErr: true},
		{name: "ip with port", in: []Component{ipc("10.0.0.1:9092")}, wantErr: true},
		{
			name: "user", in: []Component{user("alice")},
			want: []Component{user("alice")}, key: "user=5:alice", str: "user=alice",
		},
		{
			name: "name of MaxNameBytes", in: []Component{client(long)},
			want: []Component{client(long)}, key: "client-id=1024:" + long, str: "client-id=" + long,
		},
		{
			name: "user and client sorted", in: []Component{user("alice"), client("app")},
			want: []Component{client("app"), user("alice")},
			key:  "client-id=3:app;user=5:alice", str: "user=alice,client-id=app",
		},
		{
			name: "default's name ignored", in: []Component{{Type: TypeUser, Name: "ignored", Default: true}, client("app")},
			want: []Component{client("app"), def(TypeUser)},
			key:  "client-id=3:app;user=*", str: "user=<default>,client-id=app",
		},
		{
			name: "both defaults", in: []Component{def(TypeClientID), def(TypeUser)},
			want: []Component{def(TypeClientID), def(TypeUser)},
			key:  "client-id=*;user=*", str: "user=<default>,client-id=<default>",
		},
		{
			name: "literal <default> name", in: []Component{user("<default>")},
			want: []Component{user("<default>")}, key: "user=9:<default>", str: `user="<default>"`,
		},
		{
			name: "separators in names", in: []Component{user("a,b=c"), client(`x"y`)},
			want: []Component{client(`x"y`), user("a,b=c")},
			key:  `client-id=3:x"y;user=5:a,b=c`, str: `user="a,b=c",client-id="x\"y"`,
		},
		{
			name: "odd bytes", in: []Component{user("a\x00\xffb")},
			want: []Component{user("a\x00\xffb")}, key: "user=4:a\x00\xffb", str: `user="a\x00\xffb"`,
		},
		{
			name: "ipv4", in: []Component{ipc("10.0.0.1")},
			want: []Component{ipc("10.0.0.1")}, key: "ip=8:10.0.0.1", str: "ip=10.0.0.1",
		},
		{
			name: "ipv6 canonicalized", in: []Component{ipc("2001:DB8:0:0:0:0:0:1")},
			want: []Component{ipc("2001:db8::1")}, key: "ip=11:2001:db8::1", str: "ip=2001:db8::1",
		},
		{
			name: "v4-mapped unmapped", in: []Component{ipc("::ffff:192.0.2.1")},
			want: []Component{ipc("192.0.2.1")}, key: "ip=9:192.0.2.1", str: "ip=192.0.2.1",
		},
		{
			name: "zone dropped", in: []Component{ipc("fe80::1%eth0")},
			want: []Component{ipc("fe80::1")}, key: "ip=7:fe80::1", str: "ip=fe80::1",
		},
		{
			name: "ip default", in: []Component{def(TypeIP)},
			want: []Component{def(TypeIP)}, key: "ip=*", str: "ip=<default>",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := NewEntity(tt.in...)
			if tt.wantErr {
				if !errors.Is(err, ErrInvalidEntity) {
					t.Fatalf("err = %v, want ErrInvalidEntity", err)
				}
				if e != (Entity{}) {
					t.Fatalf("entity %v returned with an error", e)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := tt.want
			for i := range want {
				if want[i].Default {
					want[i].Name = ""
				}
			}
			if got := e.Components(); !reflect.DeepEqual(got, want) {
				t.Errorf("Components = %+v, want %+v", got, want)
			}
			if got := e.Key(); got != tt.key {
				t.Errorf("Key = %q, want %q", got, tt.key)
			}
			if got := e.String(); got != tt.str {
				t.Errorf("String = %q, want %q", got, tt.str)
			}
			back, err := parseKey(e.Key())
			if err != nil || !reflect.DeepEqual(back, want) {
				t.Errorf("parseKey(Key) = %+v, %v", back, err)
			}
			for _, c := range want {
				got, ok := e.Component(c.Type)
				if !ok || got != c || !e.Has(c.Type) {
					t.Errorf("Component(%s) = %v, %v", c.Type, got, ok)
				}
			}
			if e.IsIP() != e.Has(TypeIP) {
				t.Errorf("IsIP = %v", e.IsIP())
			}
			// Same components in another order: the same entity.
			rev := append([]Component(nil), tt.in...)
			for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
				rev[i], rev[j] = rev[j], rev[i]
			}
			if e2 := mustEntity(t, rev...); e2 != e || e2.Key() != e.Key() {
				t.Errorf("reordered components give %v", e2)
			}
		})
	}
}

func TestComponentsIsACopy(t *testing.T) {
	e := mustEntity(t, user("alice"))
	cs := e.Components()
	cs[0].Name = "mallory"
	if got, _ := e.Component(TypeUser); got.Name != "alice" {
		t.Fatalf("changing Components' result changed the entity: %v", got)
	}
	if e.Has(TypeClientID) || e.Has("nope") {
		t.Fatal("Has of a missing type")
	}
}

func TestZeroEntity(t *testing.T) {
	var e Entity
	if e.Key() != "" || e.String() != "" || e.Components() != nil || e.IsIP() {
		t.Fatalf("zero entity: %q %q %v", e.Key(), e.String(), e.Components())
	}
}

func TestKeyUnique(t *testing.T) {
	sets := [][]Component{
		{user("a")},
		{user("a;user=1:b")},
		{user("a"), client("b")},
		{user("b"), client("a")},
		{client("a;user=1:b")},
		{client("a"), user("a")},
		{user("<default>")},
		{def(TypeUser)},
		{user("*")},
		{user("=*")},
		{client("*")},
		{def(TypeClientID)},
		{def(TypeClientID), def(TypeUser)},
		{client("*;user=*")},
		{user("1:a")},
		{user("a"), def(TypeClientID)},
		{user("a"), client("<default>")},
		{user("user=1:a")},
		{user("10.0.0.1")},
		{ipc("10.0.0.1")},
		{def(TypeIP)},
		{user(":")},
		{user(";")},
		{user(",")},
		{user("a,client-id=b")},
		{user("a"), client("client-id=b")},
	}
	keys := map[string][]Component{}
	strs := map[string][]Component{}
	for _, cs := range sets {
		e := mustEntity(t, cs...)
		if prev, dup := keys[e.Key()]; dup {
			t.Errorf("%v and %v share Key %q", prev, cs, e.Key())
		}
		keys[e.Key()] = cs
		if prev, dup := strs[e.String()]; dup {
			t.Errorf("%v and %v share String %q", prev, cs, e.String())
		}
		strs[e.String()] = cs
	}
}
