package kernel

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

type strictInner struct {
	Size int `yaml:"size"`
}

type strictEmbedded struct {
	Colour string `yaml:"colour"`
}

type strictOuter struct {
	strictEmbedded `yaml:",inline"`
	Name           string                 `yaml:"name"`
	Items          []strictInner          `yaml:"items"`
	ByName         map[string]strictInner `yaml:"by_name"`
	Ptr            *strictInner           `yaml:"ptr"`
	Raw            yaml.Node              `yaml:"raw"`
	Untagged       int
	Skipped        int `yaml:"-"`
}

// Every unknown key in every nesting is reported at once with its path and line; yaml
// Nodes are left to their host and merge keys and aliases are followed.
func TestDecodeStrict(t *testing.T) {
	src := `name: x
colour: red
colur: blue
untagged: 1
skipped: 2
items: [{size: 1}, {sise: 2}]
by_name: {a: {size: 1}, b: {big: 2}}
ptr: {size: x}
raw: {anything: goes}
base: &b {size: 1, wrong: 1}
`
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	var v strictOuter
	err := decodeStrict(&doc, &v, "sec")
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		"line 3: sec.colur: unknown key (did you mean colour?)",
		"line 5: sec.skipped: unknown key",
		"line 6: sec.items[1].sise: unknown key (did you mean size?)",
		"line 7: sec.by_name.b.big: unknown key (keys: size)",
		"line 8: sec: cannot unmarshal !!str `x` into int",
		"line 10: sec.base: unknown key",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	for _, bad := range []string{"untagged: unknown", "anything", "colour: unknown"} {
		if strings.Contains(err.Error(), bad) {
			t.Errorf("error names %q, a key the type takes:\n%v", bad, err)
		}
	}
	if v.Colour != "red" || v.Untagged != 1 || len(v.Items) != 2 || v.Raw.Kind != yaml.MappingNode {
		t.Errorf("decoded %+v", v)
	}

	merged := "defaults: &d {size: 1, bogus: 2}\nitems: [{<<: *d, size: 3}]\n"
	var doc2 yaml.Node
	if err := yaml.Unmarshal([]byte(merged), &doc2); err != nil {
		t.Fatal(err)
	}
	var m struct {
		Defaults yaml.Node     `yaml:"defaults"`
		Items    []strictInner `yaml:"items"`
	}
	err = decodeStrict(&doc2, &m, "")
	if err == nil || !strings.Contains(err.Error(), "items[0].bogus: unknown key") {
		t.Errorf("a merged mapping's unknown key: %v", err)
	}
}

// ParseConfig never panics, whatever the bytes; its problems are each one line.
func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{
		"", "node_id: 1\n", "listners: []\n", "modules: {storage: {use: segmentlog}}\n",
		"a: &a [*a]\n", "<<: {node_id: 2}\n", "log: {level: [1, 2]}\n", "configs: {a: {b: c}}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := DecodeConfig(data)
		if c == nil && err == nil {
			t.Fatal("no config and no error")
		}
	})
}
