package replication

import (
	"context"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// sourceTransformer records the source each TransformProduce call gets and passes the
// records through.
type sourceTransformer struct {
	mu  sync.Mutex
	got []kernel.ProduceSource
}

func (*sourceTransformer) Bound(topic string) bool { return topic == "t" }

func (s *sourceTransformer) TransformProduce(_ context.Context, _ kernel.TopicPartition, src kernel.ProduceSource, records []byte) ([]byte, error) {
	s.mu.Lock()
	s.got = append(s.got, src)
	s.mu.Unlock()
	return append([]byte(nil), records...), nil
}

// TestTransformSource: the transformer sees the principal of the request's connection
// and the request's client id.
func TestTransformSource(t *testing.T) {
	st := &sourceTransformer{}
	h := newHarness(t, nil, topicSpec{name: "t", id: 1})
	h.m.SetProduceTransformer(st)
	alice := kernel.Principal{Type: "User", Name: "alice"}
	claim := h.ctx.handlers[kmsg.Produce.Int16()]
	for _, tc := range []struct {
		p        kernel.Principal
		clientID string
	}{
		{alice, "app-1"},
		{kernel.Anonymous, ""},
	} {
		body := produceReq(1, "t", 1, 0, testBatch(1, "abc"))
		body.SetVersion(9)
		resp, err := claim.h(context.Background(), &kernel.Request{Key: body.Key(), Version: 9, Body: body, ClientID: tc.clientID,
			Conn: &kernel.ConnInfo{Listener: "PLAINTEXT", Principal: tc.p}, Authorizer: kernel.AllowAll{}})
		if err != nil {
			t.Fatal(err)
		}
		if c := resp.Msg.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; c != 0 {
			t.Fatal(kerr.ErrorForCode(c))
		}
	}
	want := []kernel.ProduceSource{{Principal: alice, ClientID: "app-1"}, {Principal: kernel.Anonymous}}
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.got) != len(want) || st.got[0] != want[0] || st.got[1] != want[1] {
		t.Fatalf("sources %+v, want %+v", st.got, want)
	}
}
