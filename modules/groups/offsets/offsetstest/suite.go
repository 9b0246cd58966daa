package offsetstest

import (
	"bytes"
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
		{"GroupRecords", testGroupRecords},
		{"GroupRecordsReplay", testGroupRecordsReplay},
		{"ShareState", testShareState},
		{"ShareGroupRecords", testShareGroupRecords},
		{"DeleteGroup", testDeleteGroup},
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
	recs, err := v.GroupRecords("g")
	if err != nil || recs == nil || len(recs) != 0 {
		t.Fatalf("GroupRecords = %v, %v; want an empty slice", recs, err)
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
		{"bad consumer value", []offsets.Record{commit("g", "t", 0, 1, 5), consumerRec(offsets.ConsumerCurrentAssignmentKeyV8, "g", "m",
			offsets.EncodeConsumerTargetMetadata(offsets.ConsumerTargetMetadata{AssignmentEpoch: 1}), 6)}},
		{"consumer value version 1", []offsets.Record{commit("g", "t", 0, 1, 5), consumerRec(offsets.ConsumerTargetMetadataKeyV6, "g", "",
			[]byte{0, 1, 0, 0, 0, 1, 0}, 6)}},
		{"bad consumer key", []offsets.Record{commit("g", "t", 0, 1, 5), {Key: []byte{0, 5, 0, 1, 'g'}, Value: []byte{1}, Offset: 6}}},
	} {
		if err := v.ApplyBatch(0, tc.recs); err == nil {
			t.Fatalf("%s: applied", tc.name)
		}
		wantOffset(t, v, "g", "t", 0, -1)
		if got := v.AppliedOffset(0); got != -1 {
			t.Fatalf("%s: applied offset %d after a failed batch", tc.name, got)
		}
		wantConsumerRecords(t, v, "g")
	}
}

func testUnreadKeyVersion(t *testing.T, v offsets.View) {
	// Records of types this package does not read (4: partition metadata, 9 and 15:
	// share group partition metadata and state partition metadata, 16: regular
	// expressions) only advance the applied offset.
	sharePartitionMeta := offsets.Record{Key: []byte{0, 9, 0, 1, 'g'}, Value: []byte{0, 0, 1}, Offset: 4}
	partitionMeta := offsets.Record{Key: []byte{0, 4, 0, 1, 'h'}, Value: []byte{0, 0, 0}, Offset: 5}
	regex := offsets.Record{Key: []byte{0, 16, 0, 1, 'h', 0, 1, 'r'}, Value: []byte("not decoded"), Offset: 6}
	shareStatePartitionMeta := offsets.Record{Key: []byte{0, 15, 0, 1, 'h'}, Value: []byte("not decoded"), Offset: 7}
	mustApply(t, v.ApplyBatch(0, []offsets.Record{commit("g", "t", 0, 1, 3), sharePartitionMeta, partitionMeta, regex, shareStatePartitionMeta}))
	if got := v.AppliedOffset(0); got != 7 {
		t.Fatalf("applied offset %d, want 7", got)
	}
	wantGroups(t, v, "g")
	wantConsumerRecords(t, v, "g")
	wantConsumerRecords(t, v, "h")
}

// consumerRec is a consumer group record (value nil: a tombstone) at log offset at.
func consumerRec(version int16, group, member string, value []byte, at int64) offsets.Record {
	return offsets.Record{Key: offsets.EncodeConsumerGroupKey(version, group, member), Value: value, Offset: at}
}

// consumerRecords is one of each consumer group record type for group, with the
// epochs made from epoch, at log offsets from at on (in an order unlike the keys').
func consumerRecords(group string, epoch int32, at int64) []offsets.Record {
	topic := [16]byte{15: byte(epoch)}
	tps := []offsets.TopicPartitions{{TopicID: topic, Partitions: []int32{0, epoch}}}
	recs := []offsets.Record{
		consumerRec(offsets.ConsumerCurrentAssignmentKeyV8, group, "m2", offsets.EncodeConsumerCurrentAssignment(
			offsets.ConsumerCurrentAssignment{MemberEpoch: epoch, PreviousMemberEpoch: epoch - 1, State: 0, Assigned: tps}), 0),
		consumerRec(offsets.ConsumerGroupMetadataKeyV3, group, "", offsets.EncodeConsumerGroupMetadata(
			offsets.ConsumerGroupMetadata{Epoch: epoch, MetadataHash: int64(epoch) << 40}), 0),
		consumerRec(offsets.ConsumerMemberMetadataKeyV5, group, "m1", offsets.EncodeConsumerMemberMetadata(
			offsets.ConsumerMemberMetadata{ClientID: "c1", ClientHost: "/h", SubscribedTopicNames: []string{"t"}, RebalanceTimeoutMs: epoch}), 0),
		consumerRec(offsets.ConsumerTargetMemberKeyV7, group, "m1", offsets.EncodeConsumerTargetMember(
			offsets.ConsumerTargetMember{TopicPartitions: tps}), 0),
		consumerRec(offsets.ConsumerTargetMetadataKeyV6, group, "", offsets.EncodeConsumerTargetMetadata(
			offsets.ConsumerTargetMetadata{AssignmentEpoch: epoch}), 0),
		consumerRec(offsets.ConsumerCurrentAssignmentKeyV8, group, "m1", offsets.EncodeConsumerCurrentAssignment(
			offsets.ConsumerCurrentAssignment{MemberEpoch: epoch, PreviousMemberEpoch: epoch - 1, State: 1, PendingRevocation: tps}), 0),
		consumerRec(offsets.ConsumerMemberMetadataKeyV5, group, "m2", offsets.EncodeConsumerMemberMetadata(
			offsets.ConsumerMemberMetadata{InstanceID: "i2", ClientID: "c2", ClientHost: "/h", SubscribedTopicRegex: "t.*", RebalanceTimeoutMs: epoch}), 0),
	}
	for i := range recs {
		recs[i].Offset = at + int64(i)
	}
	return recs
}

// wantConsumerRecords checks group's group records (GroupRecords): want's keys and values
// (the last of each key wins; nil values delete), sorted by key.
func wantConsumerRecords(t *testing.T, v offsets.View, group string, want ...offsets.Record) {
	t.Helper()
	latest := map[string][]byte{}
	for _, r := range want {
		if r.Value == nil {
			delete(latest, string(r.Key))
		} else {
			latest[string(r.Key)] = r.Value
		}
	}
	keys := make([]string, 0, len(latest))
	for k := range latest {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	got, err := v.GroupRecords(group)
	if err != nil {
		t.Fatal(err)
	}
	if got == nil {
		t.Fatalf("GroupRecords(%q) is nil, want a slice", group)
	}
	if len(got) != len(keys) {
		t.Fatalf("%q: %d group records, want %d: %x", group, len(got), len(keys), got)
	}
	for i, kv := range got {
		if string(kv.Key) != keys[i] || !bytes.Equal(kv.Value, latest[keys[i]]) {
			t.Fatalf("%q: record %d is %x -> %x, want %x -> %x", group, i, kv.Key, kv.Value, keys[i], latest[keys[i]])
		}
	}
}

func testGroupRecords(t *testing.T, v offsets.View) {
	cg := consumerRecords("cg", 5, 10)
	// Neighbours: a group whose name extends "cg", one it extends, a classic group.
	cg2 := consumerRecords("cg2", 6, 20)
	c := consumerRecords("c", 7, 30)
	batch := append(append(append([]offsets.Record{commit("cg", "t", 0, 1, 0), groupMeta("classic", 1, 1)}, cg...), cg2...), c...)
	mustApply(t, v.ApplyBatch(3, batch))
	if got := v.AppliedOffset(3); got != 36 {
		t.Fatalf("applied offset %d, want 36", got)
	}
	wantConsumerRecords(t, v, "cg", cg...)
	wantConsumerRecords(t, v, "cg2", cg2...)
	wantConsumerRecords(t, v, "c", c...)
	wantConsumerRecords(t, v, "classic")
	wantConsumerRecords(t, v, "none")
	wantGroups(t, v, "c", "cg", "cg2", "classic")
	wantOffset(t, v, "cg", "t", 0, 1)

	// The caller owns what it gets.
	got, _ := v.GroupRecords("cg")
	got[0].Key[0], got[0].Value[0] = 0xEE, 0xEE
	wantConsumerRecords(t, v, "cg", cg...)

	// Overwrites (a later epoch of every record) and tombstones.
	cgNext := consumerRecords("cg", 8, 40)
	mustApply(t, v.ApplyBatch(3, cgNext))
	wantConsumerRecords(t, v, "cg", append(cg, cgNext...)...)
	gone := []offsets.Record{
		consumerRec(offsets.ConsumerMemberMetadataKeyV5, "cg", "m2", nil, 50),
		consumerRec(offsets.ConsumerCurrentAssignmentKeyV8, "cg", "m2", nil, 51),
		consumerRec(offsets.ConsumerCurrentAssignmentKeyV8, "cg", "nobody", nil, 52),
	}
	mustApply(t, v.ApplyBatch(3, gone))
	wantConsumerRecords(t, v, "cg", append(append(cg, cgNext...), gone...)...)

	// A group that loses every record leaves Groups; one keeping an offset stays.
	var tombs []offsets.Record
	for i, r := range append(cg2, append(cgNext, cg...)...) {
		tombs = append(tombs, offsets.Record{Key: r.Key, Offset: 60 + int64(i)})
	}
	mustApply(t, v.ApplyBatch(3, tombs))
	wantConsumerRecords(t, v, "cg2")
	wantConsumerRecords(t, v, "cg")
	wantGroups(t, v, "c", "cg", "classic")
	mustApply(t, v.ApplyBatch(3, []offsets.Record{tombstone("cg", "t", 0, 100)}))
	wantGroups(t, v, "c", "classic")
	wantConsumerRecords(t, v, "c", c...)
}

func testGroupRecordsReplay(t *testing.T, v offsets.View) {
	first := consumerRecords("g", 1, 10)
	mustApply(t, v.ApplyBatch(0, first))
	// ApplyBatch skips records at or below the applied offset...
	stale := consumerRecords("g", 2, 10)
	mustApply(t, v.ApplyBatch(0, stale))
	wantConsumerRecords(t, v, "g", first...)
	// ...Reapply applies them, in log order, and a marker applies its records.
	mustApply(t, v.Reapply(0, stale[:3]))
	wantConsumerRecords(t, v, "g", append(first, stale[:3]...)...)
	del := consumerRec(offsets.ConsumerGroupMetadataKeyV3, "g", "", nil, 12)
	mustApply(t, v.ApplyMarker(0, []offsets.Record{del}, 30, -1))
	wantConsumerRecords(t, v, "g", append(append(first, stale[:3]...), del)...)
	if got := v.AppliedOffset(0); got != 30 {
		t.Fatalf("applied offset %d, want 30", got)
	}
}

// groupDeleter is a View that can delete a whole group (Store).
type groupDeleter interface {
	DeleteGroup(group string) error
}

func testDeleteGroup(t *testing.T, v offsets.View) {
	d, ok := v.(groupDeleter)
	if !ok {
		t.Skip("the view has no DeleteGroup")
	}
	cg := consumerRecords("g", 3, 10)
	keep := consumerRecords("g2", 3, 20)
	mustApply(t, v.ApplyBatch(0, append(append([]offsets.Record{commit("g", "t", 0, 1, 0), groupMeta("g", 1, 1)}, cg...), keep...)))
	only := consumerRecords("only", 4, 30)
	mustApply(t, v.ApplyBatch(0, only))
	sg := append(shareGroupRecords("sg", 5, 40), shareStateRec("sg", 0, 1, 50))
	mustApply(t, v.ApplyBatch(0, sg))
	wantGroups(t, v, "g", "g2", "only", "sg")
	if err := d.DeleteGroup("sg"); err != nil {
		t.Fatal(err)
	}
	wantConsumerRecords(t, v, "sg")
	wantGroups(t, v, "g", "g2", "only")
	if err := d.DeleteGroup("g"); err != nil {
		t.Fatal(err)
	}
	wantConsumerRecords(t, v, "g")
	wantOffset(t, v, "g", "t", 0, -1)
	if _, ok, _ := v.GroupMetadata("g"); ok {
		t.Fatal("group metadata survived DeleteGroup")
	}
	wantConsumerRecords(t, v, "g2", keep...)
	if err := d.DeleteGroup("only"); err != nil {
		t.Fatal(err)
	}
	wantConsumerRecords(t, v, "only")
	wantGroups(t, v, "g2")
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
	_, err6 := v.GroupRecords("g")
	for i, err := range []error{err1, err2, err3, err4, err5, err6} {
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

// testShareState: share state records (ShareStateKeyV1001) are group records: stored
// per group with the consumer group records, sorted by key, replaced, tombstoned, and
// a value that does not decode fails its batch.
func testShareState(t *testing.T, v offsets.View) {
	key := func(group string, p int32) []byte { return offsets.EncodeShareStateKey(group, [16]byte{9}, p) }
	val := func(start int64) []byte {
		return offsets.EncodeShareState(offsets.ShareState{StateEpoch: 1, LeaderEpoch: 2, StartOffset: start,
			Batches: []offsets.ShareStateBatch{{FirstOffset: start, LastOffset: start + 3, DeliveryState: 2, DeliveryCount: 1}}})
	}
	recs := []offsets.Record{
		{Key: key("sg", 1), Value: val(10), Offset: 0},
		{Key: key("sg", 0), Value: val(20), Offset: 1},
		{Key: key("other", 0), Value: val(30), Offset: 2},
		{Key: key("sg", 1), Value: val(40), Offset: 3},
	}
	if err := v.ApplyBatch(0, recs); err != nil {
		t.Fatal(err)
	}
	wantConsumerRecords(t, v, "sg", recs[0], recs[1], recs[3])
	if groups, err := v.Groups(); err != nil || !slices.Contains(groups, "sg") || !slices.Contains(groups, "other") {
		t.Fatalf("Groups = %v, %v; want sg and other listed", groups, err)
	}
	if err := v.ApplyBatch(0, []offsets.Record{{Key: key("sg", 0), Offset: 4}}); err != nil {
		t.Fatal(err)
	}
	wantConsumerRecords(t, v, "sg", recs[3])
	bad := []offsets.Record{{Key: key("sg", 2), Value: []byte{0, 0, 1}, Offset: 5}}
	if err := v.ApplyBatch(0, bad); err == nil {
		t.Fatal("a share state value that does not decode was applied")
	}
	wantConsumerRecords(t, v, "sg", recs[3])
	if b, ok, err := v.GroupRecord(key("sg", 1)); err != nil || !ok || !bytes.Equal(b, val(40)) {
		t.Fatalf("GroupRecord = %x, %v, %v; want %x", b, ok, err, val(40))
	}
	if _, ok, err := v.GroupRecord(key("sg", 0)); err != nil || ok {
		t.Fatalf("GroupRecord of a tombstoned key = %v, %v", ok, err)
	}
	if _, _, err := v.GroupRecord(offsets.EncodeGroupKey("sg")); err == nil {
		t.Fatal("GroupRecord of a group metadata key: no error")
	}
	got, _ := v.GroupRecords("sg")
	st, err := offsets.DecodeShareState(got[0].Value)
	if err != nil || st.StartOffset != 40 || len(st.Batches) != 1 || st.Batches[0].DeliveryState != 2 {
		t.Fatalf("decoded %+v, %v", st, err)
	}
}

// shareRec is a share group record (value nil: a tombstone) at log offset at.
func shareRec(version int16, group, member string, value []byte, at int64) offsets.Record {
	return offsets.Record{Key: offsets.EncodeShareGroupKey(version, group, member), Value: value, Offset: at}
}

// shareGroupRecords is one of each share group record type for group, with two
// members and the epochs made from epoch, at log offsets from at on (in an order
// unlike the keys').
func shareGroupRecords(group string, epoch int32, at int64) []offsets.Record {
	topic := [16]byte{0: 7, 15: byte(epoch)}
	tps := []offsets.TopicPartitions{{TopicID: topic, Partitions: []int32{epoch, epoch + 1}}}
	recs := []offsets.Record{
		shareRec(offsets.ShareGroupCurrentAssignmentKeyV14, group, "m2", offsets.EncodeShareCurrentAssignment(
			offsets.ShareCurrentAssignment{MemberEpoch: epoch, PreviousMemberEpoch: epoch - 1, State: 0}), 0),
		shareRec(offsets.ShareGroupMetadataKeyV11, group, "", offsets.EncodeShareGroupMetadata(
			offsets.ShareGroupMetadata{Epoch: epoch, MetadataHash: int64(epoch) << 33}), 0),
		shareRec(offsets.ShareGroupMemberMetadataKeyV10, group, "m1", offsets.EncodeShareMemberMetadata(
			offsets.ShareMemberMetadata{RackID: "r1", ClientID: "c1", ClientHost: "/h", SubscribedTopicNames: []string{"t"}}), 0),
		shareRec(offsets.ShareGroupTargetMemberKeyV13, group, "m1", offsets.EncodeShareTargetMember(
			offsets.ShareTargetMember{TopicPartitions: tps}), 0),
		shareRec(offsets.ShareGroupTargetMetadataKeyV12, group, "", offsets.EncodeShareTargetMetadata(
			offsets.ShareTargetMetadata{AssignmentEpoch: epoch}), 0),
		shareRec(offsets.ShareGroupCurrentAssignmentKeyV14, group, "m1", offsets.EncodeShareCurrentAssignment(
			offsets.ShareCurrentAssignment{MemberEpoch: epoch, PreviousMemberEpoch: epoch - 1, State: 1, Assigned: tps}), 0),
		shareRec(offsets.ShareGroupMemberMetadataKeyV10, group, "m2", offsets.EncodeShareMemberMetadata(
			offsets.ShareMemberMetadata{ClientID: "c2", ClientHost: "/h2"}), 0),
		shareRec(offsets.ShareGroupTargetMemberKeyV13, group, "m2", offsets.EncodeShareTargetMember(
			offsets.ShareTargetMember{}), 0),
	}
	for i := range recs {
		recs[i].Offset = at + int64(i)
	}
	return recs
}

// shareStateRec is a share state record of group on partition p of a topic at log
// offset at.
func shareStateRec(group string, p int32, start, at int64) offsets.Record {
	return offsets.Record{
		Key:    offsets.EncodeShareStateKey(group, [16]byte{0: 7}, p),
		Value:  offsets.EncodeShareState(offsets.ShareState{StateEpoch: 1, StartOffset: start}),
		Offset: at,
	}
}

// testShareGroupRecords: KIP-932 share group records (key types 10-14) are group
// records: kept per group beside the group's share state, apart from other groups'
// consumer group records and share state, sorted by key, read one by one, replaced,
// tombstoned; a value that does not decode as its type fails its batch.
func testShareGroupRecords(t *testing.T, v offsets.View) {
	sg := shareGroupRecords("sg", 5, 10)
	sgState := []offsets.Record{shareStateRec("sg", 1, 100, 20), shareStateRec("sg", 0, 200, 21)}
	cg := consumerRecords("cg", 6, 30)
	otherState := []offsets.Record{shareStateRec("other", 0, 300, 40)}
	// A prefix of the share group's name, and a name it prefixes.
	s := shareGroupRecords("s", 2, 50)
	sg2 := shareGroupRecords("sg2", 3, 60)
	var batch []offsets.Record
	for _, part := range [][]offsets.Record{{commit("sg", "t", 0, 1, 0)}, sg, sgState, cg, otherState, s, sg2} {
		batch = append(batch, part...)
	}
	mustApply(t, v.ApplyBatch(1, batch))
	if got, want := v.AppliedOffset(1), batch[len(batch)-1].Offset; got != want {
		t.Fatalf("applied offset %d, want %d", got, want)
	}
	wantConsumerRecords(t, v, "sg", append(slices.Clone(sg), sgState...)...)
	wantConsumerRecords(t, v, "cg", cg...)
	wantConsumerRecords(t, v, "other", otherState...)
	wantConsumerRecords(t, v, "s", s...)
	wantConsumerRecords(t, v, "sg2", sg2...)
	wantGroups(t, v, "cg", "other", "s", "sg", "sg2")
	wantOffset(t, v, "sg", "t", 0, 1)

	// One by one, and decoded with their type's decoders.
	for _, r := range batch[1:] {
		got, ok, err := v.GroupRecord(r.Key)
		if err != nil || !ok || !bytes.Equal(got, r.Value) {
			t.Fatalf("GroupRecord(%x) = %x, %v, %v; want %x", r.Key, got, ok, err, r.Value)
		}
	}
	if _, ok, err := v.GroupRecord(offsets.EncodeShareGroupKey(offsets.ShareGroupCurrentAssignmentKeyV14, "sg", "nobody")); ok || err != nil {
		t.Fatalf("GroupRecord of an unknown member: %v, %v", ok, err)
	}
	cur, _, _ := v.GroupRecord(offsets.EncodeShareGroupKey(offsets.ShareGroupCurrentAssignmentKeyV14, "sg", "m1"))
	a, err := offsets.DecodeShareCurrentAssignment(cur)
	if err != nil || a.MemberEpoch != 5 || a.PreviousMemberEpoch != 4 || a.State != 1 || len(a.Assigned) != 1 ||
		!slices.Equal(a.Assigned[0].Partitions, []int32{5, 6}) {
		t.Fatalf("current assignment of m1: %+v, %v", a, err)
	}
	md, _, _ := v.GroupRecord(offsets.EncodeShareGroupKey(offsets.ShareGroupMetadataKeyV11, "sg", ""))
	if g, err := offsets.DecodeShareGroupMetadata(md); err != nil || g != (offsets.ShareGroupMetadata{Epoch: 5, MetadataHash: 5 << 33}) {
		t.Fatalf("share group metadata: %+v, %v", g, err)
	}
	mm, _, _ := v.GroupRecord(offsets.EncodeShareGroupKey(offsets.ShareGroupMemberMetadataKeyV10, "sg", "m1"))
	if m, err := offsets.DecodeShareMemberMetadata(mm); err != nil || m.RackID != "r1" || !slices.Equal(m.SubscribedTopicNames, []string{"t"}) {
		t.Fatalf("member metadata of m1: %+v, %v", m, err)
	}

	// Overwrites (a later epoch of every record) and a member's tombstones.
	sgNext := shareGroupRecords("sg", 8, 70)
	mustApply(t, v.ApplyBatch(1, sgNext))
	gone := []offsets.Record{
		shareRec(offsets.ShareGroupMemberMetadataKeyV10, "sg", "m2", nil, 80),
		shareRec(offsets.ShareGroupTargetMemberKeyV13, "sg", "m2", nil, 81),
		shareRec(offsets.ShareGroupCurrentAssignmentKeyV14, "sg", "m2", nil, 82),
		shareRec(offsets.ShareGroupCurrentAssignmentKeyV14, "sg", "nobody", nil, 83),
	}
	mustApply(t, v.ApplyBatch(1, gone))
	want := append(append(append(slices.Clone(sg), sgState...), sgNext...), gone...)
	wantConsumerRecords(t, v, "sg", want...)

	// Values that do not decode as their key's type fail the whole batch: a consumer
	// group current assignment (it has a second array) under a share group key, a
	// short share group epoch, a target member under a member metadata key.
	for _, bad := range [][]offsets.Record{
		{shareStateRec("sg", 2, 1, 90), shareRec(offsets.ShareGroupCurrentAssignmentKeyV14, "sg", "m1",
			offsets.EncodeConsumerCurrentAssignment(offsets.ConsumerCurrentAssignment{MemberEpoch: 9}), 91)},
		{shareStateRec("sg", 2, 1, 90), shareRec(offsets.ShareGroupMetadataKeyV11, "sg", "", []byte{0, 0, 0, 9}, 91)},
		{shareStateRec("sg", 2, 1, 90), shareRec(offsets.ShareGroupMemberMetadataKeyV10, "sg", "m1",
			offsets.EncodeShareTargetMember(offsets.ShareTargetMember{}), 91)},
	} {
		if err := v.ApplyBatch(1, bad); err == nil {
			t.Fatalf("applied %x", bad[1].Value)
		}
	}
	wantConsumerRecords(t, v, "sg", want...)
	if got := v.AppliedOffset(1); got != 83 {
		t.Fatalf("applied offset %d after failed batches, want 83", got)
	}

	// A share group that loses every record (its share state too) leaves Groups
	// once its offset goes; the others keep theirs.
	var tombs []offsets.Record
	for i, r := range append(append(slices.Clone(sg), sgNext...), sgState...) {
		tombs = append(tombs, offsets.Record{Key: r.Key, Offset: 100 + int64(i)})
	}
	mustApply(t, v.ApplyBatch(1, tombs))
	wantConsumerRecords(t, v, "sg")
	wantGroups(t, v, "cg", "other", "s", "sg", "sg2")
	mustApply(t, v.ApplyBatch(1, []offsets.Record{tombstone("sg", "t", 0, 200)}))
	wantGroups(t, v, "cg", "other", "s", "sg2")
	wantConsumerRecords(t, v, "cg", cg...)
	wantConsumerRecords(t, v, "other", otherState...)
	wantConsumerRecords(t, v, "s", s...)
	wantConsumerRecords(t, v, "sg2", sg2...)
}
