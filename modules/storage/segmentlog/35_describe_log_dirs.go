// DescribeLogDirs: v1-v4. Every log dir (log.dirs), a failed one with
// KAFKA_STORAGE_ERROR and no partitions; a replica move's copy (AlterReplicaLogDirs)
// in its destination with is_future and its offset lag. Not implemented: v0 (removed
// in Kafka 4.0), v5 cordoned log dirs (KIP-1066); offset_lag of current replicas is 0.

package segmentlog

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// describeLogDirsClaim claims the versions this file's header lists.
func describeLogDirsClaim(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.DescribeLogDirs, Min: 1, Max: 4, Handler: kernel.Typed(m.describeLogDirs)}
}

func (m *Module) describeLogDirs(ctx context.Context, req *kernel.Request, r *kmsg.DescribeLogDirsRequest) (kernel.Response, error) {
	resp := kmsg.NewPtrDescribeLogDirsResponse()
	resp.SetVersion(req.Version)
	if !req.Allowed(ctx, kernel.OpDescribe, kernel.ResCluster, kernel.ClusterResourceName) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return kernel.Reply(resp), nil
	}
	resp.Dirs = describeDirs(m.dirs.Dirs(), r.Topics)
	return kernel.Reply(resp), nil
}

// describeDirs builds the response dirs: every log dir, with all its partitions when
// topics is nil, else only the requested ones it holds.
func describeDirs(dirs []kernel.LogDir, topics []kmsg.DescribeLogDirsRequestTopic) []kmsg.DescribeLogDirsResponseDir {
	var want map[kernel.TopicPartition]bool
	if topics != nil {
		want = map[kernel.TopicPartition]bool{}
		for _, t := range topics {
			for _, p := range t.Partitions {
				want[kernel.TopicPartition{Topic: t.Topic, Partition: p}] = true
			}
		}
	}
	out := make([]kmsg.DescribeLogDirsResponseDir, 0, len(dirs))
	for _, d := range dirs {
		rd := kmsg.NewDescribeLogDirsResponseDir()
		rd.Dir = d.Path
		rd.TotalBytes, rd.UsableBytes = d.TotalBytes, d.UsableBytes
		if d.Err != nil {
			rd.ErrorCode = kerr.KafkaStorageError.Code
			out = append(out, rd)
			continue
		}
		byTopic := map[string]int{}
		for _, p := range d.Partitions {
			if want != nil && !want[p.TP] {
				continue
			}
			i, ok := byTopic[p.TP.Topic]
			if !ok {
				i = len(rd.Topics)
				byTopic[p.TP.Topic] = i
				t := kmsg.NewDescribeLogDirsResponseDirTopic()
				t.Topic = p.TP.Topic
				rd.Topics = append(rd.Topics, t)
			}
			rp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			rp.Partition, rp.Size, rp.IsFuture, rp.OffsetLag = p.TP.Partition, p.Size, p.IsFuture, p.OffsetLag
			rd.Topics[i].Partitions = append(rd.Topics[i].Partitions, rp)
		}
		out = append(out, rd)
	}
	return out
}
