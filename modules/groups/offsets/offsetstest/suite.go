package offsetstest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/modules/groups/offsets"
)

// Run runs the suite; open returns a fresh, empty store (Run closes it).
func Run(t *testing.T, open func(t *testing.T) offsets.View) {
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, offsets.View)
	}{
		{"Empty", testEmpty},
		{"ApplyAndRead", testApplyAndRead},
		{"SkipApplied", testSkipApplied},
		{"Tombstones", testTombstones},
		{"Reapply", testReapply},
		{"Marker", testMarker},
		{"AllOrNone", testAllOrNone},
		{"UnreadKeyVersion", testUnreadKeyVersion},
		{"PartitionsIndependent", testPartitionsIndependent},
		{"Closed", testClosed},
		{"Hammer", testHammer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := open(t)
			t.Cleanup(func() { _ = v.Close() })
			tc.fn(t, v)
		})
	}
}

// commit is an offset commit record of group/topic/partition at log offset at.
func commit(group, topic string, partition int32, offset, at int64) offsets.Record {
	return offsets.Record{
		Key:    offsets.EncodeOffsetKey(group, topic, partition),
		Value:  offsets.EncodeOffsetValue(offsets.Committed{Offset: offset, LeaderEpoch: 3, Metadata: "m", CommitTimestamp: 1000 + at}),
		Offset: at,
	}
}

// tombstone deletes an offset (topic != "") or a group's metadata at log offset at.
func tombstone(group, topic string, partition int32, at int64) offsets.Record {
	k := offsets.EncodeGroupKey(group)
	if topic != "" {
		k = offsets.EncodeOffsetKey(group, topic, partition)
	}
	return offsets.Record{Key: k, Offset: at}
}

// groupMeta is a group metadata record with one member at log offset at.
func groupMeta(group string, generation int32, at int64) offsets.Record {
	md := offsets.GroupMetadata{ProtocolType: "consumer", Generation: generation, Protocol: "range", Leader: "m1",
		CurrentStateTimestamp: 5, Members: []offsets.Member{{MemberID: "m1", ClientID: "c", ClientHost: "/h",
			RebalanceTimeoutMs: 10, SessionTimeoutMs: 20, Subscription: []byte{1}, Assignment: []byte{2}}}}
	return offsets.Record{Key: offsets.EncodeGroupKey(group), Value: offsets.EncodeGroupMetadataValue(md), Offset: at}
}

func mustApply(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// wantOffset checks the committed offset of group/topic/partition (-1: none).
func wantOffset(t *testing.T, v offsets.View, group, topic string, partition int32, want int64) {
	t.Helper()
	c, ok, err := v.Fetch(group, topic, partition)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case want < 0 && ok:
		t.Fatalf("%s/%s/%d: got offset %d, want none", group, topic, partition, c.Offset)
	case want >= 0 && (!ok || c.Offset != want):
		t.Fatalf("%s/%s/%d: got %+v (found %v), want offset %d", group, topic, partition, c, ok, want)
	}
}

func wantGroups(t *testing.T, v offsets.View, want ...string) {
	t.Helper()
	got, err := v.Groups()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || (len(want) > 0 && !slices.Equal(got, want)) {
		t.Fatalf("groups %q, want %q", got, want)
	}
}

func testEmpty(t *testing.T, v offsets.View) {
	if got := v.AppliedOffset(0); got != -1 {
		t.Fatalf("applied offset %d, want -1", got)
	}
	if _, ok := v.TxnReplayStart(0); ok {
		t.Fatal("txn replay start on an empty store")
	}
	wantOffset(t, v, "g", "t", 0, -1)
	offs, err := v.FetchGroup("g")
	if err != nil || offs == nil || len(offs) != 0 {
		t.Fatalf("FetchGroup = %v, %v; want an empty map", offs, err)
	}
	if _, ok, err := v.GroupMetadata("g"); ok || err != nil {
		t.Fatalf("GroupMetadata: found %v, %v", ok, err)
	}
	wantGroups(t, v)
	// An empty batch changes nothing.
	mustApply(t, v.ApplyBatch(0, nil))
	if got := v.AppliedOffset(0); got != -1 {
		t.Fatalf("applied offset %d after an empty batch", got)
	}
}

func testApplyAndRead(t *testing.T, v offsets.View) {
	mustApply(t, v.ApplyBatch(2, []offsets.Record{
		commit("g1", "t", 0, 10, 0), commit("g1", "t", 1, 11, 1), groupMeta("g2", 7, 2), commit("g1", "t", 0, 12, 3),
	}))
	if got := v.AppliedOffset(2); got != 3 {
		t.Fatalf("applied offset %d, want 3", got)
	}
	wantOffset(t, v, "g1", "t", 0, 12) // the later commit wins
	wantOffset(t, v, "g1", "t", 1, 11)
	c, _, _ := v.Fetch("g1", "t", 1)
	if want := (offsets.Committed{Offset: 11, LeaderEpoch: 3, Metadata: "m", CommitTimestamp: 1001}); c != want {
		t.Fatalf("fetched %+v, want %+v", c, want)
	}
	offs, err := v.FetchGroup("g1")
	if err != nil || len(offs) != 2 || offs[offsets.TopicPartition{Topic: "t", Partition: 0}].Offset != 12 {
		t.Fatalf("FetchGroup = %v, %v", offs, err)
	}
	md, ok, err := v.GroupMetadata("g2")
	if err != nil || !ok || md.Generation != 7 || len(md.Members) != 1 || md.Members[0].MemberID != "m1" ||
		string(md.Members[0].Assignment) != "\x02" {
		t.Fatalf("GroupMetadata = %+v, %v, %v", md, ok, err)
	}
	wantGroups(t, v, "g1", "g2")
}

func testSkipApplied(t *testing.T, v offsets.View) {
	mustApply(t, v.ApplyBatch(0, []offsets.Record{commit("g", "t", 0, 5, 4)}))
	// A replay of what was applied (and a batch straddling it) skips the old records.
	mustApply(t, v.ApplyBatch(0, []offsets.Record{commit("g", "t", 0, 1, 3), commit("g", "t", 0, 2, 4)}))
	wantOffset(t, v, "g", "t", 0, 5)
	mustApply(t, v.ApplyBatch(0, []offsets.Record{commit("g", "t", 0, 3, 4), commit("g", "t", 1, 9, 5)}))
	wantOffset(t, v, "g", "t", 0, 5)
	wantOffset(t, v, "g", "t", 1, 9)
	if got := v.AppliedOffset(0); got != 5 {
		t.Fatalf("applied offset %d, want 5", got)
	}
}

func testTombstones(t *testing.T, v offsets.View) {
	mustApply(t, v.ApplyBatch(0, []offsets.Record{commit("g", "t", 0, 5, 0), commit("g", "t", 1, 6, 1), groupMeta("g", 1, 2), groupMeta("h", 1, 3)}))
	mustApply(t, v.ApplyBatch(0, []offsets.Record{tombstone("g", "t", 0, 4), tombstone("h", "", 0, 5), tombstone("x", "t", 0, 6)}))
	wantOffset(t, v, "g", "t", 0, -1)
	wantOffset(t, v, "g", "t", 1, 6)
	if _, ok, _ := v.GroupMetadata("h"); ok {
		t.Fatal("group metadata of h survived its tombstone")
	}
	wantGroups(t, v, "g")
	mustApply(t, v.ApplyBatch(0, []offsets.Record{tombstone("g", "t", 1, 7), tombstone("g", "", 0, 8)}))
	wantGroups(t, v)
	if got := v.AppliedOffset(0); got != 8 {
		t.Fatalf("applied offset %d, want 8", got)
	}
}

func testReapply(t *testing.T, v offsets.View) {
	mustApply(t, v.ApplyBatch(0, []offsets.Record{commit("g", "t", 0, 5, 10)}))
	// A replay from below the applied offset applies every record, in log order, and
	// leaves the applied offset where it was.
	mustApply(t, v.Reapply(0, []offsets.Record{commit("g", "t", 0, 1, 2), commit("g", "t", 1, 2, 3)}))
	wantOffset(t, v, "g", "t", 0, 1)
	wantOffset(t, v, "g", "t", 1, 2)
	if got := v.AppliedOffset(0); got != 10 {
		t.Fatalf("applied offset %d after a reapply below it, want 10", got)
	}
	mustApply(t, v.Reapply(0, []offsets.Record{commit("g", "t", 0, 7, 12)}))
	if got := v.AppliedOffset(0); got != 12 {
		t.Fatalf("applied offset %d, want 12", got)
	}
}

func testMarker(t *testing.T, v offsets.View) {
	mustApply(t, v.ApplyBatch(0, []offsets.Record{commit("g", "t", 0, 1, 0)}))
	mustApply(t, v.SetTxnReplayStart(0, 1))
	if o, ok := v.TxnReplayStart(0); !ok || o != 1 {
		t.Fatalf("txn replay start %d %v, want 1", o, ok)
	}
	// The transaction's commit at offset 1 takes effect at its marker, offset 3, and a
	// later transaction (from 2) is still pending.
	mustApply(t, v.ApplyMarker(0, []offsets.Record{commit("g", "t", 0, 9, 1)}, 3, 2))
	wantOffset(t, v, "g", "t", 0, 9)
	if got := v.AppliedOffset(0); got != 3 {
		t.Fatalf("applied offset %d, want the marker's 3", got)
	}
	if o, ok := v.TxnReplayStart(0); !ok || o != 2 {
		t.Fatalf("txn replay start %d %v, want 2", o, ok)
	}
	// An abort: nothing applies, the applied offset moves to the marker, none pending.
	mustApply(t, v.ApplyMarker(0, nil, 5, -1))
	if got := v.AppliedOffset(0); got != 5 {
		t.Fatalf("applied offset %d, want 5", got)
	}
	if _, ok := v.TxnReplayStart(0); ok {
		t.Fatal("txn replay start survived its clearing")
	}
	// A marker below the applied offset does not move it back.
	mustApply(t, v.ApplyMarker(0, nil, 4, 7))
	if got := v.AppliedOffset(0); got != 5 {
		t.Fatalf("applied offset %d, want 5", got)
	}
	mustApply(t, v.SetTxnReplayStart(0, -1))
	if _, ok := v.TxnReplayStart(0); ok {
		t.Fatal("txn replay start survived SetTxnReplayStart(-1)")
	}
}

func testAllOrNone(t *testing.T, v offsets.View) {
	for _, tc := range []struct {
		name string
		recs []offsets.Record
	}{
		{"offsets not ascending", []offsets.Record{commit("g", "t", 0, 1, 5), commit("g", "t", 1, 1, 5)}},
		{"bad offset value", []offsets.Record{commit("g", "t", 0, 1, 5), {Key: offsets.EncodeOffsetKey("g", "t", 1), Value: []byte{0, 9, 1}, Offset: 6}}},
		{"bad group value", []offsets.Record{commit("g", "t", 0, 1, 5), {Key: offsets.EncodeGroupKey("g"), Value: []byte{0, 3}, Offset: 6}}},
		{"bad key", []offsets.Record{commit("g", "t", 0, 1, 5), {Key: []byte{0}, Value: []byte{1}, Offset: 6}}},
	} {
		if err := v.ApplyBatch(0, tc.recs); err == nil {
			t.Fatalf("%s: applied", tc.name)
		}
		wantOffset(t, v, "g", "t", 0, -1)
		if got := v.AppliedOffset(0); got != -1 {
			t.Fatalf("%s: applied offset %d after a failed batch", tc.name, got)
		}
	}
}

func testUnreadKeyVersion(t *testing.T, v offsets.View) {
	// A KIP-848 record (key version 3 and up) only advances the applied offset.
	kip848 := offsets.Record{Key: []byte{0, 11, 0, 1, 'g'}, Value: []byte{0, 0, 1}, Offset: 4}
	mustApply(t, v.ApplyBatch(0, []offsets.Record{commit("g", "t", 0, 1, 3), kip848}))
	if got := v.AppliedOffset(0); got != 4 {
		t.Fatalf("applied offset %d, want 4", got)
	}
	wantGroups(t, v, "g")
}

func testPartitionsIndependent(t *testing.T, v offsets.View) {
	mustApply(t, v.ApplyBatch(0, []offsets.Record{commit("a", "t", 0, 1, 100)}))
	// Partition 1 is behind partition 0: its records are not skipped.
	mustApply(t, v.ApplyBatch(1, []offsets.Record{commit("b", "t", 0, 2, 5)}))
	mustApply(t, v.SetTxnReplayStart(1, 3))
	wantOffset(t, v, "b", "t", 0, 2)
	if a, b := v.AppliedOffset(0), v.AppliedOffset(1); a != 100 || b != 5 {
		t.Fatalf("applied offsets %d, %d; want 100, 5", a, b)
	}
	if _, ok := v.TxnReplayStart(0); ok {
		t.Fatal("partition 1's txn replay start showed on partition 0")
	}
}

func testClosed(t *testing.T, v offsets.View) {
	mustApply(t, v.ApplyBatch(0, []offsets.Record{commit("g", "t", 0, 1, 0)}))
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	_, _, err1 := v.Fetch("g", "t", 0)
	_, err2 := v.FetchGroup("g")
	_, _, err3 := v.GroupMetadata("g")
	_, err4 := v.Groups()
	err5 := v.ApplyBatch(0, []offsets.Record{commit("g", "t", 0, 2, 1)})
	for i, err := range []error{err1, err2, err3, err4, err5} {
		if !errors.Is(err, offsets.ErrClosed) {
			t.Fatalf("call %d after Close: %v, want ErrClosed", i+1, err)
		}
	}
}

func testHammer(t *testing.T, v offsets.View) {
	const writers, batches = 4, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(2)
		go func() {
			defer wg.Done()
			p := int32(w)
			for i := range batches {
				at := int64(2 * i)
				recs := []offsets.Record{commit(fmt.Sprint("g", w), "t", 0, at, at), commit(fmt.Sprint("g", w), "t", 1, at, at+1)}
				if err := v.ApplyBatch(p, recs); err != nil {
					t.Error(err)
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for range batches {
				if _, err := v.FetchGroup(fmt.Sprint("g", w)); err != nil {
					t.Error(err)
					return
				}
				if _, err := v.Groups(); err != nil {
					t.Error(err)
					return
				}
				_ = v.AppliedOffset(int32(w))
			}
		}()
	}
	wg.Wait()
	for w := range writers {
		if got := v.AppliedOffset(int32(w)); got != 2*batches-1 {
			t.Fatalf("partition %d applied offset %d, want %d", w, got, 2*batches-1)
		}
		wantOffset(t, v, fmt.Sprint("g", w), "t", 1, 2*batches-2)
	}
}
