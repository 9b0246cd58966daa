// Package standard registers the modules that ship with Sluice. main calls Register on
// a fresh registry; tests can build registries with other module sets.
package standard

import (
	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/auth"
	"github.com/sluicehq/sluice/modules/console"
	"github.com/sluicehq/sluice/modules/groups"
	"github.com/sluicehq/sluice/modules/metadata"
	"github.com/sluicehq/sluice/modules/quotas"
	"github.com/sluicehq/sluice/modules/replication"
	"github.com/sluicehq/sluice/modules/storage/memory"
	"github.com/sluicehq/sluice/modules/storage/segmentlog"
	"github.com/sluicehq/sluice/modules/telemetry"
	"github.com/sluicehq/sluice/modules/txn"
	"github.com/sluicehq/sluice/transforms"
)

// Register adds every standard module to reg, and the guests they host (the groups
// module's assignors and offset stores).
func Register(reg *kernel.Registry) {
	reg.Register(auth.NoneInfo())
	reg.Register(auth.ACLInfo())
	reg.Register(segmentlog.Info())
	reg.Register(memory.Info())
	reg.Register(metadata.Info())
	reg.Register(replication.Info())
	reg.Register(groups.Info())
	for _, g := range groups.Guests() {
		reg.Register(g)
	}
	reg.Register(transforms.Info())
	reg.Register(txn.Info())
	reg.Register(console.Info())
	reg.Register(quotas.Info())
	reg.Register(telemetry.Info())
}
