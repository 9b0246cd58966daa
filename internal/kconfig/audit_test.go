package kconfig

import (
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The config audit (issue 23): every catalogued config either takes effect, or its
// description says "No effect in Sluice" and why, or a value other than its default
// is refused with INVALID_CONFIG. "Takes effect" is checked the way a reviewer would:
// a value other than the default must change a field of the resolved configs (Topic
// for topic configs, Broker for broker configs) that code outside this package reads,
// or code outside this package must read the config by its name. A config wired to
// nothing, or one marked "no effect" that something reads, fails the test.

const noEffectMark = "No effect in Sluice"

// repoSources is the text of every non-test Go file of the repository outside this
// package (and outside node_modules).
func repoSources(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	self, _ := filepath.Abs(".")
	var b strings.Builder
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "node_modules" || d.Name() == ".git" || p == self {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		b.Write(data)
		b.WriteByte('\n')
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// otherValue is a valid value of d other than its default ("" when none is found).
func otherValue(d *def) string {
	dflt := ""
	if d.dflt != nil {
		dflt = *d.dflt
	}
	var cands []string
	switch d.typ {
	case TypeBoolean:
		cands = []string{"true", "false"}
	case TypeDouble:
		cands = []string{"0.5", "0.25", "1.5", "2"}
	case TypeInt, TypeShort, TypeLong:
		if n, err := strconv.ParseInt(dflt, 10, 64); err == nil {
			cands = append(cands, strconv.FormatInt(n+1, 10), strconv.FormatInt(n-1, 10), strconv.FormatInt(n/2, 10))
		}
		cands = append(cands, "1", "2", "3", "100", "1000", "65536", "1048576", "0", "-1")
	default:
		cands = []string{"compact", "zstd", "LogAppendTime", "disabled", "*", "0:1", "PLAINTEXT://h:9",
			"PLAINTEXT:PLAINTEXT", "PLAINTEXT", "SCRAM-SHA-256", "required", "TLSv1.3", "User:admin", "x", "/tmp/x"}
	}
	for _, c := range cands {
		if c == dflt {
			continue
		}
		if _, reason := d.parse(c); reason == "" {
			return c
		}
	}
	return ""
}

// changedFields lists the leaf fields (by name, nested structs walked) that differ
// between a and b.
func changedFields(a, b reflect.Value, out []string) []string {
	for i := range a.NumField() {
		fa, fb := a.Field(i), b.Field(i)
		name := a.Type().Field(i).Name
		if fa.Kind() == reflect.Struct {
			out = changedFields(fa, fb, out)
			continue
		}
		if !reflect.DeepEqual(fa.Interface(), fb.Interface()) {
			out = append(out, name)
		}
	}
	return out
}

func TestConfigAudit(t *testing.T) {
	src := repoSources(t)
	readsField := func(f string) bool {
		return regexp.MustCompile(`\.` + f + `\b`).MatchString(src)
	}
	baseTopic := reflect.ValueOf(ResolveTopic(nil, nil))
	baseBroker := reflect.ValueOf(ResolveBroker(nil))
	audit := func(kind string, d *def, resolve func(v string) reflect.Value, base reflect.Value) {
		t.Helper()
		noEffect := strings.Contains(d.doc, noEffectMark)
		v := otherValue(d)
		var fields []string
		if v != "" {
			fields = changedFields(base, resolve(v), nil)
		}
		var readBy []string
		for _, f := range fields {
			if readsField(f) {
				readBy = append(readBy, f)
			}
		}
		byName := strings.Contains(src, strconv.Quote(d.name))
		effect := len(readBy) > 0 || byName
		refused := v == "" && d.check != nil && strings.Contains(d.doc, "INVALID_CONFIG")
		switch {
		case noEffect && len(readBy) > 0:
			t.Errorf("%s config %s says %q, but %v of the resolved config is read", kind, d.name, noEffectMark, readBy)
		case noEffect && byName:
			t.Errorf("%s config %s says %q, but code reads it by name", kind, d.name, noEffectMark)
		case !noEffect && !effect && !refused:
			t.Errorf("%s config %s (test value %q, changes %v) is read by nothing: wire it, refuse it, or say %q and why in its description",
				kind, d.name, v, fields, noEffectMark)
		}
	}
	for _, td := range cat.topics {
		audit("topic", &td.def, func(v string) reflect.Value {
			return reflect.ValueOf(ResolveTopic(map[string]string{td.name: v}, nil))
		}, baseTopic)
		// A topic config's broker defaults say the same of themselves.
		for _, syn := range td.synonyms {
			bd := cat.brokerBy[syn.name]
			if bd == nil {
				continue
			}
			if strings.Contains(td.doc, noEffectMark) != strings.Contains(bd.doc, noEffectMark) && syn.name != td.name {
				t.Errorf("topic config %s and its broker default %s disagree on %q", td.name, syn.name, noEffectMark)
			}
		}
	}
	for _, bd := range cat.brokers {
		audit("broker", &bd.def, func(v string) reflect.Value {
			return reflect.ValueOf(ResolveBroker(map[string]string{bd.name: v}))
		}, baseBroker)
	}
}

// TestConfigAuditRefusals: a config refused at any value but its default says so, and
// the refusal names the reason.
func TestConfigAuditRefusals(t *testing.T) {
	for _, td := range cat.topics {
		if !strings.Contains(td.doc, "INVALID_CONFIG") {
			continue
		}
		v := "true"
		if td.dflt != nil && *td.dflt == "true" {
			v = "false"
		}
		if _, reason := td.parse(v); reason == "" {
			t.Errorf("topic config %s: %q accepted though its description says INVALID_CONFIG", td.name, v)
		}
	}
}
