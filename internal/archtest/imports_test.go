// Package archtest checks the import graph: the kernel imports no module, and modules
// reach each other only through interfaces the kernel defines (never by importing
// another module's package). modules/standard, which registers them all, and the test
// harness are the exceptions. The repository's other Go modules (the SDKs, the
// benchmark reference) import nothing of this repository outside themselves: an SDK's
// go get must not pull in the broker.
package archtest

import (
	"io/fs"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const mod = "github.com/sluicehq/sluice/"

// goModules returns the directory of every go.mod in the repository, relative to its
// root ("." for the broker's), skipping testdata and node_modules.
func goModules(t *testing.T, root string) []string {
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (d.Name() == "testdata" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.Name() == "go.mod" {
			rel, err := filepath.Rel(root, filepath.Dir(path))
			dirs = append(dirs, filepath.ToSlash(rel))
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

func TestImportGraph(t *testing.T) {
	root := filepath.Join("..", "..")
	modules := goModules(t, root)
	if len(modules) < 3 {
		t.Fatalf("found only the Go modules %v", modules)
	}
	for _, dir := range modules {
		cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...")
		cmd.Dir = filepath.Join(root, dir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go list in %s: %v\n%s", dir, err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if dir == "." && len(lines) < 5 {
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
				if msg := crossModule(dir, imp); msg != "" {
					t.Errorf("%s imports %s: %s", pkg, imp, msg)
				} else if msg := violation(pkg, imp); dir == "." && msg != "" {
					t.Errorf("%s imports %s: %s", pkg, imp, msg)
				}
			}
		}
	}
}

// crossModule says what is wrong with a package of the Go module in dir (relative to
// the repository root) importing imp (a path below mod); "" when nothing is.
func crossModule(dir, imp string) string {
	if dir == "." || imp == dir || strings.HasPrefix(imp, dir+"/") {
		return ""
	}
	return "the module " + dir + " imports nothing of the repository outside itself (an SDK must not pull in the broker)"
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

// kernelLeaves are the internal packages the kernel may import.
var kernelLeaves = map[string]bool{"internal/tlsconf": true, "internal/ratelog": true}

// parentOf is pkg's parent directory ("" at the top).
func parentOf(pkg string) string {
	if i := strings.LastIndexByte(pkg, '/'); i >= 0 {
		return pkg[:i]
	}
	return ""
}

func violation(pkg, imp string) string {
	impMod := moduleOf(imp)
	switch {
	case strings.HasPrefix(pkg, "kernel") && kernelLeaves[imp]:
		// The exceptions: TLS configuration, shared with the brokers' outgoing
		// connections, and the log rate limiter the modules share; they import
		// nothing of the repository (the next case).
		return ""
	case kernelLeaves[pkg] || kernelLeaves[parentOf(pkg)]:
		return pkg + " is imported by the kernel: it imports nothing of the repository"
	case strings.HasPrefix(pkg, "kernel") && (impMod != "" || strings.HasPrefix(imp, "internal/")):
		return "the kernel imports no module and no internal package (but internal/tlsconf and internal/ratelog)"
	case pkg == "modules/standard" || pkg == "internal/testbroker" || strings.HasPrefix(pkg, "cmd/"):
		return ""
	case strings.HasPrefix(pkg, "examples/"):
		// The examples are for code outside the broker: they may use a module's
		// public types.
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
		{"kernel", "internal/tlsconf", false},
		{"internal/tlsconf", "kernel", true},
		{"kernel", "internal/ratelog", false},
		{"internal/ratelog", "kernel", true},
		{"modules/replication", "modules/storage/memory", true},
		{"modules/replication", "kernel", false},
		{"modules/storage/segmentlog", "modules/storage/internal/batches", false},
		{"modules/standard", "modules/metadata", false},
		{"internal/recordbatch", "kernel", false},
		{"transforms", "modules/replication", true},
		{"modules/replication", "transforms", true},
		{"transforms", "transforms/wasm", false},
		{"kernel", "transforms/wasm", true},
		{"examples/assignors/rack-aware", "modules/groups/assignor", false},
		{"internal/kconfig", "modules/groups/assignor", true},
	} {
		if got := violation(tc.pkg, tc.imp) != ""; got != tc.bad {
			t.Errorf("violation(%s, %s) = %v, want %v", tc.pkg, tc.imp, got, tc.bad)
		}
	}
	for _, tc := range []struct {
		dir, imp string
		bad      bool
	}{
		{".", "plugins/assignor", false},
		{"plugins/assignor", "plugins/assignor/proto", false},
		{"plugins/assignor", "plugins/assignor", false},
		{"plugins/assignor", "modules/groups/assignor", true},
		{"plugins/assignor", "plugins/assignorx", true},
		{"sdk-wasm", "internal/recordbatch", true},
	} {
		if got := crossModule(tc.dir, tc.imp) != ""; got != tc.bad {
			t.Errorf("crossModule(%s, %s) = %v, want %v", tc.dir, tc.imp, got, tc.bad)
		}
	}
}
