package auth

import "github.com/sluicehq/sluice/kernel"

// aclState holds the ACL bindings and answers Authorize. (Placeholder: denies all.)
type aclState struct{}

func (a *aclState) provision(m *Module, ctx kernel.Context) error { return nil }

func (a *aclState) apply(im *kernel.Image) {}

func (a *aclState) authorize(p kernel.Principal, host string, op kernel.Operation, r kernel.Resource) bool {
	return false
}
