package auth

import (
	"context"

	"github.com/sluicehq/sluice/kernel"
)

// None is the "auth.none" module: no authentication, every operation allowed.
type None struct{}

// NoneInfo describes the auth.none module.
func NoneInfo() kernel.ModuleInfo {
	return kernel.ModuleInfo{ID: "auth.none", New: func() kernel.Module { return new(None) }}
}

// Provision claims the ACL APIs, answered with SECURITY_DISABLED (acl_disabled.go).
func (*None) Provision(ctx kernel.Context) error { return claimACLAPIsDisabled(ctx) }

// Authorize allows everything.
func (*None) Authorize(context.Context, kernel.Principal, string, kernel.Operation, kernel.Resource) bool {
	return true
}

var (
	_ kernel.Authorizer  = (*None)(nil)
	_ kernel.Provisioner = (*None)(nil)
)
