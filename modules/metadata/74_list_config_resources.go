// ListConfigResources: v0-1. KIP-1142 (v1; v0 was KIP-1000's ListClientMetricsResources):
// the resources a client may describe the configs of, DescribeConfigs on the cluster
// needed (CLUSTER_AUTHORIZATION_FAILED, nothing listed, otherwise). v0 lists client
// metrics subscriptions only; v1 lists the requested types, an empty list meaning
// all of them, in Kafka's order: groups with configs, client metrics subscriptions,
// brokers as loggers, brokers (the live ones reachable on the request's listener),
// topics. A type v1 does not know fails the whole request with UNSUPPORTED_VERSION,
// as Kafka answers. Not implemented: nothing known.

package metadata

import (
	"context"
	"maps"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/clientmetrics"
	"github.com/sluicehq/sluice/kernel"
)

// claimListConfigResources is ListConfigResources's claim: the versions above and the
// thin handler; the work is in the function it calls.
func claimListConfigResources(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.ListConfigResources, Min: 0, Max: 1, Handler: kernel.Replying(m.listConfigResources)}
}

// configResourceTypes are the types v1 lists, in the order Kafka lists them.
var configResourceTypes = []kmsg.ConfigResourceType{
	kmsg.ConfigResourceTypeGroupConfig,
	kmsg.ConfigResourceTypeClientMetrics,
	kmsg.ConfigResourceTypeBrokerLogger,
	kmsg.ConfigResourceTypeBroker,
	kmsg.ConfigResourceTypeTopic,
}

func (m *Module) listConfigResources(ctx context.Context, req *kernel.Request, r *kmsg.ListConfigResourcesRequest) *kmsg.ListConfigResourcesResponse {
	resp := kmsg.NewPtrListConfigResourcesResponse()
	resp.Version = r.Version
	if !req.Allowed(ctx, kernel.OpDescribeConfigs, kernel.ResCluster, kernel.ClusterResourceName) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp
	}
	want := func(t kmsg.ConfigResourceType) bool {
		if r.Version < 1 {
			return t == kmsg.ConfigResourceTypeClientMetrics
		}
		return len(r.ResourceTypes) == 0 || slices.Contains(r.ResourceTypes, int8(t))
	}
	for _, t := range r.ResourceTypes {
		if !slices.Contains(configResourceTypes, kmsg.ConfigResourceType(t)) {
			resp.ErrorCode = kerr.UnsupportedVersion.Code
			return resp
		}
	}
	im := m.node.hub.image()
	add := func(t kmsg.ConfigResourceType, names []string) {
		for _, name := range names {
			cr := kmsg.NewListConfigResourcesResponseConfigResource()
			cr.Name, cr.Type = name, int8(t)
			resp.ConfigResources = append(resp.ConfigResources, cr)
		}
	}
	var brokers []string
	for _, id := range liveBrokers(im) {
		if _, ok := im.Brokers[id].Endpoint(req.Conn.Listener); ok {
			brokers = append(brokers, strconv.Itoa(int(id)))
		}
	}
	for _, t := range configResourceTypes {
		if !want(t) {
			continue
		}
		switch t {
		case kmsg.ConfigResourceTypeGroupConfig:
			add(t, slices.Sorted(maps.Keys(im.Extensions[GroupConfigsNamespace])))
		case kmsg.ConfigResourceTypeClientMetrics:
			add(t, slices.Sorted(maps.Keys(im.Extensions[clientmetrics.Namespace])))
		case kmsg.ConfigResourceTypeBrokerLogger, kmsg.ConfigResourceTypeBroker:
			add(t, brokers)
		case kmsg.ConfigResourceTypeTopic:
			add(t, slices.Sorted(im.TopicNames()))
		}
	}
	return resp
}
