// DeleteTopics: v0-v6. Not implemented: deleting internal topics (refused with
// INVALID_REQUEST, unlike Kafka).

package metadata

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

func (m *Module) handleDeleteTopics(ctx context.Context, req *kernel.Request) (kernel.Response, error) {
	r, ok := req.Body.(*kmsg.DeleteTopicsRequest)
	if !ok {
		return kernel.Response{}, fmt.Errorf("delete topics: unexpected body %T", req.Body)
	}
	return kernel.Reply(m.deleteTopicsResp(ctx, req, r)), nil
}
