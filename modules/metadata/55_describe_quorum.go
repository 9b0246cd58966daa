// DescribeQuorum: v0-2. The quorum is the hashicorp/raft metadata log, reported as
// Kafka's __cluster_metadata-0. Any broker answers: one that is not the controller asks
// the controller over the controller RPC, since only it knows the others' progress.
// Log end offsets of other brokers are their applied metadata offsets from their last
// heartbeat; timestamps are the controller's clock when that heartbeat arrived.

package metadata

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/metadata/rpc"
)

// metadataTopic is the name Kafka gives the metadata log.
const metadataTopic = "__cluster_metadata"

// claimDescribeQuorum is DescribeQuorum's claim: the versions above and the thin handler; the work is
// in the function it calls.
func claimDescribeQuorum(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.DescribeQuorum, Min: 0, Max: 2, Handler: kernel.Replying(m.ctl.describeQuorum)}
}

// describeQuorum answers on any broker, asking the controller when this is not it.
func (c *controller) describeQuorum(ctx context.Context, req *kernel.Request, r *kmsg.DescribeQuorumRequest) *kmsg.DescribeQuorumResponse {
	if !req.Allowed(ctx, kernel.OpDescribe, kernel.ResCluster, kernel.ClusterResourceName) {
		resp := r.ResponseKind().(*kmsg.DescribeQuorumResponse)
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp
	}
	if c.isLeader() || !c.networked() {
		return c.describeQuorumLocal(r)
	}
	var out *kmsg.DescribeQuorumResponse
	fwd := *r
	fwd.Version = rpc.VerDescribeQuorum
	err := c.withController(ctx, func(ctx context.Context, addr string) (bool, error) {
		if addr == "" {
			out = c.describeQuorumLocal(&fwd)
			return false, nil
		}
		resp, err := c.rpc.CallKmsg(ctx, addr, &fwd)
		if err != nil {
			return errors.Is(err, rpc.ErrNotSent), err
		}
		out = resp.(*kmsg.DescribeQuorumResponse)
		if out.ErrorCode == kerr.NotController.Code {
			return true, ErrNotController
		}
		return false, nil
	})
	if err != nil {
		c.log.Warn("describe quorum: controller not reachable", "err", err)
		resp := r.ResponseKind().(*kmsg.DescribeQuorumResponse)
		resp.ErrorCode, resp.ErrorMessage = errCode(err)
		if r.Version < 2 {
			resp.ErrorMessage = nil
		}
		return resp
	}
	out.Version = r.Version
	return out
}

// describeQuorumLocal builds the answer on the controller (NOT_CONTROLLER elsewhere).
func (c *controller) describeQuorumLocal(r *kmsg.DescribeQuorumRequest) *kmsg.DescribeQuorumResponse {
	resp := r.ResponseKind().(*kmsg.DescribeQuorumResponse)
	rf := c.raft.Load()
	if rf == nil || rf.State() != raft.Leader {
		resp.ErrorCode = kerr.NotController.Code
		return resp
	}
	cf := rf.GetConfiguration()
	if err := cf.Error(); err != nil {
		resp.ErrorCode = kerr.NotController.Code
		return resp
	}
	im := c.hub.image()
	now := time.Now()
	c.mu.Lock()
	sessions := make(map[int32]brokerSession, len(c.sessions))
	for id, s := range c.sessions {
		sessions[id] = *s
	}
	c.mu.Unlock()
	state := func(id int32) kmsg.DescribeQuorumResponseTopicPartitionReplicaState {
		rs := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
		rs.ReplicaID = id
		if id == c.nodeID {
			rs.LogEndOffset = int64(rf.LastIndex())
			rs.LastFetchTimestamp, rs.LastCaughtUpTimestamp = now.UnixMilli(), now.UnixMilli()
			return rs
		}
		rs.LogEndOffset = -1
		if s, ok := sessions[id]; ok && s.heard {
			rs.LogEndOffset = s.offset
			rs.LastFetchTimestamp = s.lastSeen.UnixMilli()
			if !s.caughtUp.IsZero() {
				rs.LastCaughtUpTimestamp = s.caughtUp.UnixMilli()
			}
		}
		return rs
	}
	p := kmsg.NewDescribeQuorumResponseTopicPartition()
	p.LeaderID, p.LeaderEpoch, p.HighWatermark = c.nodeID, int32(min(rf.CurrentTerm(), 1<<31-1)), int64(rf.CommitIndex())
	seen := map[int32]bool{}
	var nodes []kmsg.DescribeQuorumResponseNode
	for _, s := range cf.Configuration().Servers {
		n, err := strconv.ParseInt(string(s.ID), 10, 32)
		if err != nil {
			continue
		}
		id := int32(n)
		seen[id] = true
		if s.Suffrage == raft.Voter {
			p.CurrentVoters = append(p.CurrentVoters, state(id))
			node := kmsg.NewDescribeQuorumResponseNode()
			node.NodeID = id
			if host, port, err := net.SplitHostPort(string(s.Address)); err == nil {
				if pn, err := strconv.ParseUint(port, 10, 16); err == nil {
					l := kmsg.NewDescribeQuorumResponseNodeListener()
					l.Name, l.Host, l.Port = "CONTROLLER", host, uint16(pn)
					node.Listeners = append(node.Listeners, l)
				}
			}
			nodes = append(nodes, node)
		} else {
			p.Observers = append(p.Observers, state(id))
		}
	}
	// Registered brokers that follow the log some other way (none today) are observers.
	for _, id := range liveBrokers(im) {
		if !seen[id] {
			p.Observers = append(p.Observers, state(id))
		}
	}
	slices.SortFunc(p.CurrentVoters, func(a, b kmsg.DescribeQuorumResponseTopicPartitionReplicaState) int {
		return int(a.ReplicaID - b.ReplicaID)
	})
	slices.SortFunc(p.Observers, func(a, b kmsg.DescribeQuorumResponseTopicPartitionReplicaState) int {
		return int(a.ReplicaID - b.ReplicaID)
	})
	// Answer the partitions asked for: only __cluster_metadata-0 exists.
	for _, rt := range r.Topics {
		t := kmsg.NewDescribeQuorumResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			if rt.Topic != metadataTopic || rp.Partition != 0 {
				e := kmsg.NewDescribeQuorumResponseTopicPartition()
				e.Partition, e.ErrorCode = rp.Partition, kerr.UnknownTopicOrPartition.Code
				t.Partitions = append(t.Partitions, e)
				continue
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	if r.Version >= 2 {
		resp.Nodes = nodes
	}
	return resp
}
