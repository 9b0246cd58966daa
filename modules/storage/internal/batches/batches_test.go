package batches

import (
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
)

func TestShouldRoll(t *testing.T) {
	cfg := kernel.LogConfig{SegmentBytes: 100, SegmentMs: 1000}
	tests := []struct {
		name string
		cfg  kernel.LogConfig
		s    RollInfo
		n    int64
		maxT int64
		last int64
		now  int64
		want bool
	}{
		{"empty never rolls", cfg, RollInfo{Size: 0, FirstBatchTs: -1}, 1000, 0, 0, 0, false},
		{"fits", cfg, RollInfo{Size: 50, FirstBatchTs: 10}, 50, 10, 1, 0, false},
		{"bytes", cfg, RollInfo{Size: 51, FirstBatchTs: 10}, 50, 10, 1, 0, true},
		{"time from first batch", cfg, RollInfo{Size: 1, FirstBatchTs: 10}, 1, 1011, 1, 0, true},
		{"time not yet", cfg, RollInfo{Size: 1, FirstBatchTs: 10}, 1, 1010, 1, 0, false},
		{"time from creation", cfg, RollInfo{Size: 1, FirstBatchTs: -1, CreatedMs: 5}, 1, -1, 1, 1006, true},
		{"relative offset overflow", cfg, RollInfo{Size: 1, FirstBatchTs: 10}, 1, 10, 1 << 32, 0, true},
		{"jitter shortens", kernel.LogConfig{SegmentMs: 1000, SegmentJitterMs: 1000}, RollInfo{Size: 1, FirstBatchTs: 0, BaseOffset: 1}, 1, 999, 1, 0, jitter(1000, 1) > 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ShouldRoll(&tc.cfg, tc.s, tc.n, tc.maxT, tc.last, tc.now); got != tc.want {
				t.Fatalf("ShouldRoll = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDeletable(t *testing.T) {
	segs := []SegmentSummary{{Size: 10, MaxTs: 100, Next: 5}, {Size: 10, MaxTs: 200, Next: 10}, {Size: 10, MaxTs: 50, Next: 15}, {Size: 10, MaxTs: 300, Next: 20}}
	tests := []struct {
		name     string
		cfg      kernel.LogConfig
		logStart int64
		now      int64
		want     int
	}{
		{"nothing", kernel.LogConfig{RetentionMs: -1, RetentionBytes: -1}, 0, 1000, 0},
		{"below log start", kernel.LogConfig{RetentionMs: -1, RetentionBytes: -1}, 10, 1000, 2},
		{"never the active", kernel.LogConfig{RetentionMs: -1, RetentionBytes: -1}, 20, 1000, 3},
		{"time stops at a young segment", kernel.LogConfig{RetentionMs: 850, RetentionBytes: -1}, 0, 1000, 1},
		{"size", kernel.LogConfig{RetentionMs: -1, RetentionBytes: 25}, 0, 1000, 1},
		{"size zero takes the active", kernel.LogConfig{RetentionMs: -1, RetentionBytes: 0}, 0, 1000, 4},
		{"size below the active keeps it", kernel.LogConfig{RetentionMs: -1, RetentionBytes: 5}, 0, 1000, 3},
		{"time takes an old active", kernel.LogConfig{RetentionMs: 10, RetentionBytes: -1}, 0, 1000, 4},
		{"delete policy: time", kernel.LogConfig{RetentionMs: 850, RetentionBytes: -1, CleanupPolicy: "delete"}, 0, 1000, 1},
		{"delete policy: size", kernel.LogConfig{RetentionMs: -1, RetentionBytes: 0, CleanupPolicy: "delete"}, 0, 1000, 4},
		{"compact,delete: time", kernel.LogConfig{RetentionMs: 850, RetentionBytes: -1, CleanupPolicy: "compact,delete"}, 0, 1000, 1},
		{"compact,delete: size", kernel.LogConfig{RetentionMs: -1, RetentionBytes: 25, CleanupPolicy: "compact,delete"}, 0, 1000, 1},
		{"compact: no time retention", kernel.LogConfig{RetentionMs: 10, RetentionBytes: -1, CleanupPolicy: "compact"}, 0, 1000, 0},
		{"compact: no size retention", kernel.LogConfig{RetentionMs: -1, RetentionBytes: 0, CleanupPolicy: "compact"}, 0, 1000, 0},
		{"compact: log start still applies", kernel.LogConfig{RetentionMs: 10, RetentionBytes: 0, CleanupPolicy: "compact"}, 10, 1000, 2},
		{"compact: log start never the active", kernel.LogConfig{RetentionMs: 10, RetentionBytes: 0, CleanupPolicy: "compact"}, 20, 1000, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Deletable(&tc.cfg, segs, tc.logStart, tc.now); got != tc.want {
				t.Fatalf("Deletable = %d, want %d", got, tc.want)
			}
		})
	}
	if got := Deletable(&kernel.LogConfig{RetentionMs: 10, RetentionBytes: -1}, segs[:1], 0, 1000); got != 1 {
		t.Fatalf("Deletable of an old only segment = %d, want 1", got)
	}
	empty := []SegmentSummary{{Size: 10, MaxTs: 100, Next: 5}, {Size: 0, MaxTs: -1, Next: 5}}
	if got := Deletable(&kernel.LogConfig{RetentionMs: 10, RetentionBytes: 0}, empty, 0, 1000); got != 1 {
		t.Fatalf("Deletable with an empty active = %d, want 1", got)
	}
	if got := Deletable(&kernel.LogConfig{RetentionMs: 10, RetentionBytes: 0}, empty[1:], 5, 1000); got != 0 {
		t.Fatalf("Deletable of an only empty segment = %d, want 0", got)
	}
}

func TestFirstAtOrAfter(t *testing.T) {
	recs := []recordbatch.Record{
		{TimestampDelta: 0, OffsetDelta: 0, Value: []byte("a")},
		{TimestampDelta: 5, OffsetDelta: 1, Value: []byte("b")},
		{TimestampDelta: 3, OffsetDelta: 2, Value: []byte("c")},
		{TimestampDelta: 9, OffsetDelta: 3, Value: []byte("d")},
	}
	for _, codec := range []int{recordbatch.CodecNone, recordbatch.CodecGzip, recordbatch.CodecSnappy, recordbatch.CodecLZ4, recordbatch.CodecZstd} {
		batch := recordbatch.Build(recordbatch.Options{BaseOffset: 100, Codec: codec, BaseTimestamp: 1000, ProducerID: -1, BaseSequence: -1}, recs...)
		h, err := recordbatch.ParseHeader(batch)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			ts, minOff      int64
			wantOff, wantTs int64
			ok              bool
		}{
			{0, 0, 100, 1000, true},
			{1004, 0, 101, 1005, true},
			{1006, 0, 103, 1009, true},
			{1003, 102, 102, 1003, true},
			{1010, 0, 0, 0, false},
			{0, 104, 0, 0, false},
		} {
			t.Run(fmt.Sprintf("codec%d/ts%d/min%d", codec, tc.ts, tc.minOff), func(t *testing.T) {
				off, ts, ok := FirstAtOrAfter(batch, h, tc.ts, tc.minOff)
				if ok != tc.ok || (ok && (off != tc.wantOff || ts != tc.wantTs)) {
					t.Fatalf("= %d %d %v; want %d %d %v", off, ts, ok, tc.wantOff, tc.wantTs, tc.ok)
				}
			})
		}
	}
}
