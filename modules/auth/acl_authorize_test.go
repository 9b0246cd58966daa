package auth

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/kernel"
)

// acl builds a binding: typ, pattern, name, principal, host, op, perm.
func acl(typ kernel.ResourceType, pattern int8, name, principal, host string, op kernel.Operation, perm int8) aclBinding {
	return aclBinding{ResType: typ, Pattern: pattern, Name: name, Principal: principal, Host: host, Op: op, Perm: perm}
}

func allowTopic(name, principal string, op kernel.Operation) aclBinding {
	return acl(kernel.ResTopic, patternLiteral, name, principal, "*", op, permAllow)
}

func denyTopic(name, principal string, op kernel.Operation) aclBinding {
	return acl(kernel.ResTopic, patternLiteral, name, principal, "*", op, permDeny)
}

// testACLState is an aclState with the given bindings indexed, no module behind it.
func testACLState(t testing.TB, superUsers string, allowNoACL bool, bs ...aclBinding) *aclState {
	t.Helper()
	su, err := parseSuperUsers(superUsers)
	if err != nil {
		t.Fatal(err)
	}
	a := &aclState{superUsers: su, allowNoACL: allowNoACL}
	a.idx.Store(buildACLIndex(testNamespace(t, bs...), 1, nil, func(key string, err error) { t.Fatalf("%s: %v", key, err) }))
	return a
}

func testNamespace(t testing.TB, bs ...aclBinding) map[string][]byte {
	t.Helper()
	ns := map[string][]byte{}
	for _, b := range bs {
		if msg := b.validate(); msg != "" {
			t.Fatalf("binding %+v: %s", b, msg)
		}
		v := b.encode()
		ns[aclKey(v)] = v
	}
	return ns
}

var (
	alice = kernel.Principal{Type: "User", Name: "alice"}
	bob   = kernel.Principal{Type: "User", Name: "bob"}
	admin = kernel.Principal{Type: "User", Name: "admin"}
)

func topic(name string) kernel.Resource { return kernel.Resource{Type: kernel.ResTopic, Name: name} }

func TestAuthorizeDecisions(t *testing.T) {
	cluster := kernel.Resource{Type: kernel.ResCluster, Name: kernel.ClusterResourceName}
	tests := []struct {
		name       string
		acls       []aclBinding
		super      string
		allowNoACL bool
		p          kernel.Principal
		host       string
		op         kernel.Operation
		r          kernel.Resource
		want       bool
	}{
		{name: "no ACLs, allow.everyone false", p: alice, op: kernel.OpRead, r: topic("t"), want: false},
		{name: "no ACLs, allow.everyone true", allowNoACL: true, p: alice, op: kernel.OpRead, r: topic("t"), want: true},
		{name: "ACLs only on another resource, allow.everyone true", allowNoACL: true,
			acls: []aclBinding{denyTopic("other", "User:*", kernel.OpAll)}, p: alice, op: kernel.OpRead, r: topic("t"), want: true},
		{name: "ACL for another principal on the resource, allow.everyone true", allowNoACL: true,
			acls: []aclBinding{allowTopic("t", "User:bob", kernel.OpRead)}, p: alice, op: kernel.OpRead, r: topic("t"), want: false},
		{name: "ACL for another operation on the resource, allow.everyone true", allowNoACL: true,
			acls: []aclBinding{allowTopic("t", "User:alice", kernel.OpWrite)}, p: alice, op: kernel.OpCreate, r: topic("t"), want: false},
		{name: "literal allow", acls: []aclBinding{allowTopic("t", "User:alice", kernel.OpRead)},
			p: alice, op: kernel.OpRead, r: topic("t"), want: true},
		{name: "literal allow, other operation", acls: []aclBinding{allowTopic("t", "User:alice", kernel.OpRead)},
			p: alice, op: kernel.OpWrite, r: topic("t"), want: false},
		{name: "literal allow, other principal", acls: []aclBinding{allowTopic("t", "User:alice", kernel.OpRead)},
			p: bob, op: kernel.OpRead, r: topic("t"), want: false},
		{name: "literal allow, other name", acls: []aclBinding{allowTopic("t", "User:alice", kernel.OpRead)},
			p: alice, op: kernel.OpRead, r: topic("t2"), want: false},
		{name: "literal allow, same name other type", acls: []aclBinding{allowTopic("t", "User:alice", kernel.OpRead)},
			p: alice, op: kernel.OpRead, r: kernel.Resource{Type: kernel.ResGroup, Name: "t"}, want: false},
		{name: "deny wins over allow", acls: []aclBinding{allowTopic("t", "User:alice", kernel.OpRead), denyTopic("t", "User:alice", kernel.OpRead)},
			p: alice, op: kernel.OpRead, r: topic("t"), want: false},
		{name: "deny for alice, allow for everyone: bob allowed",
			acls: []aclBinding{allowTopic("t", "User:*", kernel.OpAll), denyTopic("t", "User:alice", kernel.OpRead)},
			p:    bob, op: kernel.OpRead, r: topic("t"), want: true},
		{name: "deny wins over allow ALL on the wildcard resource",
			acls: []aclBinding{allowTopic("*", "User:*", kernel.OpAll), denyTopic("t", "User:alice", kernel.OpRead)},
			p:    alice, op: kernel.OpRead, r: topic("t"), want: false},
		{name: "prefixed deny wins over literal allow",
			acls: []aclBinding{allowTopic("pay-eu", "User:alice", kernel.OpRead),
				acl(kernel.ResTopic, patternPrefixed, "pay-", "User:alice", "*", kernel.OpRead, permDeny)},
			p: alice, op: kernel.OpRead, r: topic("pay-eu"), want: false},
		{name: "deny of another operation does not deny", acls: []aclBinding{allowTopic("t", "User:alice", kernel.OpAll), denyTopic("t", "User:alice", kernel.OpWrite)},
			p: alice, op: kernel.OpRead, r: topic("t"), want: true},
		{name: "deny ALL denies everything", acls: []aclBinding{allowTopic("t", "User:alice", kernel.OpRead), denyTopic("t", "User:alice", kernel.OpAll)},
			p: alice, op: kernel.OpDescribe, r: topic("t"), want: false},
		{name: "ALL allows ClusterAction", acls: []aclBinding{acl(kernel.ResCluster, patternLiteral, kernel.ClusterResourceName, "User:alice", "*", kernel.OpAll, permAllow)},
			p: alice, op: kernel.OpClusterAction, r: cluster, want: true},
		// Implied operations.
		{name: "Read implies Describe", acls: []aclBinding{allowTopic("t", "User:alice", kernel.OpRead)}, p: alice, op: kernel.OpDescribe, r: topic("t"), want: true},
		{name: "Write implies Describe", acls: []aclBinding{allowTopic("t", "User:alice", kernel.OpWrite)}, p: alice, op: kernel.OpDescribe, r: topic("t"), want: true},
		{name: "Delete implies Describe", acls: []aclBinding{allowTopic("t", "User:alice", kernel.OpDelete)}, p: alice, op: kernel.OpDescribe, r: topic("t"), want: true},
		{name: "Alter implies Describe", acls: []aclBinding{allowTopic("t", "User:alice", kernel.OpAlter)}, p: alice, op: kernel.OpDescribe, r: topic("t"), want: true},
		{name: "Create does not imply Describe", acls: []aclBinding{allowTopic("t", "User:alice", kernel.OpCreate)}, p: alice, op: kernel.OpDescribe, r: topic("t"), want: false},
		{name: "Describe does not imply Read", acls: []aclBinding{allowTopic("t", "User:alice", kernel.OpDescribe)}, p: alice, op: kernel.OpRead, r: topic("t"), want: false},
		{name: "AlterConfigs implies DescribeConfigs", acls: []aclBinding{allowTopic("t", "User:alice", kernel.OpAlterConfigs)}, p: alice, op: kernel.OpDescribeConfigs, r: topic("t"), want: true},
		{name: "DescribeConfigs does not imply AlterConfigs", acls: []aclBinding{allowTopic("t", "User:alice", kernel.OpDescribeConfigs)}, p: alice, op: kernel.OpAlterConfigs, r: topic("t"), want: false},
		{name: "Alter does not imply DescribeConfigs", acls: []aclBinding{allowTopic("t", "User:alice", kernel.OpAlter)}, p: alice, op: kernel.OpDescribeConfigs, r: topic("t"), want: false},
		{name: "a DENY of Read does not deny Describe (implication is for ALLOW only)",
			acls: []aclBinding{allowTopic("t", "User:alice", kernel.OpDescribe), denyTopic("t", "User:alice", kernel.OpRead)},
			p:    alice, op: kernel.OpDescribe, r: topic("t"), want: true},
		{name: "a DENY of AlterConfigs does not deny DescribeConfigs",
			acls: []aclBinding{allowTopic("t", "User:alice", kernel.OpDescribeConfigs), denyTopic("t", "User:alice", kernel.OpAlterConfigs)},
			p:    alice, op: kernel.OpDescribeConfigs, r: topic("t"), want: true},
		// Prefixed patterns.
		{name: "prefixed matches a longer name", acls: []aclBinding{acl(kernel.ResTopic, patternPrefixed, "orders-", "User:alice", "*", kernel.OpRead, permAllow)},
			p: alice, op: kernel.OpRead, r: topic("orders-eu"), want: true},
		{name: "prefixed matches the prefix itself", acls: []aclBinding{acl(kernel.ResTopic, patternPrefixed, "orders-", "User:alice", "*", kernel.OpRead, permAllow)},
			p: alice, op: kernel.OpRead, r: topic("orders-"), want: true},
		{name: "prefixed does not match a shorter name", acls: []aclBinding{acl(kernel.ResTopic, patternPrefixed, "orders-", "User:alice", "*", kernel.OpRead, permAllow)},
			p: alice, op: kernel.OpRead, r: topic("orders"), want: false},
		{name: "prefixed does not match another name", acls: []aclBinding{acl(kernel.ResTopic, patternPrefixed, "orders-", "User:alice", "*", kernel.OpRead, permAllow)},
			p: alice, op: kernel.OpRead, r: topic("xorders-eu"), want: false},
		{name: "several prefix lengths", acls: []aclBinding{
			acl(kernel.ResTopic, patternPrefixed, "a", "User:bob", "*", kernel.OpRead, permAllow),
			acl(kernel.ResTopic, patternPrefixed, "abcd", "User:bob", "*", kernel.OpRead, permAllow),
			acl(kernel.ResTopic, patternPrefixed, "ab", "User:alice", "*", kernel.OpRead, permAllow)},
			p: alice, op: kernel.OpRead, r: topic("abcdef"), want: true},
		{name: "prefixed * is a prefix, not a wildcard", acls: []aclBinding{acl(kernel.ResTopic, patternPrefixed, "*", "User:alice", "*", kernel.OpRead, permAllow)},
			p: alice, op: kernel.OpRead, r: topic("t"), want: false},
		{name: "prefixed on groups", acls: []aclBinding{acl(kernel.ResGroup, patternPrefixed, "app-", "User:alice", "*", kernel.OpRead, permAllow)},
			p: alice, op: kernel.OpRead, r: kernel.Resource{Type: kernel.ResGroup, Name: "app-1"}, want: true},
		// Wildcard resource.
		{name: "wildcard resource", acls: []aclBinding{allowTopic("*", "User:alice", kernel.OpRead)}, p: alice, op: kernel.OpRead, r: topic("anything"), want: true},
		{name: "wildcard resource is per type", acls: []aclBinding{allowTopic("*", "User:alice", kernel.OpRead)},
			p: alice, op: kernel.OpRead, r: kernel.Resource{Type: kernel.ResGroup, Name: "g"}, want: false},
		{name: "wildcard resource counts as an ACL on the resource", allowNoACL: true, acls: []aclBinding{allowTopic("*", "User:bob", kernel.OpRead)},
			p: alice, op: kernel.OpRead, r: topic("t"), want: false},
		// Wildcard principal.
		{name: "wildcard principal", acls: []aclBinding{allowTopic("t", "User:*", kernel.OpRead)}, p: bob, op: kernel.OpRead, r: topic("t"), want: true},
		{name: "User:* matches principals of every type, as Kafka's", acls: []aclBinding{allowTopic("t", "User:*", kernel.OpRead)},
			p: kernel.Principal{Type: "Service", Name: "bob"}, op: kernel.OpRead, r: topic("t"), want: true},
		{name: "Service:* is no wildcard", acls: []aclBinding{allowTopic("t", "Service:*", kernel.OpRead)},
			p: kernel.Principal{Type: "Service", Name: "bob"}, op: kernel.OpRead, r: topic("t"), want: false},
		{name: "principal type matters", acls: []aclBinding{allowTopic("t", "Service:alice", kernel.OpRead)}, p: alice, op: kernel.OpRead, r: topic("t"), want: false},
		{name: "wildcard principal deny", acls: []aclBinding{allowTopic("t", "User:alice", kernel.OpRead), denyTopic("t", "User:*", kernel.OpRead)},
			p: alice, op: kernel.OpRead, r: topic("t"), want: false},
		// Hosts.
		{name: "host equal", acls: []aclBinding{acl(kernel.ResTopic, patternLiteral, "t", "User:alice", "10.0.0.1", kernel.OpRead, permAllow)},
			p: alice, host: "10.0.0.1", op: kernel.OpRead, r: topic("t"), want: true},
		{name: "host different", acls: []aclBinding{acl(kernel.ResTopic, patternLiteral, "t", "User:alice", "10.0.0.1", kernel.OpRead, permAllow)},
			p: alice, host: "10.0.0.2", op: kernel.OpRead, r: topic("t"), want: false},
		{name: "host unknown matches only *", acls: []aclBinding{acl(kernel.ResTopic, patternLiteral, "t", "User:alice", "10.0.0.1", kernel.OpRead, permAllow)},
			p: alice, host: "", op: kernel.OpRead, r: topic("t"), want: false},
		{name: "host * matches any", acls: []aclBinding{allowTopic("t", "User:alice", kernel.OpRead)}, p: alice, host: "192.168.1.9", op: kernel.OpRead, r: topic("t"), want: true},
		{name: "IPv6 host in long form matches", acls: []aclBinding{acl(kernel.ResTopic, patternLiteral, "t", "User:alice", "0:0:0:0:0:0:0:1", kernel.OpRead, permAllow)},
			p: alice, host: "::1", op: kernel.OpRead, r: topic("t"), want: true},
		{name: "deny from one host only", acls: []aclBinding{allowTopic("t", "User:alice", kernel.OpRead),
			acl(kernel.ResTopic, patternLiteral, "t", "User:alice", "10.0.0.9", kernel.OpRead, permDeny)},
			p: alice, host: "10.0.0.1", op: kernel.OpRead, r: topic("t"), want: true},
		{name: "deny from that host", acls: []aclBinding{allowTopic("t", "User:alice", kernel.OpRead),
			acl(kernel.ResTopic, patternLiteral, "t", "User:alice", "10.0.0.9", kernel.OpRead, permDeny)},
			p: alice, host: "10.0.0.9", op: kernel.OpRead, r: topic("t"), want: false},
		// Super users.
		{name: "super user with no ACLs", super: "User:admin", p: admin, op: kernel.OpAlter, r: cluster, want: true},
		{name: "super user despite a DENY", super: "User:bob; User:admin", acls: []aclBinding{denyTopic("t", "User:admin", kernel.OpAll)},
			p: admin, op: kernel.OpWrite, r: topic("t"), want: true},
		{name: "not a super user", super: "User:admin", p: bob, op: kernel.OpAlter, r: cluster, want: false},
		{name: "super users compare type and name", super: "Service:admin", p: admin, op: kernel.OpAlter, r: cluster, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := testACLState(t, tt.super, tt.allowNoACL, tt.acls...)
			if got := a.authorize(tt.p, tt.host, tt.op, tt.r); got != tt.want {
				t.Errorf("authorize(%v, %q, %d, %+v) = %v, want %v", tt.p, tt.host, tt.op, tt.r, got, tt.want)
			}
		})
	}
}

func TestParseSuperUsers(t *testing.T) {
	for _, bad := range []string{"admin", "User:", ":admin", "User:admin;bob"} {
		if _, err := parseSuperUsers(bad); err == nil || !strings.Contains(err.Error(), "super.users") {
			t.Errorf("parseSuperUsers(%q) = %v, want a super.users error", bad, err)
		}
	}
	su, err := parseSuperUsers(" User:admin ;;User:bob;")
	if err != nil {
		t.Fatal(err)
	}
	if len(su) != 2 {
		t.Fatalf("got %v", su)
	}
	if _, ok := su[kernel.Principal{Type: "User", Name: "bob"}]; !ok {
		t.Errorf("User:bob missing from %v", su)
	}
}

// TestIndexReuse: a rebuild after one change keeps the other decoded entries and
// reflects additions and deletions.
func TestIndexReuse(t *testing.T) {
	b1, b2 := allowTopic("a", "User:alice", kernel.OpRead), allowTopic("b", "User:alice", kernel.OpRead)
	ns1 := testNamespace(t, b1)
	idx1 := buildACLIndex(ns1, 1, nil, nil)
	ns2 := testNamespace(t, b1, b2)
	idx2 := buildACLIndex(ns2, 2, idx1, nil)
	k1 := aclKey(b1.encode())
	if idx2.get(k1) == nil || idx2.get(k1) != idx1.get(k1) {
		t.Error("unchanged entry was decoded again")
	}
	if !idx2.decide(alice, "", kernel.OpRead, topic("b"), false) || idx1.decide(alice, "", kernel.OpRead, topic("b"), false) {
		t.Error("the new binding is not in the new index only")
	}
	idx3 := buildACLIndex(testNamespace(t, b2), 3, idx2, nil)
	if idx3.decide(alice, "", kernel.OpRead, topic("a"), false) {
		t.Error("deleted binding still allows")
	}
	bad := 0
	buildACLIndex(map[string][]byte{"k": {9, 9}}, 4, nil, func(string, error) { bad++ })
	if bad != 1 {
		t.Errorf("undecodable value reported %d times", bad)
	}
}

// TestIndexLayersModel applies random adds and deletes through incremental builds and
// checks each index against one built from scratch: same bindings, same decisions.
func TestIndexLayersModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	names := []string{"a", "ab", "abc", "b", "orders", "orders-eu", "*"}
	principals := []string{"User:alice", "User:bob", "User:*"}
	random := func() aclBinding {
		b := acl(kernel.ResourceType(kernel.ResTopic+kernel.ResourceType(rng.IntN(2))), patternLiteral+int8(rng.IntN(2)),
			names[rng.IntN(len(names))], principals[rng.IntN(len(principals))], "*",
			kernel.Operation(kernel.OpAll+kernel.Operation(rng.IntN(8))), permDeny+int8(rng.IntN(2)))
		return b
	}
	ns := map[string][]byte{}
	var idx *aclIndex
	fulls := 0
	for step := range 400 {
		next := maps.Clone(ns)
		for range 1 + rng.IntN(20) {
			if len(next) > 0 && rng.IntN(3) == 0 {
				for k := range next {
					delete(next, k)
					break
				}
				continue
			}
			b := random()
			v := b.encode()
			next[aclKey(v)] = v
		}
		ns = next
		prevBase := (*aclLayer)(nil)
		if idx != nil {
			prevBase = idx.base
		}
		idx = buildACLIndex(ns, uint64(step+1), idx, func(k string, err error) { t.Fatalf("%s: %v", k, err) })
		if idx.base != prevBase {
			fulls++
		}
		fresh := buildACLIndex(ns, uint64(step+1), nil, nil)
		n := 0
		idx.each(func(e *aclEntry) {
			n++
			if _, ok := ns[e.key]; !ok {
				t.Fatalf("step %d: index has deleted %s", step, e.key)
			}
		})
		if n != len(ns) {
			t.Fatalf("step %d: index has %d bindings, namespace %d", step, n, len(ns))
		}
		for range 50 {
			p := kernel.Principal{Type: "User", Name: []string{"alice", "bob", "carol"}[rng.IntN(3)]}
			r := kernel.Resource{Type: kernel.ResTopic + kernel.ResourceType(rng.IntN(2)), Name: names[rng.IntN(len(names))] + []string{"", "x"}[rng.IntN(2)]}
			op := kernel.Operation(kernel.OpRead + kernel.Operation(rng.IntN(9)))
			allowNoACL := rng.IntN(2) == 0
			if got, want := idx.decide(p, "", op, r, allowNoACL), fresh.decide(p, "", op, r, allowNoACL); got != want {
				t.Fatalf("step %d: decide(%v, %d, %+v) = %v incrementally, %v from scratch", step, p, op, r, got, want)
			}
		}
	}
	if fulls < 2 || fulls > 100 {
		t.Errorf("%d full builds in 400 steps: the layers are not used as meant", fulls)
	}
}

// TestAuthorizeConcurrentRebuild hammers authorize while the index is swapped.
func TestAuthorizeConcurrentRebuild(t *testing.T) {
	fixed := allowTopic("fixed", "User:alice", kernel.OpRead)
	a := testACLState(t, "", false, fixed)
	prev := a.idx.Load()
	done := make(chan struct{})
	errs := make(chan error, 4)
	for g := range 4 {
		go func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				// "fixed" is allowed in every index built below.
				if !a.authorize(alice, "", kernel.OpRead, topic("fixed")) {
					errs <- fmt.Errorf("goroutine %d: fixed denied at %d", g, i)
					return
				}
			}
		}()
	}
	for i := range 200 {
		ns := testNamespace(t, fixed, allowTopic(fmt.Sprintf("t%d", i), "User:alice", kernel.OpRead))
		prev = buildACLIndex(ns, uint64(i+2), prev, nil)
		a.idx.Store(prev)
	}
	close(done)
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
