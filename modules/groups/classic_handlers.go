// The classic group protocol: JoinGroup v0-v9, SyncGroup v0-v5, Heartbeat v0-v4,
// LeaveGroup v0-v5. The state machine is modules/groups/classic; these handlers
// authorize, find the group's coordinator shard and wait for the group's answer.

package groups

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

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
	if !req.Allowed(ctx, kernel.OpRead, kernel.ResGroup, id) {
		return nil, nil, kerr.GroupAuthorizationFailed
	}
	if id == "" {
		return nil, nil, kerr.InvalidGroupID
	}
	s, e := m.coordinatorFor(ctx, id)
	if e != nil {
		return nil, nil, e
	}
	g, e := s.classicGroup(id, create)
	return s, g, e
}

func (m *Module) handleJoinGroup(ctx context.Context, req *kernel.Request) (kernel.Response, error) {
	r, ok := req.Body.(*kmsg.JoinGroupRequest)
	if !ok {
		return kernel.Response{}, errBadBody
	}
	g, e := m.classicFor(ctx, req, r.Group, true)
	if e != nil {
		resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.Generation, resp.MemberID = e.Code, -1, r.MemberID
		return kernel.Reply(resp), nil
	}
	ch := g.Join(r, classic.Client{ID: req.ClientID, Host: clientHost(req.Conn)}, m.now())
	select {
	case resp := <-ch:
		return kernel.Reply(resp), nil
	case <-ctx.Done():
		return kernel.Response{}, ctx.Err()
	}
}

func (m *Module) handleSyncGroup(ctx context.Context, req *kernel.Request) (kernel.Response, error) {
	r, ok := req.Body.(*kmsg.SyncGroupRequest)
	if !ok {
		return kernel.Response{}, errBadBody
	}
	s, g, e := m.classicShardFor(ctx, req, r.Group, false)
	if e != nil {
		resp := r.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = e.Code
		return kernel.Reply(resp), nil
	}
	ch := g.Sync(r, m.now())
	select {
	case resp := <-ch:
		if resp.ErrorCode == 0 {
			// The leader's sync made the group Stable at a new generation: write
			// its metadata (members, assignments) before answering, as Kafka does,
			// so a coordinator restart from now on restores this generation.
			// Followers were answered by the leader's Sync; their call finds
			// nothing new to write.
			if sg := s.lookup(r.Group); sg != nil && sg.classic == g {
				s.persist(ctx, sg)
			}
		}
		return kernel.Reply(resp), nil
	case <-ctx.Done():
		return kernel.Response{}, ctx.Err()
	}
}

func (m *Module) handleHeartbeat(ctx context.Context, req *kernel.Request) (kernel.Response, error) {
	r, ok := req.Body.(*kmsg.HeartbeatRequest)
	if !ok {
		return kernel.Response{}, errBadBody
	}
	g, e := m.classicFor(ctx, req, r.Group, false)
	if e != nil {
		resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = e.Code
		return kernel.Reply(resp), nil
	}
	return kernel.Reply(g.Heartbeat(r, m.now())), nil
}

func (m *Module) handleLeaveGroup(ctx context.Context, req *kernel.Request) (kernel.Response, error) {
	r, ok := req.Body.(*kmsg.LeaveGroupRequest)
	if !ok {
		return kernel.Response{}, errBadBody
	}
	g, e := m.classicFor(ctx, req, r.Group, false)
	if e != nil {
		resp := r.ResponseKind().(*kmsg.LeaveGroupResponse)
		resp.ErrorCode = e.Code
		return kernel.Reply(resp), nil
	}
	return kernel.Reply(g.Leave(r, m.now())), nil
}
