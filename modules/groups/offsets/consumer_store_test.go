package offsets

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// consumerLog is one record of each consumer group type for group at log offsets
// from at on, with a classic offset commit first.
func consumerLog(group string, epoch int32, at int64) []Record {
	tps := []TopicPartitions{{TopicID: topicA, Partitions: []int32{epoch}}}
	recs := []Record{
		{Key: EncodeOffsetKey(group, "t", 0), Value: EncodeOffsetValue(Committed{Offset: int64(epoch), LeaderEpoch: -1})},
		{Key: EncodeConsumerGroupKey(ConsumerGroupMetadataKeyV3, group, ""), Value: EncodeConsumerGroupMetadata(ConsumerGroupMetadata{Epoch: epoch})},
		{Key: EncodeConsumerGroupKey(ConsumerMemberMetadataKeyV5, group, "m"), Value: EncodeConsumerMemberMetadata(sampleMember())},
		{Key: EncodeConsumerGroupKey(ConsumerTargetMetadataKeyV6, group, ""), Value: EncodeConsumerTargetMetadata(ConsumerTargetMetadata{AssignmentEpoch: epoch})},
		{Key: EncodeConsumerGroupKey(ConsumerTargetMemberKeyV7, group, "m"), Value: EncodeConsumerTargetMember(ConsumerTargetMember{TopicPartitions: tps})},
		{Key: EncodeConsumerGroupKey(ConsumerCurrentAssignmentKeyV8, group, "m"), Value: EncodeConsumerCurrentAssignment(sampleCurrent())},
	}
	for i := range recs {
		recs[i].Offset = at + int64(i)
	}
	return recs
}

// consumerKVs is what GroupRecords returns after recs: their consumer group
// records, sorted by key.
func consumerKVs(recs []Record) []KV {
	var out []KV
	for _, r := range recs {
		if k, err := DecodeKey(r.Key); err == nil && k.IsConsumerGroup() {
			out = append(out, KV{Key: r.Key, Value: r.Value})
		}
	}
	slices.SortFunc(out, func(a, b KV) int { return bytes.Compare(a.Key, b.Key) })
	return out
}

func mustConsumerRecords(t *testing.T, s *Store, group string) []KV {
	t.Helper()
	kvs, err := s.GroupRecords(group)
	if err != nil {
		t.Fatal(err)
	}
	return kvs
}

func TestConsumerRecordsPersist(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	recs := consumerLog("g", 4, 10)
	if err := s.ApplyBatch(2, recs); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	crashed := t.TempDir()
	copyDir(t, dir, crashed) // as a crash leaves it: never closed
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, crashed} {
		s := openStore(t, d)
		if got, want := mustConsumerRecords(t, s, "g"), consumerKVs(recs); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: after reopening %x, want %x", d, got, want)
		}
		if got := s.AppliedOffset(2); got != 15 {
			t.Fatalf("%s: applied offset %d, want 15", d, got)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestConsumerRecordsUpgrade opens a store as a version that skipped consumer group
// records left it (no consumerRecordsKey): its applied offsets go, its entries stay,
// once.
func TestConsumerRecordsUpgrade(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	if err := s.ApplyBatch(2, []Record{{Key: EncodeOffsetKey("g", "t", 0), Value: EncodeOffsetValue(Committed{Offset: 9}), Offset: 41}}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetTxnReplayStart(2, 40); err != nil {
		t.Fatal(err)
	}
	if err := s.update(func(txn *badger.Txn) error { return txn.Delete(consumerRecordsKey) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openStore(t, dir)
	if got := s.AppliedOffset(2); got != -1 {
		t.Fatalf("applied offset %d after the upgrade, want -1 (replay from the start)", got)
	}
	if c, ok := mustFetch(t, s, "g", "t", 0); !ok || c.Offset != 9 {
		t.Fatalf("offset after the upgrade: %+v %v", c, ok)
	}
	if o, ok := s.TxnReplayStart(2); !ok || o != 40 {
		t.Fatalf("txn replay start %d %v, want 40 kept", o, ok)
	}
	// The replay from the start applies what the old version skipped.
	recs := consumerLog("g", 9, 30)
	if err := s.ApplyBatch(2, recs); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openStore(t, dir) // upgraded once: applied offsets now stay
	if got := s.AppliedOffset(2); got != 35 {
		t.Fatalf("applied offset %d after a second open, want 35", got)
	}
	if got, want := mustConsumerRecords(t, s, "g"), consumerKVs(recs); !reflect.DeepEqual(got, want) {
		t.Fatalf("records %x, want %x", got, want)
	}
}

// TestConsumerKeyOrder: within a group, badger keys sort as the Kafka keys do, so a
// prefix scan returns GroupRecords sorted by Kafka key bytes.
func TestConsumerKeyOrder(t *testing.T) {
	type rec struct {
		v int16
		m string
	}
	var recs []rec
	for _, v := range []int16{3, 5, 6, 7, 8, 10, 11, 12, 13, 14} {
		for _, m := range []string{"", "a", "m", "m1", "m\x00", "\xff", strings.Repeat("z", 300)} {
			recs = append(recs, rec{v, m})
		}
	}
	for _, a := range recs {
		for _, b := range recs {
			ka, kb := groupRecordKey(Key{Version: a.v, Group: "grp", Member: a.m}), groupRecordKey(Key{Version: b.v, Group: "grp", Member: b.m})
			wa, wb := encodeGroupRecordKey(Key{Version: a.v, Group: "grp", Member: a.m}), encodeGroupRecordKey(Key{Version: b.v, Group: "grp", Member: b.m})
			if bytes.Compare(ka, kb) != bytes.Compare(wa, wb) {
				t.Fatalf("%v vs %v: badger order %d, Kafka order %d", a, b, bytes.Compare(ka, kb), bytes.Compare(wa, wb))
			}
		}
	}
}

func TestConsumerRecordsCorruptBadgerKey(t *testing.T) {
	s := openStore(t, t.TempDir())
	for _, rest := range [][]byte{{0, 4}, {0, 5}, {0, 3, 0}, {0, 8, 0, 9, 'm'}} {
		bad := append(groupPrefix(prefixConsumer, "g"), rest...)
		if err := s.update(func(txn *badger.Txn) error { return txn.Set(bad, []byte{0}) }); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GroupRecords("g"); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("key %x: %v, want ErrCorrupt", bad, err)
		}
		if err := s.update(func(txn *badger.Txn) error { return txn.Delete(bad) }); err != nil {
			t.Fatal(err)
		}
	}
}

func TestApplyRejectsCorruptConsumerValue(t *testing.T) {
	s := openStore(t, t.TempDir())
	for i, v := range [][]byte{{0, 0}, {0, 1, 0, 0, 0, 1, 0}, EncodeConsumerTargetMetadata(ConsumerTargetMetadata{})} {
		key := EncodeConsumerGroupKey(ConsumerTargetMemberKeyV7, "g", "m")
		if err := s.Apply(0, key, v, int64(i)); err == nil {
			t.Fatalf("value %x applied", v)
		}
	}
	if got := s.AppliedOffset(0); got != -1 {
		t.Fatalf("applied offset moved to %d", got)
	}
	if got := mustConsumerRecords(t, s, "g"); len(got) != 0 {
		t.Fatalf("records %x", got)
	}
}

// TestDeleteGroupLargeConsumer deletes a group whose consumer group records and
// offsets overflow one chunk together.
func TestDeleteGroupLargeConsumer(t *testing.T) {
	s := openStore(t, t.TempDir())
	group := strings.Repeat("g", 2048)
	v := EncodeConsumerMemberMetadata(sampleMember())
	at := int64(0)
	for start := 0; start < 1200; start += 100 {
		var recs []Record
		for m := start; m < start+100; m++ {
			recs = append(recs, Record{Key: EncodeConsumerGroupKey(ConsumerMemberMetadataKeyV5, group, fmt.Sprint("member-", m)), Value: v, Offset: at})
			at++
			if m%2 == 0 {
				recs = append(recs, Record{Key: EncodeOffsetKey(group, "t", int32(m)), Value: EncodeOffsetValue(Committed{Offset: 1}), Offset: at})
				at++
			}
		}
		if err := s.ApplyBatch(0, recs); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.ApplyBatch(0, []Record{
		{Key: EncodeGroupKey(group), Value: EncodeGroupMetadataValue(sampleGroup()), Offset: at},
		{Key: EncodeConsumerGroupKey(ConsumerGroupMetadataKeyV3, "other", ""), Value: EncodeConsumerGroupMetadata(ConsumerGroupMetadata{Epoch: 1}), Offset: at + 1},
	}); err != nil {
		t.Fatal(err)
	}
	if got := len(mustConsumerRecords(t, s, group)); got != 1200 {
		t.Fatalf("%d records before delete, want 1200", got)
	}
	if err := s.DeleteGroup(group); err != nil {
		t.Fatal(err)
	}
	if got := mustGroups(t, s); !reflect.DeepEqual(got, []string{"other"}) {
		t.Fatalf("groups after delete: %d, first %.10q", len(got), got)
	}
	if got := mustConsumerRecords(t, s, group); len(got) != 0 {
		t.Fatalf("%d records left", len(got))
	}
	if _, ok, _ := s.GroupMetadata(group); ok {
		t.Fatal("metadata survived")
	}
}

func TestExpireOffsetsConsumerGroup(t *testing.T) {
	now := time.UnixMilli(10_000_000)
	old := now.Add(-2 * time.Hour).UnixMilli()
	recent := now.Add(-time.Minute).UnixMilli()
	s := openStore(t, t.TempDir())
	cgm := EncodeConsumerGroupMetadata(ConsumerGroupMetadata{Epoch: 3})
	recs := []Record{
		// "kip848": a KIP-848 group whose old commit expires though a classic
		// metadata record says it became Empty recently (a leftover).
		{Key: EncodeConsumerGroupKey(ConsumerGroupMetadataKeyV3, "kip848", ""), Value: cgm},
		{Key: EncodeGroupKey("kip848"), Value: EncodeGroupMetadataValue(GroupMetadata{ProtocolType: "consumer", CurrentStateTimestamp: recent})},
		{Key: EncodeOffsetKey("kip848", "t", 0), Value: EncodeOffsetValue(Committed{Offset: 1, CommitTimestamp: old})},
		{Key: EncodeOffsetKey("kip848", "t", 1), Value: EncodeOffsetValue(Committed{Offset: 1, CommitTimestamp: recent})},
		// "classic": the same without the consumer group record keeps its commit.
		{Key: EncodeGroupKey("classic"), Value: EncodeGroupMetadataValue(GroupMetadata{ProtocolType: "consumer", CurrentStateTimestamp: recent})},
		{Key: EncodeOffsetKey("classic", "t", 0), Value: EncodeOffsetValue(Committed{Offset: 1, CommitTimestamp: old})},
		// "records": consumer group records and no offsets.
		{Key: EncodeConsumerGroupKey(ConsumerGroupMetadataKeyV3, "records", ""), Value: cgm},
	}
	for i := range recs {
		recs[i].Offset = int64(i)
	}
	if err := s.ApplyBatch(0, recs); err != nil {
		t.Fatal(err)
	}
	n, err := s.ExpireOffsets(now, time.Hour, func(string) bool { return true })
	if err != nil || n != 1 {
		t.Fatalf("expired %d, %v; want 1", n, err)
	}
	if _, ok := mustFetch(t, s, "kip848", "t", 0); ok {
		t.Fatal("kip848's old commit kept")
	}
	if _, ok := mustFetch(t, s, "kip848", "t", 1); !ok {
		t.Fatal("kip848's recent commit expired")
	}
	if _, ok := mustFetch(t, s, "classic", "t", 0); !ok {
		t.Fatal("classic's commit expired")
	}
	for _, g := range []string{"kip848", "records"} {
		if got := mustConsumerRecords(t, s, g); len(got) != 1 {
			t.Fatalf("%s: %d consumer group records after expiry, want 1", g, len(got))
		}
	}
	if got := mustGroups(t, s); !reflect.DeepEqual(got, []string{"classic", "kip848", "records"}) {
		t.Fatalf("groups %q", got)
	}
}
