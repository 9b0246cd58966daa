// DeleteTopics: v0-6. Not implemented: deleting internal topics (refused with
// INVALID_REQUEST, unlike Kafka).

package metadata

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// claimDeleteTopics is DeleteTopics's claim: the versions above and the thin handler; the work is
// in the function it calls.
func claimDeleteTopics(m *Module) kernel.Claim {
	return kernel.Claim{Key: kmsg.DeleteTopics, Min: 0, Max: 6, Handler: kernel.Typed(
		func(ctx context.Context, req *kernel.Request, r *kmsg.DeleteTopicsRequest) (kernel.Response, error) {
			return kernel.Reply(m.deleteTopicsResp(ctx, req, r)), nil
		})}
}
