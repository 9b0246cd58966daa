package main

// The configuration reference: every key of the config file, every module's keys and
// every Kafka broker and topic config, with defaults. `sluice config defaults` prints
// it; docs/CONFIG.md is the same text with the Go doc comments of the keys, generated
// by TestConfigReference (go test ./cmd/sluice -run TestConfigReference -update).

import (
	"fmt"
	"io"
	"reflect"
	"strings"

	"github.com/sluicehq/sluice/internal/kconfig"
	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/standard"
)

const configUsage = `usage: sluice config <command>

commands:
  defaults   print every config file key, module key and Kafka broker and topic
             config with its default (Markdown; docs/CONFIG.md adds descriptions)
`

func configCmd(args []string, stdout, stderr io.Writer) int {
	return dispatch("sluice config", configUsage, args, stdout, stderr, []command{
		{[]string{"defaults"}, func(args []string, stdout, stderr io.Writer) int {
			if len(args) > 0 {
				fmt.Fprintf(stderr, "sluice config defaults: unexpected arguments %q\n", args)
				return 2
			}
			writeConfigReference(stdout, nil)
			return 0
		}},
	})
}

// fieldDocs returns the doc comment of a struct field (type's package path, type
// name, field name), "" when unknown. Nil: no docs (the binary has no sources).
type fieldDocs func(pkgPath, typeName, field string) string

// writeConfigReference writes the reference in Markdown.
func writeConfigReference(w io.Writer, docs fieldDocs) {
	if docs == nil {
		docs = func(string, string, string) string { return "" }
	}
	fmt.Fprint(w, `# Configuration reference

Generated from the code by `+"`go test ./cmd/sluice -run TestConfigReference -update`"+`
(a test fails when this file is stale); `+"`sluice config defaults`"+` prints the same
without descriptions. A config file (YAML, `+"`sluice serve --config FILE`"+`) may be
empty: every key has a default.

## Config file keys

`)
	writeStructKeys(w, reflect.TypeOf(kernel.Config{}), "", docs, map[string]string{
		"node_id": "1", "data_dir": kernel.DefaultDataDir, "admin_listen": kernel.DefaultAdminListen,
		"listeners":            "[{name: PLAINTEXT, address: " + kernel.DefaultListen + "}]",
		"admin_max_body_bytes": "67108864", "admin_max_concurrent_uploads": "2",
		"log.level": "info", "log.format": "text",
	})

	fmt.Fprint(w, "\n## Modules\n\nEach role's section under `modules:` names its implementation with `use:`; the other keys are that module's. The default of each key is what the module starts with when the key is absent (0 often means \"the broker config of the same meaning\", as each key's description says).\n")
	reg := kernel.NewRegistry()
	standard.Register(reg)
	for _, role := range reg.Roles() {
		for _, name := range reg.Guests(role) {
			mi, ok := reg.Lookup(role + "." + name)
			if !ok {
				continue
			}
			fmt.Fprintf(w, "\n### `%s: {use: %s}`\n\n", role, name)
			writeModuleKeys(w, mi.New(), docs)
		}
		for _, ns := range reg.Namespaces(role) {
			for _, name := range reg.Guests(ns) {
				mi, _ := reg.Lookup(ns + "." + name)
				fmt.Fprintf(w, "\n### Guest `%s.%s`\n\nNamed in the `%s` module's section, by its key that takes `%s` guests.\n\n", ns, name, role, ns)
				writeModuleKeys(w, mi.New(), docs)
			}
		}
	}

	fmt.Fprint(w, "\n## Kafka broker configs (`configs:`)\n\nKafka's names and defaults. Dynamic ones can also be changed at runtime with IncrementalAlterConfigs (per broker or cluster-wide); the others only in the file.\n\n| name | type | default | dynamic | description |\n|---|---|---|---|---|\n")
	for _, e := range kconfig.DescribeBroker(nil, nil, nil) {
		fmt.Fprintf(w, "| `%s` | %s | %s | %s | %s |\n", e.Name, e.Type, cell(e.Value), yesNo(kconfig.IsDynamicBrokerConfig(e.Name)), mdEscape(e.Doc))
	}
	fmt.Fprint(w, "\n## Topic configs\n\nSet at creation or with (Incremental)AlterConfigs; the default is the broker config of the same meaning.\n\n| name | type | default | description |\n|---|---|---|---|\n")
	for _, e := range kconfig.DescribeTopic(nil, nil, nil, nil) {
		fmt.Fprintf(w, "| `%s` | %s | %s | %s |\n", e.Name, e.Type, cell(e.Value), mdEscape(e.Doc))
	}
}

func cell(v *string) string {
	if v == nil {
		return "(none)"
	}
	if *v == "" {
		return `""`
	}
	return "`" + *v + "`"
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func mdEscape(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.Join(strings.Fields(s), " ")
}

// yamlKey is a field's YAML key, "" for none or "-".
// configShaper is a module whose keys are those of another value (its config
// decoded by a YAML unmarshaler of its own): ConfigShape returns that value.
type configShaper interface{ ConfigShape() any }

// writeModuleKeys lists a new module's (or guest's) keys with their defaults.
func writeModuleKeys(w io.Writer, m any, docs fieldDocs) {
	if cs, ok := m.(configShaper); ok {
		m = cs.ConfigShape()
	}
	v := reflect.ValueOf(m)
	for v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct || !hasYAMLKeys(v.Type()) {
		fmt.Fprint(w, "No keys of its own.\n")
		return
	}
	writeStructValues(w, v, docs)
}

func yamlKey(f reflect.StructField) string {
	tag := f.Tag.Get("yaml")
	name, _, _ := strings.Cut(tag, ",")
	if !f.IsExported() || name == "-" || name == "" {
		return ""
	}
	return name
}

func hasYAMLKeys(t reflect.Type) bool {
	for i := range t.NumField() {
		if yamlKey(t.Field(i)) != "" {
			return true
		}
	}
	return false
}

// writeStructKeys lists t's keys with the given defaults (nested structs by dotted
// key).
func writeStructKeys(w io.Writer, t reflect.Type, prefix string, docs fieldDocs, defaults map[string]string) {
	if prefix == "" {
		fmt.Fprint(w, "| key | type | default | description |\n|---|---|---|---|\n")
	}
	for i := range t.NumField() {
		f := t.Field(i)
		key := yamlKey(f)
		if key == "" {
			continue
		}
		if f.Type.Kind() == reflect.Struct && f.Type.PkgPath() == t.PkgPath() {
			writeStructKeys(w, f.Type, prefix+key+".", docs, defaults)
			continue
		}
		d := defaults[prefix+key]
		if d == "" && f.Type.Kind() == reflect.Bool {
			d = "false"
		}
		if d == "" {
			d = "(none)"
		} else {
			d = "`" + d + "`"
		}
		fmt.Fprintf(w, "| `%s` | %s | %s | %s |\n", prefix+key, typeName(f.Type), d, mdEscape(docs(t.PkgPath(), t.Name(), f.Name)))
	}
}

// writeStructValues lists v's keys with its values as the defaults.
func writeStructValues(w io.Writer, v reflect.Value, docs fieldDocs) {
	t := v.Type()
	fmt.Fprint(w, "| key | type | default | description |\n|---|---|---|---|\n")
	for i := range t.NumField() {
		f := t.Field(i)
		key := yamlKey(f)
		if key == "" {
			continue
		}
		fmt.Fprintf(w, "| `%s` | %s | %s | %s |\n", key, typeName(f.Type), valueCell(v.Field(i)), mdEscape(docs(t.PkgPath(), t.Name(), f.Name)))
	}
}

func valueCell(v reflect.Value) string {
	if v.IsZero() {
		return "(unset)"
	}
	switch v.Kind() {
	case reflect.Slice, reflect.Map, reflect.Struct, reflect.Pointer, reflect.Interface:
		return "(set)"
	}
	return fmt.Sprintf("`%v`", v.Interface())
}

func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Slice:
		return "list of " + typeName(t.Elem())
	case reflect.Map:
		return "map"
	case reflect.Struct:
		return "mapping"
	case reflect.Pointer:
		return typeName(t.Elem())
	case reflect.Bool:
		return "bool"
	case reflect.String:
		return "string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if t.PkgPath() == "time" {
			return "duration"
		}
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	}
	return t.Kind().String()
}
