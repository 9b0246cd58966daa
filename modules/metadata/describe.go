package metadata

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/metadata/image"
)

func strPtr(s string) *string { return &s }

func rackPtr(r string) *string {
	if r == "" {
		return nil
	}
	return &r
}

// metadataBrokers lists the live brokers reachable on listener, sorted by id.
func metadataBrokers(im *kernel.Image, listener string) []kmsg.MetadataResponseBroker {
	var out []kmsg.MetadataResponseBroker
	for _, id := range liveBrokers(im) {
		e, ok := im.Brokers[id].Endpoint(listener)
		if !ok {
			continue
		}
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port, b.Rack = id, e.Host, e.Port, rackPtr(im.Brokers[id].Rack)
		out = append(out, b)
	}
	return out
}

// topicMetadata describes one topic for a Metadata response.
func topicMetadata(im *kernel.Image, t *kernel.TopicImage, listener string, version int16) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic, mt.TopicID, mt.IsInternal = strPtr(t.Name), t.ID, t.Internal
	for i := range t.Partitions {
		mt.Partitions = append(mt.Partitions, partitionMetadata(im, &t.Partitions[i], listener, version))
	}
	return mt
}

// partitionMetadata describes one partition for a Metadata response.
func partitionMetadata(im *kernel.Image, p *kernel.PartitionImage, listener string, version int16) kmsg.MetadataResponseTopicPartition {
	mp := kmsg.NewMetadataResponseTopicPartition()
	mp.Partition, mp.Leader, mp.LeaderEpoch = p.Partition, p.Leader, p.LeaderEpoch
	// Replicas (during a reassignment, the union of the old and the target replicas)
	// and ISR are the image's; offline replicas (v5+) are those not on a live broker.
	mp.Replicas, mp.ISR = slices.Clone(p.Replicas), slices.Clone(p.ISR)
	for _, r := range p.Replicas {
		if b := im.Brokers[r]; version >= 5 && (b == nil || b.Fenced) {
			mp.OfflineReplicas = append(mp.OfflineReplicas, r)
		}
	}
	leader := im.Brokers[p.Leader]
	switch {
	case p.Leader < 0 || leader == nil || leader.Fenced:
		mp.ErrorCode, mp.Leader = kerr.LeaderNotAvailable.Code, -1
	default:
		if _, ok := leader.Endpoint(listener); !ok {
			mp.ErrorCode, mp.Leader = kerr.ListenerNotFound.Code, -1
			if version == 0 {
				mp.ErrorCode = kerr.LeaderNotAvailable.Code
			}
		}
	}
	return mp
}

// ledHere reports whether broker id leads every partition of t.
func ledHere(t *kernel.TopicImage, id int32) bool {
	for _, p := range t.Partitions {
		if p.Leader != id {
			return false
		}
	}
	return true
}

func topicError(name *string, id [16]byte, code int16) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic, mt.TopicID, mt.ErrorCode = name, id, code
	return mt
}

// autoCreateTimeout bounds the wait for topics a Metadata request creates.
const autoCreateTimeout = 15 * time.Second

// metadata answers a Metadata request: brokers, cluster, and the requested topics,
// auto-creating missing ones when the request and the broker configs allow it.
func (m *Module) metadata(ctx context.Context, req *kernel.Request, r *kmsg.MetadataRequest) *kmsg.MetadataResponse {
	im := m.node.hub.image()
	listener := req.Conn.Listener
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = r.Version
	if r.Version >= 8 && r.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = clusterAuthorizedOps(ctx, req)
	}
	wantOps := r.Version >= 8 && r.IncludeTopicAuthorizedOperations
	add := func(mt kmsg.MetadataResponseTopic) {
		if wantOps && mt.ErrorCode == 0 && mt.Topic != nil {
			mt.AuthorizedOperations = topicAuthorizedOps(ctx, req, *mt.Topic)
		}
		resp.Topics = append(resp.Topics, mt)
	}

	if r.Topics == nil || (r.Version == 0 && len(r.Topics) == 0) {
		for _, name := range slices.Sorted(im.TopicNames()) {
			if req.Allowed(ctx, kernel.OpDescribe, kernel.ResTopic, name) {
				add(topicMetadata(im, im.Topic(name), listener, r.Version))
			}
		}
	} else {
		var create []topicRequest
		var createAt []int // index in resp.Topics of each placeholder
		seen := map[string]bool{}
		seenID := map[[16]byte]bool{}
		for _, rt := range r.Topics {
			if rt.Topic == nil || *rt.Topic == "" {
				// v10+ lookup by id; each id answered once, as names are.
				if rt.TopicID != ([16]byte{}) {
					if seenID[rt.TopicID] {
						continue
					}
					seenID[rt.TopicID] = true
				}
				t := im.TopicByID(rt.TopicID)
				switch {
				case rt.TopicID == [16]byte{} || r.Version < 10:
					add(topicError(rt.Topic, rt.TopicID, kerr.InvalidRequest.Code))
				case t == nil:
					add(topicError(nil, rt.TopicID, kerr.UnknownTopicID.Code))
				case !req.Allowed(ctx, kernel.OpDescribe, kernel.ResTopic, t.Name):
					// As Kafka: a topic id is not secret, so a denied one says so (but
					// not its name).
					add(topicError(nil, rt.TopicID, kerr.TopicAuthorizationFailed.Code))
				default:
					add(topicMetadata(im, t, listener, r.Version))
				}
				continue
			}
			name := *rt.Topic
			if seen[name] {
				continue
			}
			seen[name] = true
			if !req.Allowed(ctx, kernel.OpDescribe, kernel.ResTopic, name) {
				add(topicError(strPtr(name), [16]byte{}, kerr.TopicAuthorizationFailed.Code))
				continue
			}
			if t := im.Topic(name); t != nil {
				add(topicMetadata(im, t, listener, r.Version))
				continue
			}
			if err := validateTopicName(name); err != nil {
				add(topicError(strPtr(name), [16]byte{}, kerr.InvalidTopicException.Code))
				continue
			}
			// Internal topics are created by the modules that own them, with their own
			// partition counts and configs, never by a client's Metadata request.
			if (r.Version >= 4 && !r.AllowAutoTopicCreation) || !m.node.brokerSettings(im).AutoCreateTopics || image.IsInternalTopic(name) {
				add(topicError(strPtr(name), [16]byte{}, kerr.UnknownTopicOrPartition.Code))
				continue
			}
			if !mayCreateTopic(ctx, req, name) {
				add(topicError(strPtr(name), [16]byte{}, kerr.TopicAuthorizationFailed.Code))
				continue
			}
			create = append(create, topicRequest{Name: name, NumPartitions: -1, RF: -1})
			createAt = append(createAt, len(resp.Topics))
			resp.Topics = append(resp.Topics, kmsg.MetadataResponseTopic{})
		}
		if len(create) > 0 {
			var errs []error
			cctx, cancel := context.WithTimeout(ctx, autoCreateTimeout)
			im, _, errs = m.createTopics(cctx, create, false)
			cancel()
			for i, tr := range create {
				mt := topicError(strPtr(tr.Name), [16]byte{}, 0)
				if t := im.Topic(tr.Name); t != nil { // created, by us or concurrently
					mt = topicMetadata(im, t, listener, r.Version)
					if !ledHere(t, m.node.nodeID) {
						// As Kafka answers a topic its Metadata request creates: the
						// other leaders may not have applied the creation yet, and a
						// client sent to one at once would be told the partition does not
						// exist (kafka-go's Conn does not retry that). A client asks
						// again after its backoff, when they have. Partitions led here
						// are known here, so a single broker answers them at once.
						mt = topicError(strPtr(tr.Name), t.ID, kerr.LeaderNotAvailable.Code)
					}
				} else {
					mt.ErrorCode, _ = errCode(errs[i])
					if mt.ErrorCode == kerr.NotController.Code || mt.ErrorCode == kerr.RequestTimedOut.Code {
						mt.ErrorCode = kerr.LeaderNotAvailable.Code // retriable for the client
					}
				}
				if wantOps && mt.ErrorCode == 0 {
					mt.AuthorizedOperations = topicAuthorizedOps(ctx, req, tr.Name)
				}
				resp.Topics[createAt[i]] = mt
			}
		}
	}
	// Brokers and cluster come from the newest image, which includes created topics.
	resp.Brokers = metadataBrokers(im, listener)
	if r.Version >= 2 {
		resp.ClusterID = strPtr(im.ClusterID)
	}
	resp.ControllerID = im.ControllerID
	return resp
}

// describeClusterResp serves DescribeCluster.
func (m *Module) describeClusterResp(ctx context.Context, req *kernel.Request, r *kmsg.DescribeClusterRequest) *kmsg.DescribeClusterResponse {
	resp := kmsg.NewPtrDescribeClusterResponse()
	resp.Version = r.Version
	if r.Version >= 1 && r.EndpointType != 1 {
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		resp.ErrorMessage = strPtr("this broker describes brokers (endpoint type 1) only")
		resp.EndpointType = r.EndpointType
		return resp
	}
	im := m.node.hub.image()
	resp.ClusterID, resp.ControllerID = im.ClusterID, im.ControllerID
	for _, id := range slices.Sorted(maps.Keys(im.Brokers)) {
		b := im.Brokers[id]
		if b.Fenced && !(r.Version >= 2 && r.IncludeFencedBrokers) {
			continue
		}
		e, ok := b.Endpoint(req.Conn.Listener)
		if !ok {
			continue
		}
		rb := kmsg.NewDescribeClusterResponseBroker()
		rb.NodeID, rb.Host, rb.Port, rb.Rack, rb.IsFenced = id, e.Host, e.Port, rackPtr(b.Rack), b.Fenced
		resp.Brokers = append(resp.Brokers, rb)
	}
	if r.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = clusterAuthorizedOps(ctx, req)
	}
	return resp
}
