package kernel

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/kernel/suggest"
)

// ConfigErrors lists every problem found in a config file at once: each unknown key
// (with the key's path, its line and a "did you mean" hint) and each value of the wrong
// type. A typo should cost one edit-and-restart, not one per typo.
type ConfigErrors []error

func (e ConfigErrors) Error() string {
	if len(e) == 1 {
		return e[0].Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d problems:", len(e))
	for _, err := range e {
		b.WriteString("\n  ")
		b.WriteString(err.Error())
	}
	return b.String()
}

// ByLine returns the problems ordered by the line they name (those naming none first),
// otherwise in their order.
func (e ConfigErrors) ByLine() ConfigErrors {
	line := func(err error) int {
		var n int
		if _, scanErr := fmt.Sscanf(err.Error(), "line %d:", &n); scanErr != nil {
			return 0
		}
		return n
	}
	out := slices.Clone(e)
	slices.SortStableFunc(out, func(a, b error) int { return line(a) - line(b) })
	return out
}

// Unwrap lets errors.Is and errors.As see each problem.
func (e ConfigErrors) Unwrap() []error { return e }

// Add appends err to e, flattening a ConfigErrors (also one inside another error's
// chain) so each problem is one line of the report; a nil err adds nothing.
func (e ConfigErrors) Add(err error) ConfigErrors {
	var ce ConfigErrors
	switch {
	case err == nil:
		return e
	case errors.As(err, &ce):
		return append(e, ce...)
	default:
		return append(e, err)
	}
}

// decodeStrict decodes n into v (a pointer), reporting every key v's type does not
// have and every value yaml cannot convert, all at once. path names n in messages
// ("modules.groups"); yaml's own strict mode (Decoder.KnownFields) is not used because
// it exists only for whole documents, loses the lines of a re-encoded section and
// offers no hints.
func decodeStrict(n *yaml.Node, v any, path string) error {
	if n == nil || n.Kind == 0 {
		return nil
	}
	var errs ConfigErrors
	checkKeys(n, reflect.TypeOf(v), path, &errs)
	if err := n.Decode(v); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			for _, m := range te.Errors {
				// yaml says "line N: cannot unmarshal ..."; the line leads, as above.
				if line, rest, ok := strings.Cut(m, ": "); ok && strings.HasPrefix(line, "line ") {
					errs = append(errs, fmt.Errorf("%s: %s: %s", line, path, rest))
				} else {
					errs = append(errs, fmt.Errorf("%s: %s", path, m))
				}
			}
		} else {
			errs = append(errs, fmt.Errorf("%s: %w", path, err))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return errs
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// checkKeys walks n alongside the Go type t and appends an error for each mapping key t
// does not decode. It follows pointers, slices, arrays, maps and struct fields (yaml
// tags, `,inline`); it does not look inside a yaml.Node field (a host decodes such a
// section itself, as a guest's) or a type with its own UnmarshalYAML (which checks its
// own keys).
func checkKeys(n *yaml.Node, t reflect.Type, path string, errs *ConfigErrors) {
	for n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeFor[yaml.Node]() || t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) {
		return
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		if n.Kind == yaml.SequenceNode {
			for i, item := range n.Content {
				checkKeys(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i), errs)
			}
		}
	case reflect.Map:
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				checkKeys(n.Content[i+1], t.Elem(), joinPath(path, n.Content[i].Value), errs)
			}
		}
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return // a type error, which Decode reports
		}
		fields, open := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			if k.Value == "<<" { // a merge key: its mapping's keys are this one's
				checkKeys(val, t, path, errs)
				continue
			}
			ft, ok := fields[k.Value]
			if !ok {
				if open {
					continue
				}
				names := slices.Sorted(maps.Keys(fields))
				hint := suggest.Hint(k.Value, names)
				switch {
				case hint != "":
				case len(names) == 0:
					hint = " (this section takes no keys)"
				default:
					hint = " (keys: " + strings.Join(names, ", ") + ")"
				}
				*errs = append(*errs, fmt.Errorf("line %d: %s: unknown key%s", k.Line, joinPath(path, k.Value), hint))
				continue
			}
			checkKeys(val, ft, joinPath(path, k.Value), errs)
		}
	}
}

// yamlFields returns the keys a struct type decodes, by yaml's rules (the tag's name,
// else the lowercased field name; `-` skipped; `,inline` structs merged), and whether
// an inline map takes any other key.
func yamlFields(t reflect.Type) (map[string]reflect.Type, bool) {
	fields := map[string]reflect.Type{}
	open := false
	for f := range t.Fields() {
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if slices.Contains(strings.Split(opts, ","), "inline") {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			switch ft.Kind() {
			case reflect.Struct:
				inner, innerOpen := yamlFields(ft)
				maps.Copy(fields, inner)
				open = open || innerOpen
			case reflect.Map:
				open = true
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		fields[name] = f.Type
	}
	return fields, open
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
