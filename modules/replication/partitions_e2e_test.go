package replication_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/internal/testbroker"
	"github.com/sluicehq/sluice/kernel"
)

// TestE2EPartitionsAppendReadCommitted appends batches through the kernel.Partitions
// seam of a running broker, reads them back with ReadCommitted and with a consumer.
func TestE2EPartitionsAppendReadCommitted(t *testing.T) {
	b := testbroker.Start(t)
	createTopic(t, b, "seam", 1, nil)
	parts, ok := b.Kernel.Module("replication").(kernel.Partitions)
	if !ok {
		t.Fatalf("replication module %T is not a kernel.Partitions", b.Kernel.Module("replication"))
	}
	ctx := testCtx(t)
	tp := kernel.TopicPartition{Topic: "seam"}
	epoch, leads := parts.Leader(tp)
	if !leads || epoch < 0 {
		t.Fatalf("Leader: %d %v", epoch, leads)
	}

	var want [][]byte
	var values []string
	next := int64(0)
	for i := range 5 {
		recs := make([]recordbatch.Record, i+1)
		for j := range recs {
			v := fmt.Sprintf("v%d-%d", i, j)
			values = append(values, v)
			recs[j] = recordbatch.Record{OffsetDelta: int32(j), Key: []byte("k"), Value: []byte(v)}
		}
		batch := recordbatch.Build(recordbatch.Options{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, BaseTimestamp: 1_700_000_000_000}, recs...)
		in := batch
		if i == 4 { // two batches in one Append
			extra := recordbatch.Build(recordbatch.Options{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, BaseTimestamp: 1_700_000_000_000}, recordbatch.Record{Value: []byte("last")})
			values = append(values, "last")
			in = append(bytes.Clone(batch), extra...)
			want = append(want, batch, extra)
		} else {
			want = append(want, batch)
		}
		res, err := parts.Append(ctx, tp, in)
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if res.BaseOffset != next {
			t.Fatalf("append %d: base %d, want %d", i, res.BaseOffset, next)
		}
		next = res.LastOffset + 1
	}

	var got [][]byte
	err := parts.ReadCommitted(ctx, tp, 0, func(batch []byte) error {
		got = append(got, bytes.Clone(batch))
		return nil
	})
	if err != nil || len(got) != len(want) {
		t.Fatalf("read committed: %d batches, %v", len(got), err)
	}
	off := int64(0)
	for i, g := range got {
		h, err := recordbatch.ParseHeader(g)
		if err != nil {
			t.Fatal(err)
		}
		if h.BaseOffset != off || h.PartitionLeaderEpoch != epoch {
			t.Fatalf("batch %d: base %d epoch %d, want %d %d", i, h.BaseOffset, h.PartitionLeaderEpoch, off, epoch)
		}
		off = h.LastOffset() + 1
		// Equal but for the base offset and leader epoch fields (outside the CRC).
		if !bytes.Equal(g[8:12], want[i][8:12]) || !bytes.Equal(g[recordbatch.OffLeaderEpoch+4:], want[i][recordbatch.OffLeaderEpoch+4:]) {
			t.Fatalf("batch %d differs", i)
		}
	}
	if off != next {
		t.Fatalf("read to %d, appended to %d", off, next)
	}

	recs := consumeN(t, b, "seam", len(values))
	for i, r := range recs {
		if string(r.Value) != values[i] || r.Offset != int64(i) {
			t.Fatalf("record %d: offset %d value %q, want %q", i, r.Offset, r.Value, values[i])
		}
	}

	if _, err := parts.Append(ctx, kernel.TopicPartition{Topic: "unknown"}, want[0]); !errors.Is(err, kernel.ErrNotLeader) {
		t.Fatalf("unknown topic: %v", err)
	}
	bad := bytes.Clone(want[0])
	binary.BigEndian.PutUint32(bad[recordbatch.OffCRC:], 0)
	if _, err := parts.Append(ctx, tp, bad); !errors.Is(err, kernel.ErrCorrupt) {
		t.Fatalf("corrupt batch: %v", err)
	}
}
