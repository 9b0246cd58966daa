// Fetch: v4-v18. read_committed (isolation level 1) reads stop at the last stable
// offset and list the aborted transactions of the range read; every answer carries the
// LSO. Follower fetches (replica id / ReplicaState, CLUSTER_ACTION) read up to the log
// end and report the follower's LEO (HW, ISR); a LastFetchedEpoch (v12+) that the log's
// leader epochs contradict is answered with the diverging epoch, for followers and
// consumers. With follower_reads, rack-aware follower reads (KIP-392): a preferred
// read replica for consumers with a client rack, and follower-served consumer fetches.
// consumer_byte_rate: a consumer over its quota gets an empty answer with its throttle
// time (no partitions: nothing read), else its bytes sent are charged and the throttle
// put in the answer. Not implemented: the ReplicaState broker epoch is not checked.

package replication

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// fetchClaim claims the versions this file's header lists.
func fetchClaim(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.Fetch, Min: 4, Max: 18, Handler: kernel.Typed(m.handleFetch)}
}

func (m *Module) handleFetch(ctx context.Context, req *kernel.Request, r *kmsg.FetchRequest) (kernel.Response, error) {
	body, throttle, err := m.fetch(ctx, req, r)
	if err != nil {
		return kernel.Response{}, err
	}
	return kernel.Response{Body: body, Throttle: throttle}, nil
}
