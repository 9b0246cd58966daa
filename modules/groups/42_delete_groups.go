// DeleteGroups: v0-v3 (v3: a message with each group's error). Pending transactional
// offsets are deleted with the group.
// Not implemented: nothing known.

package groups

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// deleteGroupsClaim claims the versions this file's header lists.
func deleteGroupsClaim(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.DeleteGroups, Min: 0, Max: 3, Handler: kernel.Typed(m.handleDeleteGroups)}
}

func (m *Module) handleDeleteGroups(ctx context.Context, req *kernel.Request, r *kmsg.DeleteGroupsRequest) (kernel.Response, error) {
	resp := r.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, id := range r.Groups {
		dg := kmsg.NewDeleteGroupsResponseGroup()
		dg.Group = id
		if e := m.deleteGroup(ctx, req, id); e != nil {
			dg.ErrorCode = e.Code
			dg.ErrorMessage = deleteGroupMessage(e, id)
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return kernel.Reply(resp), nil
}

// deleteGroupMessage says why group id was not deleted (DeleteGroups v3+).
func deleteGroupMessage(e *kerr.Error, id string) *string {
	var msg string
	switch e {
	case kerr.NonEmptyGroup:
		msg = fmt.Sprintf("group %q has members: it can be deleted once they have all left", id)
	case kerr.GroupIDNotFound:
		msg = fmt.Sprintf("group %q does not exist", id)
	case kerr.NotCoordinator:
		msg = fmt.Sprintf("this broker does not coordinate group %q: find its coordinator again", id)
	default:
		msg = e.Description
	}
	return &msg
}
