// AlterReplicaLogDirs: v1-2. Moves replicas on this broker between its log dirs
// (move.go) with Kafka's answers: LOG_DIR_NOT_FOUND for a dir not in log.dirs,
// KAFKA_STORAGE_ERROR for a failed one (or a failed source, or while any dir that
// failed at start is down), REPLICA_NOT_AVAILABLE for a replica not here yet (it is
// created in that dir when it comes), INVALID_TOPIC_EXCEPTION for a name too long for
// the copy's directory; CLUSTER_AUTHORIZATION_FAILED without ALTER on the cluster.
// Not implemented: v0 (removed in Kafka 4.0); replica.alter.log.dirs.io.max.bytes.per.second
// (a move copies as fast as the disks go).

package segmentlog

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// alterReplicaLogDirsClaim claims the versions this file's header lists.
func alterReplicaLogDirsClaim(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.AlterReplicaLogDirs, Min: 1, Max: 2, Handler: kernel.Typed(m.alterReplicaLogDirs)}
}

func (m *Module) alterReplicaLogDirs(ctx context.Context, req *kernel.Request, r *kmsg.AlterReplicaLogDirsRequest) (kernel.Response, error) {
	resp := kmsg.NewPtrAlterReplicaLogDirsResponse()
	resp.SetVersion(req.Version)
	denied := !req.Allowed(ctx, kernel.OpAlter, kernel.ResCluster, kernel.ClusterResourceName)
	byTopic := map[string]int{}
	for _, d := range r.Dirs {
		for _, t := range d.Topics {
			i, ok := byTopic[t.Topic]
			if !ok {
				i = len(resp.Topics)
				byTopic[t.Topic] = i
				rt := kmsg.NewAlterReplicaLogDirsResponseTopic()
				rt.Topic = t.Topic
				resp.Topics = append(resp.Topics, rt)
			}
			for _, p := range t.Partitions {
				rp := kmsg.NewAlterReplicaLogDirsResponseTopicPartition()
				rp.Partition = p
				if denied {
					rp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
				} else {
					rp.ErrorCode = m.dirs.alter(kernel.TopicPartition{Topic: t.Topic, Partition: p}, d.Dir)
				}
				resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
			}
		}
	}
	return kernel.Reply(resp), nil
}
