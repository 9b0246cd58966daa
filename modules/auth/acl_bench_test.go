package auth

import (
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/kernel"
)

// BenchmarkAuthorize10kACLs: authorize against 10,000 bindings (5,000 literal topic
// names, 5,000 prefixes of distinct lengths 12 and 13), for a literal hit, a prefixed
// hit, a miss on a resource no binding applies to, and a deny by another principal's
// binding.
func BenchmarkAuthorize10kACLs(b *testing.B) {
	var bs []aclBinding
	for i := range 5000 {
		bs = append(bs, allowTopic(fmt.Sprintf("topic-%05d", i), "User:alice", kernel.OpRead))
		pre := fmt.Sprintf("prefix-%05d-", i)
		if i%2 == 0 {
			pre = fmt.Sprintf("prefix-%04d-", i)
		}
		bs = append(bs, acl(kernel.ResTopic, patternPrefixed, pre, "User:alice", "*", kernel.OpWrite, permAllow))
	}
	a := testACLState(b, "User:admin", false, bs...)
	if n := len(a.idx.Load().base.entries); n != 10000 {
		b.Fatalf("%d bindings indexed", n)
	}
	cases := []struct {
		name string
		p    kernel.Principal
		op   kernel.Operation
		r    kernel.Resource
		want bool
	}{
		{"hit-literal", alice, kernel.OpRead, topic("topic-02500"), true},
		{"hit-prefixed", alice, kernel.OpWrite, topic("prefix-01235-orders-eu"), true},
		{"miss-no-acl", alice, kernel.OpRead, topic("some-other-topic-name"), false},
		{"miss-other-principal", bob, kernel.OpRead, topic("topic-02500"), false},
		{"super-user", admin, kernel.OpAlter, topic("x"), true},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			if got := a.authorize(c.p, "10.0.0.1", c.op, c.r); got != c.want {
				b.Fatalf("authorize = %v, want %v", got, c.want)
			}
			b.ReportAllocs()
			for b.Loop() {
				a.authorize(c.p, "10.0.0.1", c.op, c.r)
			}
		})
	}
}
