package replication

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/kconfig"
	"github.com/sluicehq/sluice/internal/recordbatch"
)

// TestRecompressDrawsOnBudget: recompressing a produce's batches for the topic's
// compression.type reserves from queued.max.decompressed.bytes as validation does:
// with the budget held elsewhere it waits, and gives up (REQUEST_TIMED_OUT,
// retriable) when the request's context ends; with room it recompresses and gives
// the reservation back. Records already in the topic's codec reserve nothing.
func TestRecompressDrawsOnBudget(t *testing.T) {
	m := &Module{}
	budget := recordbatch.NewDecompressBudget(1 << 20)
	m.dbudget.Store(budget)
	rec := recordbatch.Record{Value: bytes.Repeat([]byte("value "), 1000)}
	records := recordbatch.Build(recordbatch.Options{Codec: recordbatch.CodecGzip, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, rec)
	info, err := recordbatch.Validate(records)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &kconfig.Topic{CompressionType: "zstd", MaxMessageBytes: 1 << 20}
	cfg.SegmentBytes = 1 << 30
	pc := produceCtx{m: m, version: 9, maxUncompressed: info.UncompressedBytes}

	hold, err := budget.Reserve(context.Background(), budget.Limit())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	pc.ctx = ctx
	var out kmsg.ProduceResponseTopicPartition
	if _, code := pc.recompress(records, cfg, &out); code != kerr.RequestTimedOut.Code || out.ErrorMessage == nil {
		t.Fatalf("budget held: code %v, message %v; want REQUEST_TIMED_OUT", kerr.ErrorForCode(code), out.ErrorMessage)
	}
	// Already zstd: nothing to reserve, so no wait even with the budget held.
	zstd := recordbatch.Build(recordbatch.Options{Codec: recordbatch.CodecZstd, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, rec)
	if res, code := pc.recompress(zstd, cfg, &out); code != 0 || &res[0] != &zstd[0] {
		t.Fatalf("records in the topic's codec: code %v", kerr.ErrorForCode(code))
	}
	hold()

	pc.ctx = context.Background()
	res, code := pc.recompress(records, cfg, &out)
	if code != 0 {
		t.Fatalf("with room: %v", kerr.ErrorForCode(code))
	}
	h, err := recordbatch.Validate(res)
	if err != nil || h.Codec() != recordbatch.CodecZstd || h.UncompressedBytes != info.UncompressedBytes {
		t.Fatalf("recompressed: %v codec %d, %d bytes", err, h.Codec(), h.UncompressedBytes)
	}
	if n := budget.InUse(); n != 0 {
		t.Fatalf("%d bytes still reserved", n)
	}
}
