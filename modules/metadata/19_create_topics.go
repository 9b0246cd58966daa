// CreateTopics: v0-v7. Not implemented: create.topic.policy.class.name (POLICY_VIOLATION).

package metadata

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

func (m *Module) handleCreateTopics(ctx context.Context, req *kernel.Request) (kernel.Response, error) {
	r, ok := req.Body.(*kmsg.CreateTopicsRequest)
	if !ok {
		return kernel.Response{}, fmt.Errorf("create topics: unexpected body %T", req.Body)
	}
	return kernel.Reply(m.createTopicsResp(ctx, req, r)), nil
}
