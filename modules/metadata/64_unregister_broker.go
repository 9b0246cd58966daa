// UnregisterBroker: v0. Removes a broker's registration for good (a retired node), as
// Kafka's `kafka-cluster.sh unregister`: ALTER on CLUSTER; an unknown id answers
// BROKER_ID_NOT_REGISTERED. Unlike Kafka, which takes the registration of a live broker
// too (it registers again at its next heartbeat), a broker that is not fenced is refused
// with INVALID_REQUEST: shut it down first. Its partitions keep it in their replicas,
// offline, until they are reassigned. Not implemented: nothing known.

package metadata

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/metadata/image"
)

// claimUnregisterBroker is UnregisterBroker's claim: the versions above and the thin
// handler; the work is in the function it calls.
func claimUnregisterBroker(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.UnregisterBroker, Min: 0, Max: 0, Handler: kernel.Replying(m.ctl.unregisterBrokerResp)}
}

func (c *controller) unregisterBrokerResp(ctx context.Context, req *kernel.Request, r *kmsg.UnregisterBrokerRequest) *kmsg.UnregisterBrokerResponse {
	resp := kmsg.NewPtrUnregisterBrokerResponse()
	resp.Version = r.Version
	resp.ErrorCode, resp.ErrorMessage = errCode(c.unregisterBroker(ctx, req, r.BrokerID))
	return resp
}

func (c *controller) unregisterBroker(ctx context.Context, req *kernel.Request, id int32) error {
	if !req.Allowed(ctx, kernel.OpAlter, kernel.ResCluster, kernel.ClusterResourceName) {
		return opErr(kerr.ClusterAuthorizationFailed, "")
	}
	_, err := c.propose(ctx, &image.UnregisterBrokerRecord{NodeID: id})
	switch {
	case err == nil:
		c.mu.Lock()
		delete(c.sessions, id)
		c.mu.Unlock()
		c.log.Info("unregistered broker", "node", id)
		return nil
	case errors.Is(err, image.ErrUnknownBroker):
		return opErr(kerr.BrokerIDNotRegistered, "broker %d is not registered", id)
	case errors.Is(err, image.ErrBrokerLive):
		return opErr(kerr.InvalidRequest, "broker %d is live (not fenced): shut it down before unregistering it", id)
	}
	return err
}
