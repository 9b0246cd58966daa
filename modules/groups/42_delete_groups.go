// DeleteGroups: v0-v2. Pending transactional offsets are deleted with the group.
// Not implemented: nothing known.

package groups

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// deleteGroupsClaim claims the versions this file's header lists.
func deleteGroupsClaim(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.DeleteGroups, Min: 0, Max: 2, Handler: kernel.Typed(m.handleDeleteGroups)}
}

func (m *Module) handleDeleteGroups(ctx context.Context, req *kernel.Request, r *kmsg.DeleteGroupsRequest) (kernel.Response, error) {
	resp := r.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, id := range r.Groups {
		dg := kmsg.NewDeleteGroupsResponseGroup()
		dg.Group = id
		if e := m.deleteGroup(ctx, req, id); e != nil {
			dg.ErrorCode = e.Code
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return kernel.Reply(resp), nil
}
