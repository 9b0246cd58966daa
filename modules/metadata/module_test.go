package metadata

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestStartRegistersBroker(t *testing.T) {
	start := time.Now()
	m, _ := startModule(t, t.TempDir())
	if d := time.Since(start); d > time.Second {
		t.Errorf("start took %v", d)
	}
	im := m.Image()
	if len(im.ClusterID) != 22 {
		t.Errorf("cluster id %q", im.ClusterID)
	}
	if im.ControllerID != 1 || im.Brokers[1] == nil || !m.Ready() {
		t.Errorf("controller %d brokers %v ready %v", im.ControllerID, im.Brokers, m.Ready())
	}
}

func TestCreateTopicsHandler(t *testing.T) {
	m, fc := startModule(t, t.TempDir())
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 7
	for _, name := range []string{"a", "bad/name", "a"} {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 3, 1
		req.Topics = append(req.Topics, rt)
	}
	ok := kmsg.NewCreateTopicsRequestTopic()
	ok.Topic, ok.NumPartitions, ok.ReplicationFactor = "b", -1, -1
	req.Topics = append(req.Topics, ok)
	resp := call[*kmsg.CreateTopicsResponse](t, fc, nil, req)
	want := []int16{kerr.InvalidRequest.Code, kerr.InvalidTopicException.Code, kerr.InvalidRequest.Code, 0}
	for i, rt := range resp.Topics {
		if rt.ErrorCode != want[i] {
			t.Errorf("topic %d %s: code %d, want %d (%v)", i, rt.Topic, rt.ErrorCode, want[i], rt.ErrorMessage)
		}
	}
	b := m.Image().Topic("b")
	if b == nil || len(b.Partitions) != 1 || resp.Topics[3].TopicID != b.ID {
		t.Fatalf("topic b: %+v", b)
	}
}
