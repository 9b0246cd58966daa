package auth

import (
	"testing"

	"github.com/sluicehq/sluice/kernel"
)

// Kafka's authorizeByResourceType rules, as InitProducerId uses them (Write on any
// topic).
func TestAuthorizeByResourceType(t *testing.T) {
	prefixed := func(name, principal string, op kernel.Operation, perm int8) aclBinding {
		return acl(kernel.ResTopic, patternPrefixed, name, principal, "*", op, perm)
	}
	tests := []struct {
		name       string
		acls       []aclBinding
		super      string
		allowNoACL bool
		p          kernel.Principal
		want       bool
	}{
		{name: "no bindings, allow.everyone false", p: alice, want: false},
		{name: "no bindings, allow.everyone true", allowNoACL: true, p: alice, want: true},
		{name: "super user", super: "User:alice", acls: []aclBinding{denyTopic("*", "User:alice", kernel.OpAll)}, p: alice, want: true},
		{name: "literal allow", acls: []aclBinding{allowTopic("t", "User:alice", kernel.OpWrite)}, p: alice, want: true},
		{name: "allow for another principal", acls: []aclBinding{allowTopic("t", "User:bob", kernel.OpWrite)}, p: alice, want: false},
		{name: "allow of another operation is not implied", acls: []aclBinding{allowTopic("t", "User:alice", kernel.OpRead)}, p: alice, want: false},
		{name: "allow ALL", acls: []aclBinding{allowTopic("t", "User:alice", kernel.OpAll)}, p: alice, want: true},
		{name: "wildcard principal", acls: []aclBinding{allowTopic("t", "User:*", kernel.OpWrite)}, p: alice, want: true},
		{name: "literal allow denied by the same literal", acls: []aclBinding{
			allowTopic("t", "User:alice", kernel.OpWrite), denyTopic("t", "User:alice", kernel.OpWrite)}, p: alice, want: false},
		{name: "literal allow denied by a prefix", acls: []aclBinding{
			allowTopic("team-t", "User:alice", kernel.OpWrite), prefixed("team-", "User:alice", kernel.OpWrite, permDeny)}, p: alice, want: false},
		{name: "literal allow, deny elsewhere", acls: []aclBinding{
			allowTopic("t", "User:alice", kernel.OpWrite), denyTopic("u", "User:alice", kernel.OpWrite)}, p: alice, want: true},
		{name: "prefixed allow covered by a shorter deny prefix", acls: []aclBinding{
			prefixed("team-a", "User:alice", kernel.OpWrite, permAllow), prefixed("team-", "User:alice", kernel.OpWrite, permDeny)}, p: alice, want: false},
		{name: "prefixed allow wider than the deny prefix", acls: []aclBinding{
			prefixed("team-", "User:alice", kernel.OpWrite, permAllow), prefixed("team-a", "User:alice", kernel.OpWrite, permDeny)}, p: alice, want: true},
		{name: "deny on every topic", acls: []aclBinding{
			allowTopic("t", "User:alice", kernel.OpWrite), denyTopic("*", "User:*", kernel.OpAll)}, p: alice, want: false},
		{name: "wildcard allow", acls: []aclBinding{allowTopic("*", "User:alice", kernel.OpWrite), denyTopic("t", "User:alice", kernel.OpWrite)}, p: alice, want: true},
		{name: "bindings of another type only, allow.everyone true", allowNoACL: true,
			acls: []aclBinding{acl(kernel.ResGroup, patternLiteral, "g", "User:bob", "*", kernel.OpRead, permAllow)}, p: alice, want: true},
		{name: "topic bindings for others, allow.everyone true", allowNoACL: true,
			acls: []aclBinding{allowTopic("t", "User:bob", kernel.OpWrite)}, p: alice, want: false},
		{name: "host mismatch", acls: []aclBinding{acl(kernel.ResTopic, patternLiteral, "t", "User:alice", "10.0.0.9", kernel.OpWrite, permAllow)}, p: alice, want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := testACLState(t, tc.super, tc.allowNoACL, tc.acls...)
			if got := a.authorizeByType(tc.p, "127.0.0.1", kernel.OpWrite, kernel.ResTopic); got != tc.want {
				t.Fatalf("authorizeByType = %v, want %v", got, tc.want)
			}
		})
	}
}
