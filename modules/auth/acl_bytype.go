package auth

import (
	"context"
	"strings"

	"github.com/sluicehq/sluice/kernel"
)

// AuthorizeByResourceType is Kafka's Authorizer.authorizeByResourceType: whether p may
// perform op on at least one resource of the type. It is true for a super user; false
// when a DENY of op (or ALL) for p covers every name (LITERAL "*"); otherwise true when
// some ALLOW of op (or ALL) for p is not wholly covered by a DENY: a LITERAL "*" allow,
// a PREFIXED allow no DENY prefix of which is a prefix of it, or a LITERAL allow with
// no DENY on its name or on a prefix of it. With no binding of the type at all,
// allow.everyone.if.no.acl.found decides. Operations are not implied here (Kafka's
// rule): an ALLOW of Write answers for Write only. Used by InitProducerId (an
// idempotent producer needs IdempotentWrite on the cluster or Write on any topic); it
// walks the bindings of the type, which is fine for a request that rare.
func (m *Module) AuthorizeByResourceType(_ context.Context, p kernel.Principal, host string, op kernel.Operation, typ kernel.ResourceType) bool {
	return m.acl.authorizeByType(p, host, op, typ)
}

func (a *aclState) authorizeByType(p kernel.Principal, host string, op kernel.Operation, typ kernel.ResourceType) bool {
	if _, ok := a.superUsers[p]; ok {
		return true
	}
	var (
		found                  bool
		denyAll                bool
		denyLiteral            = map[string]bool{}
		denyPrefixes, allowsLi []string
		allowsPre              []string
		allowAny               bool
	)
	a.index().each(func(e *aclEntry) {
		if e.b.ResType != typ {
			return
		}
		found = true
		if !e.anyUser && (e.pName != p.Name || e.pType != p.Type) {
			return
		}
		if e.host != wildcardHost && e.host != host {
			return
		}
		if e.b.Op != op && e.b.Op != kernel.OpAll {
			return
		}
		literal := e.b.Pattern == patternLiteral
		switch {
		case e.b.Perm == permDeny && literal && e.b.Name == wildcardResource:
			denyAll = true
		case e.b.Perm == permDeny && literal:
			denyLiteral[e.b.Name] = true
		case e.b.Perm == permDeny:
			denyPrefixes = append(denyPrefixes, e.b.Name)
		case literal && e.b.Name == wildcardResource:
			allowAny = true
		case literal:
			allowsLi = append(allowsLi, e.b.Name)
		default:
			allowsPre = append(allowsPre, e.b.Name)
		}
	})
	if !found {
		return a.allowNoACL
	}
	if denyAll {
		return false
	}
	if allowAny {
		return true
	}
	covered := func(name string) bool {
		for _, d := range denyPrefixes {
			if strings.HasPrefix(name, d) {
				return true
			}
		}
		return false
	}
	for _, n := range allowsPre {
		if !covered(n) {
			return true
		}
	}
	for _, n := range allowsLi {
		if !denyLiteral[n] && !covered(n) {
			return true
		}
	}
	return false
}

var _ kernel.ResourceTypeAuthorizer = (*Module)(nil)
