package metadata

import (
	"context"

	"github.com/sluicehq/sluice/kernel"
)

// topicOps and clusterOps are the operations reported in authorized-operations
// bitfields for each resource type (Kafka's supported operations for each).
func topicOps() []kernel.Operation {
	return []kernel.Operation{kernel.OpRead, kernel.OpWrite, kernel.OpCreate, kernel.OpDelete,
		kernel.OpAlter, kernel.OpDescribe, kernel.OpDescribeConfigs, kernel.OpAlterConfigs}
}

func clusterOps() []kernel.Operation {
	return []kernel.Operation{kernel.OpCreate, kernel.OpAlter, kernel.OpDescribe, kernel.OpClusterAction,
		kernel.OpDescribeConfigs, kernel.OpAlterConfigs, kernel.OpIdempotentWrite}
}

// authorizedOps returns the bitfield (bit n = operation n) of ops the request's
// principal may perform on the resource.
func authorizedOps(ctx context.Context, req *kernel.Request, typ kernel.ResourceType, name string, ops []kernel.Operation) int32 {
	var bits int32
	for _, op := range ops {
		if req.Allowed(ctx, op, typ, name) {
			bits |= 1 << op
		}
	}
	return bits
}

func topicAuthorizedOps(ctx context.Context, req *kernel.Request, topic string) int32 {
	return authorizedOps(ctx, req, kernel.ResTopic, topic, topicOps())
}

// clusterAuthorizedOps is the cluster's bitfield, as Kafka reports it in Metadata and
// DescribeCluster: 0 unless the principal may describe the cluster.
func clusterAuthorizedOps(ctx context.Context, req *kernel.Request) int32 {
	if !req.Allowed(ctx, kernel.OpDescribe, kernel.ResCluster, kernel.ClusterResourceName) {
		return 0
	}
	return authorizedOps(ctx, req, kernel.ResCluster, kernel.ClusterResourceName, clusterOps())
}

// mayDeleteTopic: DELETE on the cluster or on the topic (KRaft's controller rule).
func mayDeleteTopic(ctx context.Context, req *kernel.Request, topic string) bool {
	return req.Allowed(ctx, kernel.OpDelete, kernel.ResCluster, kernel.ClusterResourceName) ||
		req.Allowed(ctx, kernel.OpDelete, kernel.ResTopic, topic)
}

// mayDescribeForDelete: DESCRIBE on the topic, or DELETE on the cluster (which lets
// DeleteTopics see every topic it may delete).
func mayDescribeForDelete(ctx context.Context, req *kernel.Request, topic string) bool {
	return req.Allowed(ctx, kernel.OpDelete, kernel.ResCluster, kernel.ClusterResourceName) ||
		req.Allowed(ctx, kernel.OpDescribe, kernel.ResTopic, topic)
}

// mayCreateTopic: CREATE on the cluster or on the topic.
func mayCreateTopic(ctx context.Context, req *kernel.Request, topic string) bool {
	return req.Allowed(ctx, kernel.OpCreate, kernel.ResCluster, kernel.ClusterResourceName) ||
		req.Allowed(ctx, kernel.OpCreate, kernel.ResTopic, topic)
}
