package replication

import (
	"bytes"
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// FuzzProduceRecords feeds arbitrary bytes as a partition's records to the Produce
// handler: it must never panic, and whatever it accepts must come back from Fetch
// byte for byte (after the broker's base offset and leader epoch stamps). Seeds cover
// idempotent and transactional batches: a duplicate must answer an earlier offset.
func FuzzProduceRecords(f *testing.F) {
	one := testBatch(1, "x")
	f.Add([]byte{})
	f.Add(one[:20])
	f.Add(one)
	f.Add(append(append([]byte{}, one...), testBatch(3, "y")...))
	maxLen := append([]byte{}, one...)
	maxLen[8], maxLen[9], maxLen[10], maxLen[11] = 0x7f, 0xff, 0xff, 0xff
	f.Add(maxLen)
	// Idempotent and transactional producers' batches (sequence checks, duplicates).
	f.Add(pidBatch(5, 0, 0, false, "p"))
	f.Add(pidBatch(5, 0, 1, false, "q", "r"))
	f.Add(pidBatch(5, 1, 0, true, "t"))
	f.Add(append(pidBatch(6, 0, 0, false, "a"), pidBatch(6, 0, 1, false, "b")...))

	h := newHarness(f, nil, topicSpec{name: "t", id: 1})
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, records []byte) {
		in := append([]byte{}, records...)
		leo := h.m.partition(kernel.TopicPartition{Topic: "t"}).log.LogEndOffset()
		resp, err := h.call(t, ctx, 9, produceReq(1, "t", 1, 0, in), kernel.AllowAll{})
		if err != nil {
			t.Fatal(err)
		}
		res := resp.Msg.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
		if res.ErrorCode != 0 {
			return
		}
		if h.m.partition(kernel.TopicPartition{Topic: "t"}).log.LogEndOffset() == leo {
			// A producer's duplicate: answered with the original append, whose bytes
			// may differ from this input's.
			if res.BaseOffset >= leo {
				t.Fatalf("duplicate answered base offset %d at log end %d", res.BaseOffset, leo)
			}
			return
		}
		fresp, err := h.call(t, ctx, 12, fetchReq("t", 1, 0, res.BaseOffset), kernel.AllowAll{})
		if err != nil {
			t.Fatal(err)
		}
		out := &kmsg.FetchResponse{Version: 12}
		if err := out.ReadFrom(bodyBytes(t, fresp.Body)); err != nil {
			t.Fatal(err)
		}
		got := out.Topics[0].Partitions[0].RecordBatches
		if len(got) < len(in) || !bytes.Equal(got[:len(in)], in) {
			t.Fatalf("accepted %d bytes, fetched back %d different bytes", len(in), len(got))
		}
	})
}
