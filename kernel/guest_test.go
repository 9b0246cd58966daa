package kernel_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/kernel"
)

// hostModule makes one guest of "host.thing" from its `thing:` section in Provision.
type hostModule struct {
	ThingRaw yaml.Node `yaml:"thing"`
	Other    int       `yaml:"other"`
	thing    *thingGuest
}

func (m *hostModule) Provision(ctx kernel.Context) error {
	g, err := kernel.LoadGuest(ctx, "host.thing", m.ThingRaw, "plain")
	if err != nil {
		return err
	}
	m.thing = g.(*thingGuest)
	return nil
}

// thingGuest is a guest with one setting; a negative size fails its Validate.
type thingGuest struct {
	Size int `yaml:"size"`
	kind string
}

func (g *thingGuest) Validate() error {
	if g.Size < 0 {
		return errors.New("size must be >= 0")
	}
	return nil
}

var _ kernel.Provisioner = (*hostModule)(nil)

func guestRegistry(host **hostModule) *kernel.Registry {
	reg := kernel.NewRegistry()
	reg.Register(kernel.ModuleInfo{ID: "host.basic", New: func() kernel.Module { *host = &hostModule{}; return *host }})
	for _, kind := range []string{"plain", "fancy"} {
		reg.Register(kernel.ModuleInfo{ID: "host.thing." + kind, New: func() kernel.Module { return &thingGuest{kind: kind} }})
	}
	// Deeper than a direct child: not a guest of host.thing.
	reg.Register(kernel.ModuleInfo{ID: "host.thing.fancy.part", New: func() kernel.Module { return &thingGuest{} }})
	return reg
}

func TestRegistryGuests(t *testing.T) {
	var h *hostModule
	reg := guestRegistry(&h)
	if got := reg.Guests("host.thing"); !slices.Equal(got, []string{"fancy", "plain"}) {
		t.Fatalf("Guests(host.thing) = %v", got)
	}
	if got := reg.Guests("host.thing.fancy"); !slices.Equal(got, []string{"part"}) {
		t.Fatalf("Guests(host.thing.fancy) = %v", got)
	}
	// A role's names are its modules, not the guests of its namespaces.
	if got := reg.Names("host"); !slices.Equal(got, []string{"basic"}) {
		t.Fatalf("Names(host) = %v", got)
	}
	for _, id := range []string{"host..x", "host.thing.", ".x"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q) did not panic", id)
				}
			}()
			reg.Register(kernel.ModuleInfo{ID: id, New: func() kernel.Module { return nil }})
		}()
	}
}

func TestGuestConfig(t *testing.T) {
	for _, tc := range []struct {
		name, section string
		kind          string
		size          int
		want          string // error substring; "" for success
	}{
		{name: "absent: the default", kind: "plain"},
		{name: "a name", section: "thing: fancy", kind: "fancy"},
		{name: "use and config", section: "thing: {use: fancy, size: 3}", kind: "fancy", size: 3},
		{name: "config of the default", section: "thing: {size: 2}", kind: "plain", size: 2},
		{name: "no value", section: "thing:", kind: "plain"},
		{name: "unknown name", section: "thing: shiny", want: `unknown guest "shiny" for host.thing (known: fancy, plain)`},
		{name: "unknown use", section: "thing: {use: shiny}", want: `unknown guest "shiny" for host.thing (known: fancy, plain)`},
		{name: "deeper ID is no guest", section: "thing: fancy.part", want: `unknown guest "fancy.part"`},
		{name: "unknown guest key", section: "thing: {use: fancy, colour: red}", want: "line 4: host.thing.fancy.colour: unknown key (keys: size)"},
		{name: "guest validate", section: "thing: {size: -1}", want: "module host.thing.plain: size must be >= 0"},
		{name: "bad use", section: "thing: {use: [a]}", want: "host.thing.use must be a module name"},
		{name: "a list", section: "thing: [a]", want: "host.thing must be a name or a mapping"},
		{name: "a number", section: "thing: 5", want: "is not a name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h *hostModule
			reg := guestRegistry(&h)
			y := "modules: {host: {use: basic}}\n"
			if tc.section != "" {
				y = fmt.Sprintf("modules:\n  host:\n    use: basic\n    %s\n", tc.section)
			}
			k := unstartedKernel(t, reg, y)
			err := k.Start(context.Background())
			if err == nil {
				t.Cleanup(func() { _ = k.Shutdown(context.Background()) })
			}
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("got %v, want an error containing %q", err, tc.want)
				}
				if strings.Contains(tc.want, "unknown guest") && !errors.Is(err, kernel.ErrUnknownGuest) {
					t.Fatalf("%v does not wrap ErrUnknownGuest", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.thing.kind != tc.kind || h.thing.Size != tc.size {
				t.Fatalf("guest %+v, want kind %s size %d", h.thing, tc.kind, tc.size)
			}
		})
	}
}

// A guest is not a role's module: `use:` cannot pick one.
func TestGuestIsNoRoleModule(t *testing.T) {
	var h *hostModule
	reg := guestRegistry(&h)
	cfg, err := kernel.ParseConfig([]byte("modules: {host: {use: thing.plain}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = kernel.New(cfg, reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil || !strings.Contains(err.Error(), `unknown module "thing.plain" for modules.host (known: basic)`) {
		t.Fatalf("got %v", err)
	}
}
