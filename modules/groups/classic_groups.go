// The classic group protocol: 11_join_group.go, 12_heartbeat.go, 13_leave_group.go
// and 14_sync_group.go. The state machine is modules/groups/classic; the handlers
// authorize and find the group's coordinator shard here, then wait for the group's
// answer.

package groups

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/groups/classic"
)

// classicFor authorizes op on the group and returns its classic group (created when
// create is set), or the error code to answer.
func (m *Module) classicFor(ctx context.Context, req *kernel.Request, id string, create bool) (*classic.Group, *kerr.Error) {
	_, g, e := m.classicShardFor(ctx, req, id, create)
	return g, e
}

// classicShardFor is classicFor that also returns the group's shard.
func (m *Module) classicShardFor(ctx context.Context, req *kernel.Request, id string, create bool) (*shard, *classic.Group, *kerr.Error) {
	s, e := m.groupShard(ctx, req, kernel.OpRead, id)
	if e != nil {
		return nil, nil, e
	}
	g, e := s.classicGroup(id, create)
	return s, g, e
}
