package groups

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/groups/assignor"
)

// The groups module hosts guests (kernel/guest.go) in two namespaces, and config picks
// them:
//
//	groups:
//	  use: coordinator
//	  offsets: memory          # groups.offsets.<name>: badger (default) or memory;
//	                           # also {use: badger, dir: /fast/disk/offsets}
//	  assignors:               # each a groups.assignor.<name>: uniform, range, or
//	    - uniform              # a mapping with plugin: for groups.assignor.plugin
//	    - {name: rack-aware, plugin: ./bin/rack-aware}
const (
	// AssignorNamespace holds the KIP-848 server-side assignors: a guest offers
	// AssignorGuest.
	AssignorNamespace = "groups.assignor"
	// OffsetsNamespace holds the offset stores: a guest offers OffsetsGuest.
	OffsetsNamespace = "groups.offsets"
)

// pluginGuestName is the assignor guest an `assignors:` mapping configures.
const pluginGuestName = "plugin"

// defaultOffsetsGuest is the offset store when config names none.
const defaultOffsetsGuest = "badger"

// Guests returns the groups module's own guests, for modules/standard.Register: the
// built-in assignors, the plugin assignor, and the badger and memory offset stores.
func Guests() []kernel.ModuleInfo {
	return []kernel.ModuleInfo{
		{ID: AssignorNamespace + "." + assignor.Uniform{}.Name(), New: func() kernel.Module { return &builtinAssignor{a: assignor.Uniform{}} }},
		{ID: AssignorNamespace + "." + assignor.Range{}.Name(), New: func() kernel.Module { return &builtinAssignor{a: assignor.Range{}} }},
		{ID: AssignorNamespace + "." + pluginGuestName, New: func() kernel.Module { return &pluginGuest{} }},
		{ID: OffsetsNamespace + ".badger", New: func() kernel.Module { return &badgerOffsets{} }},
		{ID: OffsetsNamespace + ".memory", New: func() kernel.Module { return &memoryOffsets{} }},
	}
}

// AssignorGuest is what a groups.assignor guest offers the module.
type AssignorGuest interface {
	// Assignor returns the assignor the guest configures. A *pluginAssignor is also
	// started and stopped with the module.
	Assignor() assignor.Assignor
}

// builtinAssignor is the guest of a built-in assignor; it has no settings.
type builtinAssignor struct{ a assignor.Assignor }

func (g *builtinAssignor) Assignor() assignor.Assignor { return g.a }

// pluginGuest is groups.assignor.plugin: an assignor plugin process, configured by an
// `assignors:` mapping (AssignorConfig).
type pluginGuest struct{ cfg AssignorConfig }

// UnmarshalYAML decodes the mapping strictly (AssignorConfig's own check of its keys).
func (g *pluginGuest) UnmarshalYAML(n *yaml.Node) error { return g.cfg.UnmarshalYAML(n) }

func (g *pluginGuest) Validate() error             { return g.cfg.validate() }
func (g *pluginGuest) ConfigShape() any            { return &g.cfg }
func (g *pluginGuest) Assignor() assignor.Assignor { return newPluginAssignor(g.cfg) }

// guestRegistry returns the registry the module's guests come from: the broker's, when
// a kernel provisioned the module, else (a module built by hand in a test) one holding
// just the module's own guests.
func (m *Module) guestRegistry() *kernel.Registry {
	if m.guests != nil {
		return m.guests
	}
	reg := kernel.NewRegistry()
	for _, mi := range Guests() {
		reg.Register(mi)
	}
	return reg
}

// loadGuests makes the assignors and the offset store guest from config. Validate calls
// it: the guests' settings are what it checks, and the built-in defaults must work for
// a module that was never provisioned.
func (m *Module) loadGuests() error {
	reg := m.guestRegistry()
	m.assignors, m.plugins = nil, nil
	seen := map[string]bool{}
	for _, c := range m.Assignors {
		a, err := newAssignor(reg, c)
		if err != nil {
			return fmt.Errorf("groups: assignors: %w", err)
		}
		if seen[c.Name] {
			return fmt.Errorf("groups: assignor %q listed twice", c.Name)
		}
		seen[c.Name] = true
		if p, ok := a.(*pluginAssignor); ok {
			m.plugins = append(m.plugins, p)
		}
		m.assignors = append(m.assignors, a)
	}
	g, err := reg.NewGuest(OffsetsNamespace, m.OffsetsRaw, defaultOffsetsGuest)
	if err != nil {
		return fmt.Errorf("groups: offsets: %w", err)
	}
	og, ok := g.(OffsetsGuest)
	if !ok {
		return fmt.Errorf("groups: offsets: guest %T is no OffsetsGuest", g)
	}
	m.offsetsGuest = og
	return nil
}

// newAssignor makes the assignor guest one `assignors:` item names: a name picks that
// guest, a mapping configures the plugin guest.
func newAssignor(reg *kernel.Registry, c AssignorConfig) (assignor.Assignor, error) {
	if err := c.validateName(); err != nil {
		return nil, err
	}
	var sec yaml.Node
	if c.isPlugin() {
		if err := sec.Encode(c); err != nil {
			return nil, fmt.Errorf("assignor %q: %w", c.Name, err)
		}
	} else {
		known := slices.DeleteFunc(reg.Guests(AssignorNamespace), func(n string) bool { return n == pluginGuestName })
		if !slices.Contains(known, c.Name) {
			return nil, fmt.Errorf("unknown assignor %q (known: %s; a plugin needs `plugin:`)", c.Name, strings.Join(known, ", "))
		}
		sec = yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: c.Name}
	}
	g, err := reg.NewGuest(AssignorNamespace, sec, pluginGuestName)
	if err != nil {
		return nil, err
	}
	ag, ok := g.(AssignorGuest)
	if !ok {
		return nil, fmt.Errorf("assignor %q: guest %T is no AssignorGuest", c.Name, g)
	}
	a := ag.Assignor()
	if a.Name() != c.Name {
		return nil, fmt.Errorf("assignor %q: its guest's assignor is named %q", c.Name, a.Name())
	}
	return a, nil
}

// logWith returns log, or a discarding logger for a module built by hand.
func logWith(log *slog.Logger, args ...any) *slog.Logger {
	if log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return log.With(args...)
}

var (
	_ AssignorGuest    = (*builtinAssignor)(nil)
	_ AssignorGuest    = (*pluginGuest)(nil)
	_ kernel.Validator = (*pluginGuest)(nil)
	_ yaml.Unmarshaler = (*pluginGuest)(nil)
)
