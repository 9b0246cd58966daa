// Package archtest checks the import graph: the kernel imports no module, and modules
// reach each other only through interfaces the kernel defines (never by importing
// another module's package). modules/standard, which registers them all, and the test
// harness are the exceptions.
package archtest

import (
	"os/exec"
	"strings"
	"testing"
)

const mod = "github.com/sluicehq/sluice/"

func TestImportGraph(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, mod+"...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 5 {
		t.Fatalf("go list found only %d packages", len(lines))
	}
	for _, line := range lines {
		f := strings.Fields(line)
		pkg, imports := strings.TrimPrefix(f[0], mod), f[1:]
		for _, imp := range imports {
			if !strings.HasPrefix(imp, mod) {
				continue
			}
			imp = strings.TrimPrefix(imp, mod)
			if msg := violation(pkg, imp); msg != "" {
				t.Errorf("%s imports %s: %s", pkg, imp, msg)
			}
		}
	}
}

// moduleOf returns "storage" for "modules/storage/segmentlog", "transforms" for
// "transforms/wasm" (the transforms module lives at the top level), "" elsewhere.
func moduleOf(pkg string) string {
	if pkg == "transforms" || strings.HasPrefix(pkg, "transforms/") {
		return "transforms"
	}
	rest, ok := strings.CutPrefix(pkg, "modules/")
	if !ok {
		return ""
	}
	m, _, _ := strings.Cut(rest, "/")
	return m
}

func violation(pkg, imp string) string {
	impMod := moduleOf(imp)
	switch {
	case strings.HasPrefix(pkg, "kernel") && (impMod != "" || strings.HasPrefix(imp, "internal/")):
		return "the kernel imports no module and no internal package"
	case pkg == "modules/standard" || pkg == "internal/testbroker" || strings.HasPrefix(pkg, "cmd/"):
		return ""
	case strings.HasPrefix(pkg, "plugins/") || strings.HasPrefix(pkg, "examples/"):
		// The plugin SDK and the examples are for code outside the broker: they may
		// use a module's public types (the assignor SDK aliases the groups module's
		// assignor types, so plugins and built-ins share one shape).
		return ""
	case impMod != "" && moduleOf(pkg) != impMod:
		return "modules reach each other through kernel interfaces, not imports"
	}
	return ""
}

func TestViolationRules(t *testing.T) {
	for _, tc := range []struct {
		pkg, imp string
		bad      bool
	}{
		{"kernel", "modules/storage/segmentlog", true},
		{"kernel", "internal/kconfig", true},
		{"modules/replication", "modules/storage/memory", true},
		{"modules/replication", "kernel", false},
		{"modules/storage/segmentlog", "modules/storage/internal/batches", false},
		{"modules/standard", "modules/metadata", false},
		{"internal/recordbatch", "kernel", false},
		{"transforms", "modules/replication", true},
		{"modules/replication", "transforms", true},
		{"transforms", "transforms/wasm", false},
		{"kernel", "transforms/wasm", true},
		{"plugins/assignor", "modules/groups/assignor", false},
		{"internal/kconfig", "modules/groups/assignor", true},
	} {
		if got := violation(tc.pkg, tc.imp) != ""; got != tc.bad {
			t.Errorf("violation(%s, %s) = %v, want %v", tc.pkg, tc.imp, got, tc.bad)
		}
	}
}
