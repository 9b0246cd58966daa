// Package standard registers the modules that ship with Sluice. main calls Register on
// a fresh registry; tests can build registries with other module sets.
package standard

import (
	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/auth"
)

// Register adds every standard module to reg.
func Register(reg *kernel.Registry) {
	reg.Register(auth.NoneInfo())
}
