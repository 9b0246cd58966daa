package replication

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
)

// TestProduceFetchHammer: P producers × N appends on two partitions, with long-polling
// fetchers and concurrent metadata images; offsets must come out dense and in order.
func TestProduceFetchHammer(t *testing.T) {
	const producers, loops = 4, 50
	h := newHarness(t, nil, topicSpec{name: "t", id: 1, parts: 2})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := 0; i < producers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < loops; j++ {
				acks := []int16{1, -1}[j%2]
				res := h.produce(9, acks, "t", int32(i%2), testBatch(2, "h"))
				if res.ErrorCode != 0 {
					t.Errorf("produce: %d", res.ErrorCode)
					return
				}
			}
		}(i)
	}
	var fwg sync.WaitGroup
	for part := int32(0); part < 2; part++ {
		fwg.Add(1)
		go func(part int32) {
			defer fwg.Done()
			next := int64(0)
			for next < producers/2*loops*2 {
				r := fetchReq("t", 1, part, next)
				r.MinBytes, r.MaxWaitMillis = 1, 10_000
				resp, err := h.do(ctx, 12, r)
				if err != nil {
					return // cancelled
				}
				out := &kmsg.FetchResponse{Version: 12}
				if err := out.ReadFrom(bodyBytes(t, resp.Body)); err != nil {
					t.Error(err)
					return
				}
				p := out.Topics[0].Partitions[0]
				if p.ErrorCode != 0 {
					t.Errorf("fetch: %d", p.ErrorCode)
					return
				}
				err = recordbatch.Split(p.RecordBatches, func(hd recordbatch.Header, _ []byte) error {
					if hd.BaseOffset != next {
						t.Errorf("partition %d: batch at %d, want %d", part, hd.BaseOffset, next)
					}
					next = hd.LastOffset() + 1
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}(part)
	}
	for i := 0; i < 20; i++ {
		h.m.applyImage(image(uint64(2+i), topicSpec{name: "t", id: 1, parts: 2}))
	}
	wg.Wait()
	fwg.Wait()
	cancel()
}

// TestNewTopicRace: a partition is never visible in the module's map before it has
// its placement (a produce racing the subscription's apply of the image that created
// the topic would otherwise get NOT_LEADER_OR_FOLLOWER, and acks=0 data would be lost).
func TestNewTopicRace(t *testing.T) {
	h := newHarness(t, nil)
	var specs []topicSpec
	for i := 0; i < 100; i++ {
		specs = append(specs, topicSpec{name: "n" + strconv.Itoa(i), id: byte(i + 1)})
		img := image(uint64(i+2), specs...)
		h.meta.set(img)
		tp := kernel.TopicPartition{Topic: specs[i].name}
		seen := make(chan bool)
		go func() {
			for {
				h.m.mu.RLock()
				p := h.m.parts[tp]
				h.m.mu.RUnlock()
				if p != nil {
					seen <- p.IsLeader()
					return
				}
			}
		}()
		h.m.applyImage(img)
		if !<-seen {
			t.Fatalf("topic %d: partition published before its placement", i)
		}
		if res := h.produce(9, 1, specs[i].name, 0, testBatch(1, "x")); res.ErrorCode != 0 {
			t.Fatalf("topic %d: %v", i, kerr.ErrorForCode(res.ErrorCode))
		}
	}
}
