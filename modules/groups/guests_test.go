package groups

import (
	"context"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/groups/assignor"
)

// Both spellings of the offset store pick it; nothing picks badger.
func TestOffsetsGuestConfig(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       OffsetsGuest
	}{
		{"default", "sweep_interval_ms: 100\n", &badgerOffsets{}},
		{"a name", "offsets: memory\n", &memoryOffsets{}},
		{"use", "offsets: {use: memory}\n", &memoryOffsets{}},
		{"use with settings", "offsets: {use: badger, dir: /d}\n", &badgerOffsets{Dir: "/d"}},
		{"settings of the default", "offsets: {dir: /d}\n", &badgerOffsets{Dir: "/d"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := New()
			dec := yaml.NewDecoder(strings.NewReader(tc.yaml))
			dec.KnownFields(true)
			if err := dec.Decode(m); err != nil {
				t.Fatal(err)
			}
			if err := m.Validate(); err != nil {
				t.Fatal(err)
			}
			switch want := tc.want.(type) {
			case *badgerOffsets:
				if g, ok := m.offsetsGuest.(*badgerOffsets); !ok || *g != *want {
					t.Fatalf("guest %#v, want %#v", m.offsetsGuest, want)
				}
			case *memoryOffsets:
				if _, ok := m.offsetsGuest.(*memoryOffsets); !ok {
					t.Fatalf("guest %#v, want memory", m.offsetsGuest)
				}
			}
		})
	}
}

// A registry with another guest under groups.assignor offers it to `assignors:`.
func TestAssignorGuestFromRegistry(t *testing.T) {
	reg := kernel.NewRegistry()
	for _, mi := range Guests() {
		reg.Register(mi)
	}
	reg.Register(kernel.ModuleInfo{ID: AssignorNamespace + ".first", New: func() kernel.Module { return &builtinAssignor{a: namedUniform{"first"}} }})
	m := New()
	m.guests = reg
	if err := yaml.Unmarshal([]byte("assignors: [first, range]\n"), m); err != nil {
		t.Fatal(err)
	}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(m.assignors) != 2 || m.assignors[0].Name() != "first" || m.assignors[1].Name() != "range" {
		t.Fatalf("assignors %v", m.assignors)
	}
	// The same config without the guest registered fails, listing what is known.
	m = New()
	_ = yaml.Unmarshal([]byte("assignors: [first]\n"), m)
	if err := m.Validate(); err == nil || !strings.Contains(err.Error(), `unknown assignor "first" (known: range, uniform;`) {
		t.Fatalf("got %v", err)
	}
}

// namedUniform is the uniform assignor under another name.
type namedUniform struct{ name string }

func (n namedUniform) Name() string { return n.name }
func (n namedUniform) Assign(ctx context.Context, in assignor.Input) (assignor.Assignment, error) {
	return assignor.Uniform{}.Assign(ctx, in)
}
