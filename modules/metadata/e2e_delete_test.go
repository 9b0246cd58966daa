package metadata_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/testbroker"
)

// DeleteTopics v6+ names each topic by name or by id, not both (as Kafka): a request
// with a name and another topic's id must not delete the named topic.
func TestE2EDeleteTopicsNameAndID(t *testing.T) {
	b := testbroker.Start(t)
	adm := b.Admin(t)
	cl := b.Client(t)
	ctx := testCtx(t)
	created, err := adm.CreateTopics(ctx, 1, 1, nil, "keep", "other")
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrDeleteTopicsRequest()
	both := kmsg.NewDeleteTopicsRequestTopic()
	name := "keep"
	both.Topic, both.TopicID = &name, created["other"].ID
	neither := kmsg.NewDeleteTopicsRequestTopic()
	req.Topics = append(req.Topics, both, neither)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for i, rt := range resp.Topics {
		if rt.ErrorCode != kerr.InvalidRequest.Code {
			t.Errorf("entry %d: code %d, want INVALID_REQUEST", i, rt.ErrorCode)
		}
	}
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !topics.Has("keep") || !topics.Has("other") {
		t.Fatalf("topics after a refused delete: %v", topics.Names())
	}
}
