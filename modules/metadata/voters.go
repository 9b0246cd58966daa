package metadata

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/metadata/rpc"
)

// Dynamic controller quorum (KIP-853) on hashicorp/raft's membership changes.
//
// Every broker follows the metadata log: the voters of the bootstrap list as raft
// voters, the others as raft non-voters (Kafka's observers, joined with the
// AddObserver RPC). AddRaftVoter promotes an observer to voter (raft AddVoter);
// RemoveRaftVoter demotes a live voter to observer (raft DemoteVoter: it keeps
// following) and removes a dead one (raft RemoveServer); UpdateRaftVoter moves a
// voter to a new raft address. The raft configuration in the log, not the `voters`
// setting, is the voter set once the log exists: `voters` only bootstraps a new log
// and names the servers a broker may ask first.
//
// Invariants:
//   - One change at a time: each change names the configuration index it was decided
//     on (raft's prevIndex), so a concurrent change fails it instead of both applying.
//   - A voter is only added when it is a live, registered broker that follows the log
//     as an observer: a broker registers only after catching up, and raft counts a
//     voter toward the quorum at once, so adding a dead or lagging node would stall
//     commits.
//   - The last voter is never removed; the controller hands leadership over before
//     it removes itself, and the new controller does the removal.
//   - A change is answered only once it is committed (raft's future).

// voterChangeTimeout bounds a membership change when the request gives none.
const voterChangeTimeout = 30 * time.Second

// voterError is a refused membership change: a code and the reason.
func voterError(code *kerr.Error, format string, args ...any) (int16, *string) {
	msg := fmt.Sprintf(format, args...)
	return code.Code, &msg
}

// onControllerKmsg answers req where the controller is: local(req) when this broker is
// the raft leader (or runs raft without a network), else over the controller RPC at
// version ver, trying again while the answer is NOT_CONTROLLER. code reads a
// response's error code.
func (c *controller) onControllerKmsg(ctx context.Context, req kmsg.Request, ver int16,
	local func(ctx context.Context) kmsg.Response, code func(kmsg.Response) int16) (kmsg.Response, error) {
	var out kmsg.Response
	err := c.withController(ctx, func(ctx context.Context, addr string) (bool, error) {
		if addr == "" {
			out = local(ctx)
			if code(out) == kerr.NotController.Code {
				return c.networked(), ErrNotController
			}
			return false, nil
		}
		req.SetVersion(ver)
		resp, err := c.rpc.CallKmsg(ctx, addr, req)
		if err != nil {
			return errors.Is(err, rpc.ErrNotSent), err
		}
		out = resp
		if code(out) == kerr.NotController.Code {
			return true, ErrNotController
		}
		return false, nil
	})
	return out, err
}

// voterRequest is the handler of one KIP-853 request: op on the cluster, else
// CLUSTER_AUTHORIZATION_FAILED; a cluster id that is not this cluster's,
// INCONSISTENT_CLUSTER_ID; then local on the controller or forwarded to it at version
// ver. codeOf reads an answer's code, failed builds the answer of a refusal.
func voterRequest[R kmsg.Response](ctx context.Context, c *controller, req *kernel.Request, op kernel.Operation,
	clusterID *string, fwd kmsg.Request, ver int16, local func(context.Context) R, codeOf func(R) int16,
	failed func(code int16, msg *string) R,
) R {
	switch {
	case !req.Allowed(ctx, op, kernel.ResCluster, kernel.ClusterResourceName):
		return failed(kerr.ClusterAuthorizationFailed.Code, nil)
	case clusterID != nil && *clusterID != c.hub.image().ClusterID:
		return failed(kerr.InconsistentClusterID.Code, nil)
	}
	out, err := c.onControllerKmsg(ctx, fwd, ver,
		func(ctx context.Context) kmsg.Response { return local(ctx) },
		func(r kmsg.Response) int16 { return codeOf(r.(R)) })
	if err != nil {
		return failed(errCode(err))
	}
	r := out.(R)
	r.SetVersion(req.Version)
	return r
}

// voterConfig returns the raft leader and its configuration, or the code to answer.
func (c *controller) voterConfig(ctx context.Context) (*raft.Raft, raft.ConfigurationFuture, int16, *string) {
	rf := c.raft.Load()
	if rf == nil || rf.State() != raft.Leader {
		return nil, nil, kerr.NotController.Code, nil
	}
	if !c.networked() {
		code, msg := voterError(kerr.InvalidRequest, "the metadata log runs without a raft address (a single node without raft_listen): it cannot take other voters")
		return nil, nil, code, msg
	}
	f := rf.GetConfiguration()
	if err := c.await(ctx, f); err != nil {
		code, msg := errCode(mapRaftErr(err))
		return nil, nil, code, msg
	}
	return rf, f, 0, nil
}

// findServer returns the server with node id in the configuration, and the number of
// voters.
func findServer(cf raft.Configuration, id int32) (*raft.Server, int) {
	want := raft.ServerID(strconv.FormatInt(int64(id), 10))
	var found *raft.Server
	voters := 0
	for i, s := range cf.Servers {
		if s.Suffrage == raft.Voter {
			voters++
		}
		if s.ID == want {
			found = &cf.Servers[i]
		}
	}
	return found, voters
}

// changeErr is the answer to a membership change raft refused or did not commit.
func changeErr(err error) (int16, *string) {
	if errors.Is(mapRaftErr(err), ErrNotController) || errors.Is(err, ErrNotController) {
		return kerr.NotController.Code, nil
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, raft.ErrEnqueueTimeout) {
		return voterError(kerr.RequestTimedOut, "the voter change was not committed in time: %v", err)
	}
	// Raft refuses a change decided on an older configuration ("configuration
	// changed since ..."): another change won. The client may try again.
	return voterError(kerr.RequestTimedOut, "the voter change was not applied: %v", err)
}

// listenerAddr is the raft address a request's first listener names ("" without one).
func listenerAddr(host string, port uint16) string {
	return net.JoinHostPort(host, strconv.Itoa(int(port)))
}

// addRaftVoterLocal is AddRaftVoter on the controller.
func (c *controller) addRaftVoterLocal(ctx context.Context, r *kmsg.AddRaftVoterRequest) *kmsg.AddRaftVoterResponse {
	resp := r.ResponseKind().(*kmsg.AddRaftVoterResponse)
	rf, f, code, msg := c.voterConfig(ctx)
	if code != 0 {
		resp.ErrorCode, resp.ErrorMessage = code, msg
		return resp
	}
	cur, _ := findServer(f.Configuration(), r.VoterID)
	im := c.hub.image()
	switch b := im.Brokers[r.VoterID]; {
	case cur != nil && cur.Suffrage == raft.Voter:
		resp.ErrorCode, resp.ErrorMessage = voterError(kerr.DuplicateVoter, "node %d is already a voter", r.VoterID)
		return resp
	case cur == nil:
		resp.ErrorCode, resp.ErrorMessage = voterError(kerr.InvalidRequest,
			"node %d does not follow the metadata log: start it with the cluster's voters and a raft_listen address first; it joins as an observer", r.VoterID)
		return resp
	case b == nil || b.Fenced:
		resp.ErrorCode, resp.ErrorMessage = voterError(kerr.InvalidRequest,
			"node %d is not a live broker: a voter is added once it has caught up and registered", r.VoterID)
		return resp
	}
	if len(r.Listeners) > 0 {
		if a := listenerAddr(r.Listeners[0].Host, r.Listeners[0].Port); a != string(cur.Address) {
			resp.ErrorCode, resp.ErrorMessage = voterError(kerr.InvalidRequest,
				"node %d follows the metadata log at %s, not at the listener's %s", r.VoterID, cur.Address, a)
			return resp
		}
	}
	timeout := voterChangeTimeout
	if r.TimeoutMillis > 0 {
		timeout = time.Duration(r.TimeoutMillis) * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := c.await(ctx, rf.AddVoter(cur.ID, cur.Address, f.Index(), timeout)); err != nil {
		resp.ErrorCode, resp.ErrorMessage = changeErr(err)
		return resp
	}
	c.log.Info("added metadata voter", "node", r.VoterID, "address", cur.Address)
	return resp
}

// removeRaftVoterLocal is RemoveRaftVoter on the controller.
func (c *controller) removeRaftVoterLocal(ctx context.Context, r *kmsg.RemoveRaftVoterRequest) *kmsg.RemoveRaftVoterResponse {
	resp := r.ResponseKind().(*kmsg.RemoveRaftVoterResponse)
	rf, f, code, msg := c.voterConfig(ctx)
	if code != 0 {
		resp.ErrorCode, resp.ErrorMessage = code, msg
		return resp
	}
	cur, voters := findServer(f.Configuration(), r.VoterID)
	switch {
	case cur == nil || cur.Suffrage != raft.Voter:
		resp.ErrorCode, resp.ErrorMessage = voterError(kerr.VoterNotFound, "node %d is not a voter", r.VoterID)
		return resp
	case voters == 1:
		resp.ErrorCode, resp.ErrorMessage = voterError(kerr.InvalidRequest, "node %d is the last voter", r.VoterID)
		return resp
	case r.VoterID == c.nodeID:
		// Hand leadership over; the new controller removes this node.
		if err := c.await(ctx, rf.LeadershipTransfer()); err != nil {
			c.log.Warn("leadership transfer before removing this voter", "err", err)
		}
		resp.ErrorCode = kerr.NotController.Code
		return resp
	}
	ctx, cancel := context.WithTimeout(ctx, voterChangeTimeout)
	defer cancel()
	b := c.hub.image().Brokers[r.VoterID]
	live := b != nil && !b.Fenced
	var fut raft.IndexFuture
	if live {
		fut = rf.DemoteVoter(cur.ID, f.Index(), voterChangeTimeout) // it keeps following the log
	} else {
		fut = rf.RemoveServer(cur.ID, f.Index(), voterChangeTimeout)
	}
	if err := c.await(ctx, fut); err != nil {
		resp.ErrorCode, resp.ErrorMessage = changeErr(err)
		return resp
	}
	c.log.Info("removed metadata voter", "node", r.VoterID, "address", cur.Address, "still_observer", live)
	return resp
}

// updateRaftVoterLocal is UpdateRaftVoter on the controller: a voter's new raft
// address.
func (c *controller) updateRaftVoterLocal(ctx context.Context, r *kmsg.UpdateRaftVoterRequest) *kmsg.UpdateRaftVoterResponse {
	resp := r.ResponseKind().(*kmsg.UpdateRaftVoterResponse)
	rf, f, code, msg := c.voterConfig(ctx)
	if code != 0 {
		resp.ErrorCode = code // UpdateRaftVoterResponse has no message
		c.log.Debug("update raft voter refused", "node", r.VoterID, "code", code, "reason", msg)
		return resp
	}
	cur, _ := findServer(f.Configuration(), r.VoterID)
	switch {
	case cur == nil || cur.Suffrage != raft.Voter:
		resp.ErrorCode, _ = voterError(kerr.VoterNotFound, "node %d is not a voter", r.VoterID)
		return resp
	case len(r.Listeners) == 0:
		resp.ErrorCode, _ = voterError(kerr.InvalidRequest, "no listener: the voter's new raft address is its first listener")
		return resp
	}
	addr := raft.ServerAddress(listenerAddr(r.Listeners[0].Host, r.Listeners[0].Port))
	if addr == cur.Address {
		return resp
	}
	ctx, cancel := context.WithTimeout(ctx, voterChangeTimeout)
	defer cancel()
	if err := c.await(ctx, rf.AddVoter(cur.ID, addr, f.Index(), voterChangeTimeout)); err != nil {
		resp.ErrorCode, _ = changeErr(err)
		return resp
	}
	c.log.Info("moved metadata voter", "node", r.VoterID, "from", cur.Address, "to", addr)
	return resp
}

// announceAddress keeps this voter's raft address current in the quorum's
// configuration, as Kafka's voters send UpdateRaftVoter at start (KIP-853): a voter
// restarted on a new raft address is unreachable at the old one, so it tells the
// controller (over the controller RPC, which it dials itself) until its own
// configuration, which the controller then reaches it with, holds addr. It returns
// at once for a node that is not a voter or already has addr, and when ctx ends.
func (c *controller) announceAddress(ctx context.Context, rf *raft.Raft, addr string) {
	host, portStr, err := net.SplitHostPort(addr)
	port, perr := strconv.ParseUint(portStr, 10, 16)
	if err != nil || perr != nil {
		return
	}
	backoff := 100 * time.Millisecond
	for {
		f := rf.GetConfiguration()
		if c.await(ctx, f) == nil {
			me, _ := findServer(f.Configuration(), c.nodeID)
			if me == nil || me.Suffrage != raft.Voter || string(me.Address) == addr {
				return
			}
			req := kmsg.NewPtrUpdateRaftVoterRequest()
			req.VoterID = c.nodeID
			l := kmsg.NewUpdateRaftVoterRequestListener()
			l.Name, l.Host, l.Port = "raft", host, uint16(port)
			req.Listeners = append(req.Listeners, l)
			out, err := c.onControllerKmsg(ctx, req, rpc.VerUpdateRaftVoter,
				func(ctx context.Context) kmsg.Response { return c.updateRaftVoterLocal(ctx, req) },
				func(r kmsg.Response) int16 { return r.(*kmsg.UpdateRaftVoterResponse).ErrorCode })
			code := int16(0)
			if err == nil {
				code = out.(*kmsg.UpdateRaftVoterResponse).ErrorCode
			}
			if err == nil && code == 0 {
				c.log.Info("announced this voter's new raft address", "from", me.Address, "to", addr)
				backoff = 100 * time.Millisecond
			} else if !c.isStopped() {
				c.log.Warn("announcing this voter's new raft address failed; retrying", "from", me.Address, "to", addr,
					"code", code, "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}
