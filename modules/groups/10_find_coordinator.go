// FindCoordinator: v0-v6 (v4+ batched keys). Key type 0 (group): the leader of the
// group's __consumer_offsets partition. Key type 1 (transaction): the leader of the
// transactional id's __transaction_state partition, as the transaction coordinator
// (role "txn", kernel.TxnCoordinatorLocator) names it; COORDINATOR_NOT_AVAILABLE when
// the broker has none. Key type 2 (share, KIP-932; "group:topicId:partition", which
// brokers ask for): Sluice keeps share state with the group (share_state.go), so the
// group's coordinator; ClusterAction on the cluster, as Kafka checks. Other types:
// INVALID_REQUEST.

package groups

import (
	"context"
	"net"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/groups/offsets"
)

// findCoordinatorClaim claims the versions this file's header lists.
func findCoordinatorClaim(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.FindCoordinator, Min: 0, Max: 6, Handler: kernel.Typed(m.handleFindCoordinator)}
}

func (m *Module) handleFindCoordinator(ctx context.Context, req *kernel.Request, r *kmsg.FindCoordinatorRequest) (kernel.Response, error) {
	resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
	if r.Version < 4 {
		c := m.findOne(ctx, req, r.CoordinatorKey, r.CoordinatorType)
		resp.ErrorCode, resp.ErrorMessage = c.ErrorCode, c.ErrorMessage
		resp.NodeID, resp.Host, resp.Port = c.NodeID, c.Host, c.Port
		return kernel.Reply(resp), nil
	}
	for _, key := range r.CoordinatorKeys {
		resp.Coordinators = append(resp.Coordinators, m.findOne(ctx, req, key, r.CoordinatorType))
	}
	return kernel.Reply(resp), nil
}

func (m *Module) findOne(ctx context.Context, req *kernel.Request, key string, typ int8) kmsg.FindCoordinatorResponseCoordinator {
	c := kmsg.NewFindCoordinatorResponseCoordinator()
	c.Key, c.NodeID, c.Port = key, -1, -1
	fail := func(e *kerr.Error, msg string) kmsg.FindCoordinatorResponseCoordinator {
		c.ErrorCode = e.Code
		if msg != "" {
			c.ErrorMessage = &msg
		}
		return c
	}
	var tp kernel.TopicPartition
	switch typ {
	case 0:
		if !req.Allowed(ctx, kernel.OpDescribe, kernel.ResGroup, key) {
			return fail(kerr.GroupAuthorizationFailed, "")
		}
		if key == "" && req.Version >= 4 {
			return fail(kerr.InvalidRequest, "empty group id")
		}
		t, err := m.ensureOffsetsTopic(ctx)
		if err != nil || t == nil || len(t.Partitions) == 0 {
			m.log.Warn("cannot create __consumer_offsets", "err", err)
			return fail(kerr.CoordinatorNotAvailable, "__consumer_offsets is not available")
		}
		tp = kernel.TopicPartition{Topic: OffsetsTopic, Partition: offsets.PartitionFor(key, int32(len(t.Partitions)))}
	case 2:
		if !req.Allowed(ctx, kernel.OpClusterAction, kernel.ResCluster, kernel.ClusterResourceName) {
			return fail(kerr.ClusterAuthorizationFailed, "")
		}
		group, ok := shareKeyGroup(key)
		if !ok {
			return fail(kerr.InvalidRequest, "a share coordinator key is group:topicId:partition")
		}
		t, err := m.ensureOffsetsTopic(ctx)
		if err != nil || t == nil || len(t.Partitions) == 0 {
			return fail(kerr.CoordinatorNotAvailable, "__consumer_offsets is not available")
		}
		tp = kernel.TopicPartition{Topic: OffsetsTopic, Partition: offsets.PartitionFor(group, int32(len(t.Partitions)))}
	case 1:
		if !req.Allowed(ctx, kernel.OpDescribe, kernel.ResTransactionalID, key) {
			return fail(kerr.TransactionalIDAuthorizationFailed, "")
		}
		if m.txnLocator == nil {
			return fail(kerr.CoordinatorNotAvailable, "no transaction coordinator is configured")
		}
		if key == "" {
			return fail(kerr.InvalidRequest, "empty transactional id")
		}
		var err error
		if tp, err = m.txnLocator.TxnStatePartition(ctx, key); err != nil {
			m.log.Warn("cannot locate the transaction coordinator", "transactional_id", key, "err", err)
			return fail(kerr.CoordinatorNotAvailable, "__transaction_state is not available")
		}
	default:
		return fail(kerr.InvalidRequest, "unknown coordinator type "+strconv.Itoa(int(typ)))
	}
	// The coordinator is the leader of the key's partition, for either type.
	im := m.meta.Image()
	p := im.Partition(tp.Topic, tp.Partition)
	if p == nil || p.Leader < 0 {
		return fail(kerr.CoordinatorNotAvailable, "the coordinator's "+tp.Topic+" partition has no leader")
	}
	b := im.Brokers[p.Leader]
	if b == nil || b.Fenced {
		return fail(kerr.CoordinatorNotAvailable, "the coordinator broker is not available")
	}
	ep, ok := b.Endpoint(req.Conn.Listener)
	if !ok {
		return fail(kerr.CoordinatorNotAvailable, "the coordinator has no endpoint on listener "+req.Conn.Listener)
	}
	if typ == 0 && p.Leader == m.broker.NodeID {
		// Start loading now, so the group's first request finds it ready.
		_, _ = m.shard(p.Partition)
	}
	c.NodeID, c.Host, c.Port = p.Leader, ep.Host, ep.Port
	return c
}

// clientHost is the peer address as Kafka shows it in DescribeGroups ("/127.0.0.1").
func clientHost(c *kernel.ConnInfo) string {
	if c == nil || c.Remote == nil {
		return ""
	}
	host, _, err := net.SplitHostPort(c.Remote.String())
	if err != nil {
		return "/" + c.Remote.String()
	}
	return "/" + host
}

// shareKeyGroup returns the group of a share coordinator key, group:topicId:partition
// (the group may itself hold colons: the last two fields are split off).
func shareKeyGroup(key string) (string, bool) {
	i := strings.LastIndexByte(key, ':')
	if i <= 0 {
		return "", false
	}
	if _, err := strconv.ParseInt(key[i+1:], 10, 32); err != nil {
		return "", false
	}
	j := strings.LastIndexByte(key[:i], ':')
	if j <= 0 || j == i-1 {
		return "", false
	}
	return key[:j], true
}
