package auth

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/kernel"
)

func TestBindingEncodeDecode(t *testing.T) {
	b := acl(kernel.ResTopic, patternPrefixed, "orders-", "User:alice", "10.0.0.1", kernel.OpWrite, permDeny)
	v := b.encode()
	got, err := decodeACL(v)
	if err != nil {
		t.Fatal(err)
	}
	if got != b {
		t.Fatalf("decoded %+v, want %+v", got, b)
	}
	if aclKey(v) != aclKey(b.encode()) || len(aclKey(v)) != 64 {
		t.Errorf("key %q is not stable or not 64 hex digits", aclKey(v))
	}
	other := b
	other.Host = "10.0.0.2"
	if aclKey(other.encode()) == aclKey(v) {
		t.Error("different bindings share a key")
	}
	bad := []struct {
		name string
		v    []byte
	}{
		{"empty", nil},
		{"short header", v[:4]},
		{"unknown version", append([]byte{2}, v[1:]...)},
		{"truncated", v[:len(v)-1]},
		{"trailing byte", append(bytes.Clone(v), 0)},
		{"bad resource type", append([]byte{1, 0}, v[2:]...)},
		{"bad pattern", append([]byte{1, 2, byte(patternMatch)}, v[3:]...)},
		{"bad operation", append([]byte{1, 2, 4, byte(kernel.OpAny)}, v[4:]...)},
		{"bad permission", append([]byte{1, 2, 4, 4, byte(permAny)}, v[5:]...)},
		{"huge length", []byte{1, 2, 3, 3, 3, 0xff, 0xff, 0xff, 0xff, 0x0f}},
		{"non-minimal length", append([]byte{1, 2, 3, 3, 3, 0x81, 0x00, 'a'}, (&aclBinding{Principal: "User:a", Host: "*"}).encode()[6:]...)},
		{"empty name", (&aclBinding{ResType: kernel.ResTopic, Pattern: patternLiteral, Principal: "User:a", Host: "*", Op: kernel.OpRead, Perm: permAllow}).encode()},
	}
	for _, tt := range bad {
		if _, err := decodeACL(tt.v); !errors.Is(err, errBadACL) {
			t.Errorf("%s: decodeACL = %v, want errBadACL", tt.name, err)
		}
	}
}

func TestBindingValidate(t *testing.T) {
	ok := acl(kernel.ResTopic, patternLiteral, "t", "User:alice", "*", kernel.OpRead, permAllow)
	tests := []struct {
		name string
		edit func(*aclBinding)
		want string // substring of the message
	}{
		{"unknown resource type", func(b *aclBinding) { b.ResType = kernel.ResUnknown }, "resourceType"},
		{"any resource type", func(b *aclBinding) { b.ResType = kernel.ResAny }, "resourceType"},
		{"match pattern", func(b *aclBinding) { b.Pattern = patternMatch }, "patternType"},
		{"any operation", func(b *aclBinding) { b.Op = kernel.OpAny }, "operation"},
		{"operation out of range", func(b *aclBinding) { b.Op = 99 }, "operation"},
		{"any permission", func(b *aclBinding) { b.Perm = permAny }, "permissionType"},
		{"empty name", func(b *aclBinding) { b.Name = "" }, "empty"},
		{"cluster name", func(b *aclBinding) { b.ResType = kernel.ResCluster; b.Name = "other" }, "kafka-cluster"},
		{"principal without colon", func(b *aclBinding) { b.Principal = "alice" }, "principal"},
		{"principal without name", func(b *aclBinding) { b.Principal = "User:" }, "principal"},
		{"empty host", func(b *aclBinding) { b.Host = "" }, "Host"},
		{"long name", func(b *aclBinding) { b.Name = strings.Repeat("x", maxACLField+1) }, "at most"},
	}
	if msg := ok.validate(); msg != "" {
		t.Fatalf("valid binding refused: %s", msg)
	}
	for _, tt := range tests {
		b := ok
		tt.edit(&b)
		if msg := b.validate(); !strings.Contains(msg, tt.want) {
			t.Errorf("%s: validate = %q, want it to mention %q", tt.name, msg, tt.want)
		}
	}
}

func TestFilterMatches(t *testing.T) {
	str := func(s string) *string { return &s }
	lit := acl(kernel.ResTopic, patternLiteral, "orders", "User:alice", "*", kernel.OpRead, permAllow)
	wild := acl(kernel.ResTopic, patternLiteral, "*", "User:alice", "*", kernel.OpRead, permAllow)
	pre := acl(kernel.ResTopic, patternPrefixed, "ord", "User:bob", "10.0.0.1", kernel.OpWrite, permDeny)
	group := acl(kernel.ResGroup, patternLiteral, "orders", "User:alice", "*", kernel.OpRead, permAllow)
	all := []aclBinding{lit, wild, pre, group}
	any := aclFilter{ResType: kernel.ResAny, Pattern: patternAny, Op: kernel.OpAny, Perm: permAny}
	tests := []struct {
		name string
		edit func(*aclFilter)
		want []bool // per binding in all
	}{
		{"everything", func(*aclFilter) {}, []bool{true, true, true, true}},
		{"topics", func(f *aclFilter) { f.ResType = kernel.ResTopic }, []bool{true, true, true, false}},
		{"literal", func(f *aclFilter) { f.Pattern = patternLiteral }, []bool{true, true, false, true}},
		{"prefixed", func(f *aclFilter) { f.Pattern = patternPrefixed }, []bool{false, false, true, false}},
		{"any pattern, name is exact", func(f *aclFilter) { f.Name = str("orders") }, []bool{true, false, false, true}},
		{"literal *, only the wildcard binding", func(f *aclFilter) { f.Pattern = patternLiteral; f.Name = str("*") }, []bool{false, true, false, false}},
		{"match: literal, wildcard and prefixes", func(f *aclFilter) { f.ResType = kernel.ResTopic; f.Pattern = patternMatch; f.Name = str("orders") }, []bool{true, true, true, false}},
		{"match: another name", func(f *aclFilter) { f.ResType = kernel.ResTopic; f.Pattern = patternMatch; f.Name = str("pay") }, []bool{false, true, false, false}},
		{"match with no name: everything", func(f *aclFilter) { f.Pattern = patternMatch }, []bool{true, true, true, true}},
		{"principal", func(f *aclFilter) { f.Principal = str("User:bob") }, []bool{false, false, true, false}},
		{"host", func(f *aclFilter) { f.Host = str("*") }, []bool{true, true, false, true}},
		{"operation", func(f *aclFilter) { f.Op = kernel.OpWrite }, []bool{false, false, true, false}},
		{"permission", func(f *aclFilter) { f.Perm = permAllow }, []bool{true, true, false, true}},
	}
	for _, tt := range tests {
		f := any
		tt.edit(&f)
		if msg := f.validate(); msg != "" {
			t.Fatalf("%s: filter refused: %s", tt.name, msg)
		}
		for i := range all {
			if got := f.matches(&all[i]); got != tt.want[i] {
				t.Errorf("%s: matches(%+v) = %v, want %v", tt.name, all[i], got, tt.want[i])
			}
		}
	}
	for _, bad := range []aclFilter{
		{ResType: kernel.ResUnknown, Pattern: patternAny, Op: kernel.OpAny, Perm: permAny},
		{ResType: kernel.ResAny, Pattern: patternUnknown, Op: kernel.OpAny, Perm: permAny},
		{ResType: kernel.ResAny, Pattern: patternAny, Op: kernel.OpUnknown, Perm: permAny},
		{ResType: kernel.ResAny, Pattern: patternAny, Op: kernel.OpAny, Perm: permUnknown},
		{ResType: 42, Pattern: patternAny, Op: kernel.OpAny, Perm: permAny},
	} {
		if bad.validate() == "" {
			t.Errorf("filter %+v accepted", bad)
		}
	}
}

// FuzzDecodeACL: decodeACL never panics, and what it accepts re-encodes to the same
// bytes and is a valid binding.
func FuzzDecodeACL(f *testing.F) {
	b1 := acl(kernel.ResTopic, patternLiteral, "orders", "User:alice", "*", kernel.OpRead, permAllow)
	b2 := acl(kernel.ResGroup, patternPrefixed, "app-", "User:*", "10.0.0.1", kernel.OpAll, permDeny)
	one, two := b1.encode(), b2.encode()
	f.Add([]byte{})
	f.Add(one[:3])
	f.Add([]byte{1, 2, 3, 3, 3, 0xff, 0xff, 0x01})
	f.Add(one)
	f.Add(append(bytes.Clone(one), two...))
	f.Fuzz(func(t *testing.T, v []byte) {
		b, err := decodeACL(v)
		if err != nil {
			if !errors.Is(err, errBadACL) {
				t.Fatalf("error %v is not errBadACL", err)
			}
			return
		}
		if msg := b.validate(); msg != "" {
			t.Fatalf("decoded an invalid binding %+v: %s", b, msg)
		}
		if !bytes.Equal(b.encode(), v) {
			t.Fatalf("%x decodes to %+v, which encodes to %x", v, b, b.encode())
		}
	})
}
