package main

import (
	"bytes"
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updateReference = flag.Bool("update", false, "rewrite docs/CONFIG.md")

const modulePath = "github.com/sluicehq/sluice"

// sourceDocs reads the doc comments of struct fields from the repository's sources.
func sourceDocs(t *testing.T) fieldDocs {
	t.Helper()
	root := filepath.Join("..", "..")
	cache := map[string]map[string]string{} // pkg path -> "Type.Field" -> doc
	return func(pkgPath, typeName, field string) string {
		rel, ok := strings.CutPrefix(pkgPath, modulePath)
		if !ok {
			return ""
		}
		m, ok := cache[pkgPath]
		if !ok {
			m = map[string]string{}
			cache[pkgPath] = m
			fset := token.NewFileSet()
			dir := filepath.Join(root, rel)
			ents, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
					continue
				}
				f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.ParseComments)
				if err != nil {
					t.Fatal(err)
				}
				ast.Inspect(f, func(n ast.Node) bool {
					ts, ok := n.(*ast.TypeSpec)
					if !ok {
						return true
					}
					st, ok := ts.Type.(*ast.StructType)
					if !ok {
						return true
					}
					for _, fl := range st.Fields.List {
						text := fl.Doc.Text()
						if text == "" {
							text = fl.Comment.Text()
						}
						for _, name := range fl.Names {
							m[ts.Name.Name+"."+name.Name] = firstParagraph(text)
						}
					}
					return true
				})
			}
		}
		return m[typeName+"."+field]
	}
}

// firstParagraph is a doc comment's first paragraph, on one line.
func firstParagraph(text string) string {
	para, _, _ := strings.Cut(strings.TrimSpace(text), "\n\n")
	return strings.Join(strings.Fields(para), " ")
}

// docs/CONFIG.md is what the code says; -update rewrites it.
func TestConfigReference(t *testing.T) {
	var buf bytes.Buffer
	writeConfigReference(&buf, sourceDocs(t))
	path := filepath.Join("..", "..", "docs", "CONFIG.md")
	if *updateReference {
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	have, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(have, buf.Bytes()) {
		t.Fatalf("docs/CONFIG.md is stale (or missing: %v): run go test ./cmd/sluice -run TestConfigReference -update", err)
	}
	for _, want := range []string{"`data_dir`", "### `storage: {use: segmentlog}`", "`num.partitions`", "`retention.ms`",
		"`fetch_session_cache_slots`", "### Guest `groups.offsets.badger`", "| `sha256` |"} {
		if !strings.Contains(buf.String(), want) {
			t.Fatalf("the reference lacks %s", want)
		}
	}
	// Every key has a description: a key without a Go doc comment fails here.
	for _, line := range strings.Split(buf.String(), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) >= 5 && strings.HasPrefix(strings.TrimSpace(cells[1]), "`") && strings.TrimSpace(cells[len(cells)-2]) == "" {
			t.Errorf("no description (give the field a doc comment): %s", line)
		}
	}
}

// sluice config defaults prints the reference without descriptions.
func TestConfigDefaults(t *testing.T) {
	var out, errb bytes.Buffer
	if rc := run([]string{"config", "defaults"}, &out, &errb); rc != 0 {
		t.Fatalf("exit %d %s", rc, errb.String())
	}
	wantLines(t, out.String(), "| `num.partitions` | INT | `1` |", "## Config file keys", "| `node_id` | integer | `1` |")
}
