// WriteTxnMarkers: v0-v2. v2 carries each marker's transaction version (KIP-890 part
// 2): at 2 the partition refuses a marker whose epoch is not above the data of the
// producer's open transaction (kernel.TxnMarker). Markers are written one batch per
// partition per marker, all partitions appended before waiting for the HW to pass
// them.

package replication

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// writeTxnMarkersClaim claims the versions this file's header lists.
func writeTxnMarkersClaim(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.WriteTxnMarkers, Min: 0, Max: 2, Handler: kernel.Typed(m.handleWriteTxnMarkers)}
}

// handleWriteTxnMarkers writes COMMIT/ABORT markers for a transaction coordinator (a
// broker-to-broker request). As Kafka: ALTER or CLUSTER_ACTION on the cluster, else every
// partition answers CLUSTER_AUTHORIZATION_FAILED; a partition missing from metadata
// answers UNKNOWN_TOPIC_OR_PARTITION, one this node does not lead
// NOT_LEADER_OR_FOLLOWER; the log's producer checks answer INVALID_PRODUCER_EPOCH (an
// epoch older than the producer's) and TRANSACTION_COORDINATOR_FENCED (a coordinator
// epoch older than the producer's last marker's).
func (m *Module) handleWriteTxnMarkers(ctx context.Context, req *kernel.Request, r *kmsg.WriteTxnMarkersRequest) (kernel.Response, error) {
	resp := r.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	// Alter on the cluster (an admin aborting a hanging transaction, KIP-664) or
	// ClusterAction (a transaction coordinator).
	allowed := req.Allowed(ctx, kernel.OpAlter, kernel.ResCluster, kernel.ClusterResourceName) ||
		req.Allowed(ctx, kernel.OpClusterAction, kernel.ResCluster, kernel.ClusterResourceName)
	im := m.meta.Image()
	type slot struct{ mi, ti, pi int }
	var ws []markerWrite
	var slots []slot
	resp.Markers = make([]kmsg.WriteTxnMarkersResponseMarker, len(r.Markers))
	for mi := range r.Markers {
		in := &r.Markers[mi]
		out := &resp.Markers[mi]
		out.Default()
		out.ProducerID = in.ProducerID
		out.Topics = make([]kmsg.WriteTxnMarkersResponseMarkerTopic, len(in.Topics))
		for ti := range in.Topics {
			t := &in.Topics[ti]
			ot := &out.Topics[ti]
			ot.Default()
			ot.Topic = t.Topic
			ot.Partitions = make([]kmsg.WriteTxnMarkersResponseMarkerTopicPartition, len(t.Partitions))
			for pi, part := range t.Partitions {
				op := &ot.Partitions[pi]
				op.Default()
				op.Partition = part
				switch {
				case !allowed:
					op.ErrorCode = kerr.ClusterAuthorizationFailed.Code
				case im.Partition(t.Topic, part) == nil:
					op.ErrorCode = kerr.UnknownTopicOrPartition.Code
				default:
					ws = append(ws, markerWrite{
						tp: kernel.TopicPartition{Topic: t.Topic, Partition: part},
						m: kernel.TxnMarker{ProducerID: in.ProducerID, ProducerEpoch: in.ProducerEpoch,
							CoordinatorEpoch: in.CoordinatorEpoch, Commit: in.Committed,
							TransactionVersion: int16(in.TransactionVersion)},
					})
					slots = append(slots, slot{mi, ti, pi})
				}
			}
		}
	}
	if len(ws) > 0 {
		if err := m.writeMarkers(ctx, ws, markerTimeout); err != nil && err != errStopped {
			return kernel.Response{}, err // the request was cancelled: the connection is going away
		}
	}
	for i := range ws {
		s := slots[i]
		resp.Markers[s.mi].Topics[s.ti].Partitions[s.pi].ErrorCode = m.storageCode(nil, ws[i].tp, "write txn marker", ws[i].err)
	}
	return kernel.Reply(resp), nil
}
