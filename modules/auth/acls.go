package auth

import (
	"strings"

	"github.com/sluicehq/sluice/kernel"
)

// aclState holds the ACL bindings and answers Authorize. (Placeholder: allows the
// super.users and denies everyone else.)
type aclState struct {
	supers map[string]bool // "User:alice"
}

func (a *aclState) provision(m *Module, ctx kernel.Context) error {
	a.supers = map[string]bool{}
	for _, p := range strings.Split(m.broker.StaticConfigs["super.users"], ";") {
		if p = strings.TrimSpace(p); p != "" {
			a.supers[p] = true
		}
	}
	return nil
}

func (a *aclState) apply(im *kernel.Image) {}

func (a *aclState) authorize(p kernel.Principal, host string, op kernel.Operation, r kernel.Resource) bool {
	return a.supers[p.String()]
}
