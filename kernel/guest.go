package kernel

import (
	"errors"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Guests are modules one level deeper than roles: a host module names a namespace under
// its role (the groups module's "groups.assignor", "groups.offsets") and config picks
// any guest registered under it, the way `use:` picks a role's module:
//
//	modules:
//	  groups:
//	    use: coordinator
//	    offsets: memory                       # a name: groups.offsets.memory
//	    # offsets: {use: badger}              # or a mapping: `use:` and the guest's config
//	    assignors: [uniform, range, {name: rack-aware, plugin: ./bin/x}]
//
// The host keeps the guest's raw section in a yaml.Node field named XxxRaw
// (OffsetsRaw, tagged yaml:"offsets"), so the kernel's strict decode of the host leaves
// it alone, and makes the guest with NewGuest (or LoadGuest) from it. The
// guest lives inside its host: the host drives whatever the guest does after Validate
// (open a store at Start, close it at Cleanup), through an interface the host defines.

// ErrUnknownGuest is wrapped by NewGuest's error for a name nothing is registered under.
var ErrUnknownGuest = errors.New("unknown guest")

// NewGuest makes the guest of namespace that section names, decodes the guest's own
// keys into it strictly (unknown keys are errors) and runs its Validate if it has one.
// section is the host's XxxRaw field:
//   - empty (the key absent, without a value, or null): the guest def;
//   - a scalar: the guest's name (`offsets: memory`);
//   - a mapping: `use:` names the guest (def when absent) and the other keys are its
//     config (`offsets: {use: badger}`).
//
// A name nothing is registered under is an error wrapping ErrUnknownGuest that lists
// the known names, as an unknown `use:` of a role is.
func (r *Registry) NewGuest(namespace string, section yaml.Node, def string) (Module, error) {
	name := def
	var raw *yaml.Node
	switch {
	case section.Kind == 0, section.Kind == yaml.ScalarNode && section.Tag == "!!null":
	case section.Kind == yaml.ScalarNode:
		if section.Tag != "" && section.Tag != "!!str" || section.Value == "" {
			return nil, fmt.Errorf("config: %s: %q is not a name (line %d)", namespace, section.Value, section.Line)
		}
		name = section.Value
	case section.Kind == yaml.MappingNode:
		use, rest, err := splitUse(&section)
		if err != nil {
			return nil, fmt.Errorf("config: %s%w", namespace, err)
		}
		if use != "" {
			name = use
		}
		raw = rest
	default:
		return nil, fmt.Errorf("config: %s must be a name or a mapping with a `use:` key (line %d)", namespace, section.Line)
	}
	known := r.Guests(namespace)
	if name == "" {
		return nil, fmt.Errorf("config: %s: no `use:` and no default (known: %s)", namespace, strings.Join(known, ", "))
	}
	mi, ok := r.lookupIn(namespace, name)
	if !ok {
		return nil, fmt.Errorf("config: %w %q for %s (known: %s)", ErrUnknownGuest, name, namespace, strings.Join(known, ", "))
	}
	g := mi.New()
	if err := decodeModule(mi.ID, raw, g); err != nil {
		return nil, err
	}
	if v, ok := g.(Validator); ok {
		if err := v.Validate(); err != nil {
			return nil, fmt.Errorf("config: module %s: %w", mi.ID, err)
		}
	}
	return g, nil
}

// GuestRegistry is the optional Context capability that gives a host the registry its
// guests come from: the one the broker was composed from. The kernel's Context has it;
// a test's fake Context may not.
type GuestRegistry interface {
	Registry() *Registry
}

// LoadGuest is NewGuest with the registry of the host's Context; a host calls it during
// Provision. It fails if ctx offers no registry (GuestRegistry).
func LoadGuest(ctx Context, namespace string, section yaml.Node, def string) (Module, error) {
	gr, ok := ctx.(GuestRegistry)
	if !ok {
		return nil, fmt.Errorf("config: %s: the kernel context %T has no guest registry", namespace, ctx)
	}
	return gr.Registry().NewGuest(namespace, section, def)
}
