package replication

import (
	"context"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/internal/testcheck"
	"github.com/sluicehq/sluice/kernel"
)

// readValues returns the record values read by ReadStable (stable) or ReadCommitted.
func readValues(t *testing.T, h *harness, tp kernel.TopicPartition, stable bool) []string {
	t.Helper()
	var vals []string
	fn := func(batch []byte) error {
		_, err := recordbatch.Records(batch, nil, func(r *recordbatch.Record) error {
			vals = append(vals, string(r.Value))
			return nil
		})
		return err
	}
	var err error
	if stable {
		_, err = h.m.ReadStable(context.Background(), tp, 0, fn)
	} else {
		err = h.m.ReadCommitted(context.Background(), tp, 0, fn)
	}
	if err != nil {
		t.Fatal(err)
	}
	return vals
}

// TestReadStable: ReadStable leaves out control batches and aborted transactions'
// batches and stops at the last stable offset; ReadCommitted returns every batch below
// the HW (markers included: control records have a key and a value).
func TestReadStable(t *testing.T) {
	h := newHarness(t, nil, topicSpec{name: "t", id: 1, parts: 1})
	h.m.SetTxnVerifier(&fakeVerifier{})
	tp := h.part("t", 0).tp
	txn := "tx"
	marker := func(pid int64, commit bool) {
		t.Helper()
		if err := h.m.WriteTxnMarker(context.Background(), tp, kernel.TxnMarker{ProducerID: pid, CoordinatorEpoch: 1, Commit: commit}); err != nil {
			t.Fatal(err)
		}
	}
	h.produce(9, -1, "t", 0, testBatch(1, "p0"))
	testcheck.WantCode(t, "aborted txn", h.produceTxn(&txn, "t", 0, pidBatch(7, 0, 0, true, "x1", "x2")).ErrorCode, nil)
	testcheck.WantCode(t, "committed txn", h.produceTxn(&txn, "t", 0, pidBatch(8, 0, 0, true, "c1")).ErrorCode, nil)
	marker(7, false)
	marker(8, true)
	h.produce(9, -1, "t", 0, testBatch(1, "p1"))
	// An open transaction pins the LSO: its batch and everything after stay unread.
	testcheck.WantCode(t, "open txn", h.produceTxn(&txn, "t", 0, pidBatch(7, 0, 2, true, "o1")).ErrorCode, nil)
	h.produce(9, -1, "t", 0, testBatch(1, "p2"))

	if got, want := readValues(t, h, tp, true), []string{"p0", "c1", "p1"}; !slices.Equal(got, want) {
		t.Fatalf("ReadStable = %q, want %q", got, want)
	}
	if got := readValues(t, h, tp, false); len(got) != 9 { // 7 data records, 2 markers
		t.Fatalf("ReadCommitted = %q, want all 9 records", got)
	}
	// The read's end is the LSO (the open transaction's first offset), past the
	// aborted batch and the markers it did not show.
	if end, err := h.m.ReadStable(context.Background(), tp, 0, func([]byte) error { return nil }); err != nil || end != 7 {
		t.Fatalf("ReadStable end = %d, %v; want 7 (the open transaction's first offset)", end, err)
	}
	marker(7, true)
	if end, err := h.m.ReadStable(context.Background(), tp, 0, func([]byte) error { return nil }); err != nil || end != h.part("t", 0).log.LogEndOffset() {
		t.Fatalf("ReadStable end = %d, %v; want the log end %d", end, err, h.part("t", 0).log.LogEndOffset())
	}
	if got, want := readValues(t, h, tp, true), []string{"p0", "c1", "p1", "o1", "p2"}; !slices.Equal(got, want) {
		t.Fatalf("after the commit ReadStable = %q, want %q", got, want)
	}
}
