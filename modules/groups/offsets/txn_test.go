package offsets

import "testing"

func TestStoreTxnReplayStartAndMarkers(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	if _, ok := s.TxnReplayStart(3); ok {
		t.Fatal("replay start on a new store")
	}
	k := EncodeOffsetKey("g", "t", 0)
	v := func(o int64) []byte { return EncodeOffsetValue(Committed{Offset: o, LeaderEpoch: -1}) }
	if err := s.ApplyBatch(3, []Record{{Key: k, Value: v(1), Offset: 10}}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetTxnReplayStart(3, 5); err != nil {
		t.Fatal(err)
	}
	// ApplyBatch skips what was applied; Reapply does not, and never lowers the
	// applied offset.
	if err := s.ApplyBatch(3, []Record{{Key: k, Value: v(2), Offset: 9}}); err != nil {
		t.Fatal(err)
	}
	if c, _, _ := s.Fetch("g", "t", 0); c.Offset != 1 {
		t.Fatalf("ApplyBatch below the applied offset applied: %d", c.Offset)
	}
	if err := s.Reapply(3, []Record{{Key: k, Value: v(3), Offset: 9}}); err != nil {
		t.Fatal(err)
	}
	if c, _, _ := s.Fetch("g", "t", 0); c.Offset != 3 || s.AppliedOffset(3) != 10 {
		t.Fatalf("Reapply: offset %d applied %d", c.Offset, s.AppliedOffset(3))
	}
	// A marker applies its records wherever they are, moves the applied offset to
	// itself and sets the replay start.
	if err := s.ApplyMarker(3, []Record{{Key: k, Value: v(4), Offset: 6}}, 12, 8); err != nil {
		t.Fatal(err)
	}
	if c, _, _ := s.Fetch("g", "t", 0); c.Offset != 4 || s.AppliedOffset(3) != 12 {
		t.Fatalf("ApplyMarker: offset %d applied %d", c.Offset, s.AppliedOffset(3))
	}
	if o, ok := s.TxnReplayStart(3); !ok || o != 8 {
		t.Fatalf("replay start %d %v", o, ok)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir)
	if o, ok := s.TxnReplayStart(3); !ok || o != 8 || s.AppliedOffset(3) != 12 {
		t.Fatalf("after reopening: replay start %d %v applied %d", o, ok, s.AppliedOffset(3))
	}
	if g, err := s.Groups(); err != nil || len(g) != 1 {
		t.Fatalf("groups %v %v", g, err)
	}
	if err := s.ApplyMarker(3, nil, 11, -1); err != nil { // an ABORT: nothing, no replay start
		t.Fatal(err)
	}
	if _, ok := s.TxnReplayStart(3); ok || s.AppliedOffset(3) != 12 {
		t.Fatalf("after clearing: applied %d", s.AppliedOffset(3))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir)
	if _, ok := s.TxnReplayStart(3); ok {
		t.Fatal("cleared replay start came back")
	}
}
