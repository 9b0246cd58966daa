package replication

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
)

// BenchmarkProduceHandler: one acks=1 produce of a 10-record batch through the Produce
// handler into storage.memory.
func BenchmarkProduceHandler(b *testing.B) {
	for _, acks := range []int16{1, -1} {
		name := "acks=1"
		if acks == -1 {
			name = "acks=all"
		}
		b.Run(name, func(b *testing.B) {
			h := newHarness(b, func(m *Module) {}, topicSpec{name: "t", id: 1, configs: map[string]string{"segment.bytes": "1048576"}})
			benchProduce(b, h, acks)
		})
	}
}

// BenchmarkFetchHandler: a fetch of one partition returning 64 batches (about 50 KiB),
// encoded and released (the records are not copied).
func BenchmarkFetchHandler(b *testing.B) {
	h := newHarness(b, nil, topicSpec{name: "t", id: 1})
	for i := 0; i < 64; i++ {
		h.produce(9, 1, "t", 0, testBatch(10, "0123456789012345678901234567890123456789012345678901234567890123456789"))
	}
	ctx := context.Background()
	for _, v := range []int16{11, 12, 18} {
		b.Run("v"+string(rune('0'+v/10))+string(rune('0'+v%10)), func(b *testing.B) {
			req := fetchReq("t", 1, 0, 0)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				resp, err := h.do(ctx, v, req)
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(resp.Body.Size())
				resp.Body.Release()
			}
		})
	}
}

// BenchmarkProduceHandlerNullLog measures the handler alone: the log only counts
// offsets, so what remains is decoding-free validation (CRC, record framing), the
// partition lock, epoch stamping and the response.
func BenchmarkProduceHandlerNullLog(b *testing.B) {
	h := newHarness(b, nil)
	h.ctx.storage = nil
	ns := &nullStorage{}
	h.m.storage = ns
	h.meta.publish(image(2, topicSpec{name: "t", id: 1}))
	benchProduce(b, h, 1)
}

// benchProduce sends one 10-record batch to t-0 with acks, b.N times.
func benchProduce(b *testing.B, h *harness, acks int16) {
	batch := testBatch(10, "0123456789012345678901234567890123456789012345678901234567890123456789")
	req := produceReq(acks, "t", 1, 0, batch)
	ctx := context.Background()
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := h.do(ctx, 11, req); err != nil {
			b.Fatal(err)
		}
	}
}

type nullStorage struct{}

func (*nullStorage) Open(kernel.TopicPartition, [16]byte, kernel.LogConfig) (kernel.Log, error) {
	return &nullLog{}, nil
}
func (*nullStorage) Remove(kernel.TopicPartition) error { return nil }
func (*nullStorage) Dirs() []kernel.LogDir              { return nil }

type nullLog struct{ leo atomic.Int64 }

func (l *nullLog) AppendLeader(records []byte) (kernel.AppendResult, error) {
	var n int64
	_ = recordbatch.Split(records, func(h recordbatch.Header, _ []byte) error { n += int64(h.LastOffsetDelta) + 1; return nil })
	base := l.leo.Add(n) - n
	return kernel.AppendResult{BaseOffset: base, LastOffset: base + n - 1}, nil
}
func (l *nullLog) AppendFollower([]byte) (kernel.AppendResult, error) {
	return kernel.AppendResult{}, nil
}
func (l *nullLog) Read(int64, int64, int64, bool) (kernel.ReadResult, error) {
	return kernel.ReadResult{Release: func() {}}, nil
}
func (l *nullLog) LogStartOffset() int64                                { return 0 }
func (l *nullLog) LogEndOffset() int64                                  { return l.leo.Load() }
func (l *nullLog) OffsetForTimestamp(int64) (int64, int64, bool, error) { return 0, 0, false, nil }
func (l *nullLog) MaxTimestamp() (int64, int64, bool)                   { return 0, 0, false }
func (l *nullLog) DeleteRecordsBefore(int64) error                      { return nil }
func (l *nullLog) Truncate(int64) error                                 { return nil }
func (l *nullLog) SetConfig(kernel.LogConfig)                           {}
func (l *nullLog) Flush() error                                         { return nil }
func (l *nullLog) Size() int64                                          { return 0 }
func (l *nullLog) Close() error                                         { return nil }
func (l *nullLog) AppendProducer(b []byte, _ kernel.SeqRange) (kernel.AppendResult, error) {
	return l.AppendLeader(b)
}
func (l *nullLog) Producer(int64) (kernel.ProducerState, bool)                         { return kernel.ProducerState{}, false }
func (l *nullLog) FirstUnstableOffset() (int64, bool)                                  { return 0, false }
func (l *nullLog) AbortedTxns(dst []kernel.AbortedTxn, _, _ int64) []kernel.AbortedTxn { return dst }
func (l *nullLog) Producers() []kernel.ProducerState                                   { return nil }
func (l *nullLog) AssignEpoch(int32, int64) error                                      { return nil }
func (l *nullLog) Epochs() []kernel.EpochEntry                                         { return nil }
func (l *nullLog) EndOffsetForEpoch(int32) (int32, int64)                              { return -1, -1 }
func (l *nullLog) Reset(int64) error                                                   { return nil }
func (l *nullLog) SetHighWatermark(int64)                                              {}
func (l *nullLog) HighWatermark() int64                                                { return l.leo.Load() }
