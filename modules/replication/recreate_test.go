package replication

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// slowRemove is a storage whose Remove waits for release once entered is signalled.
type slowRemove struct {
	kernel.Storage
	entered chan struct{}
	release chan struct{}
}

func (s *slowRemove) Remove(tp kernel.TopicPartition) error {
	close(s.entered)
	<-s.release
	return s.Storage.Remove(tp)
}

// A topic re-created under the same name: while the old incarnation's log is being
// removed, a produce that opens the new incarnation on demand must not be handed the
// old, still open Log (Storage.Open returns the open Log of a name): its acknowledged
// records would be deleted with the old incarnation.
func TestRecreatedTopicRaceWithLazyOpen(t *testing.T) {
	h := newHarness(t, nil, topicSpec{name: "t", id: 1})
	if res := h.produce(9, 1, "t", 0, testBatch(1, "old")); res.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(res.ErrorCode))
	}
	sr := &slowRemove{Storage: h.m.storage, entered: make(chan struct{}), release: make(chan struct{})}
	h.m.storage = sr

	applied := make(chan struct{})
	go func() {
		defer close(applied)
		h.meta.publish(image(2, topicSpec{name: "t", id: 9})) // re-created: new id
	}()
	<-sr.entered // the old incarnation is being removed

	produced := make(chan kernel.Response, 1)
	go func() {
		resp, err := h.do(context.Background(), 9, produceReq(1, "t", 9, 0, testBatch(1, "new")))
		if err != nil {
			t.Error(err)
		}
		produced <- resp
	}()
	// Give the produce a chance to finish while the removal is stuck (it does when it
	// gets the old Log); either way, then let the removal go on.
	var resp kernel.Response
	got := false
	for deadline := time.Now().Add(200 * time.Millisecond); time.Now().Before(deadline) && !got; {
		select {
		case resp = <-produced:
			got = true
		default:
			time.Sleep(time.Millisecond)
		}
	}
	close(sr.release)
	<-applied
	if !got {
		resp = <-produced
	}
	pr := resp.Msg.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	if pr.ErrorCode != 0 {
		// A retriable refusal is fine; the record was not acknowledged.
		return
	}
	// Acknowledged: the record must be in the new incarnation's log.
	p := h.m.partition(kernel.TopicPartition{Topic: "t"})
	if p == nil || p.topicID != [16]byte{9} {
		t.Fatalf("partition after re-creation: %+v", p)
	}
	if leo := p.log.LogEndOffset(); leo != 1 {
		t.Fatalf("acknowledged record lost: new incarnation's log end %d, want 1", leo)
	}
	if res := h.produce(9, 1, "t", 0, testBatch(1, "more")); res.ErrorCode != 0 || res.BaseOffset != 1 {
		t.Fatalf("produce after re-creation: %v at %d", kerr.ErrorForCode(res.ErrorCode), res.BaseOffset)
	}
}
