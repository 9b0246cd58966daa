// ListGroups: v0-v5 (v4+ state filter, v5 type filter). Not implemented: nothing known.

package groups

import (
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/groups/offsets"
)

// listGroupsClaim claims the versions this file's header lists.
func listGroupsClaim(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.ListGroups, Min: 0, Max: 5, Handler: kernel.Typed(m.handleListGroups)}
}

func (m *Module) handleListGroups(ctx context.Context, req *kernel.Request, r *kmsg.ListGroupsRequest) (kernel.Response, error) {
	resp := r.ResponseKind().(*kmsg.ListGroupsResponse)
	wantState := func(st string) bool {
		return len(r.StatesFilter) == 0 || slices.ContainsFunc(r.StatesFilter, func(f string) bool { return strings.EqualFold(f, st) })
	}
	wantType := func(t string) bool {
		return len(r.TypesFilter) == 0 || slices.ContainsFunc(r.TypesFilter, func(f string) bool { return strings.EqualFold(f, t) })
	}
	clusterOK := req.Allowed(ctx, kernel.OpDescribe, kernel.ResCluster, kernel.ClusterResourceName)
	n := m.offsetsPartitions()
	seen := map[string]bool{}
	add := func(id, protocolType, state, typ string) {
		if seen[id] {
			return
		}
		seen[id] = true
		if !wantState(state) || !wantType(typ) {
			return
		}
		if !clusterOK && !req.Allowed(ctx, kernel.OpDescribe, kernel.ResGroup, id) {
			return
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = id, protocolType, state, typ
		resp.Groups = append(resp.Groups, lg)
	}
	led := map[int32]bool{}
	for _, s := range m.loadedShards() {
		led[s.tp.Partition] = true
		for _, g := range s.allGroups() {
			add(g.id, g.protocolType(), g.state(), g.typ())
		}
	}
	if n > 0 {
		ids, err := m.store.Groups()
		if err != nil {
			resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
			return kernel.Reply(resp), nil
		}
		for _, id := range ids {
			if !led[offsets.PartitionFor(id, n)] {
				continue
			}
			pt := ""
			if md, ok, _ := m.store.GroupMetadata(id); ok {
				pt = md.ProtocolType
			}
			add(id, pt, "Empty", "classic")
		}
	}
	slices.SortFunc(resp.Groups, func(a, b kmsg.ListGroupsResponseGroup) int { return strings.Compare(a.Group, b.Group) })
	return kernel.Reply(resp), nil
}
