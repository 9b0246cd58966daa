package offsets

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"testing"
)

// shareSamples are the share group values the value tests round-trip (they are part
// of consumerSamples), with their encodings by hand from Kafka's schemas.
func shareSamples() []valueSample {
	mm, gm := codecOf(ShareGroupMemberMetadataKeyV10), codecOf(ShareGroupMetadataKeyV11)
	tm, tmm, ca := codecOf(ShareGroupTargetMetadataKeyV12), codecOf(ShareGroupTargetMemberKeyV13), codecOf(ShareGroupCurrentAssignmentKeyV14)
	tps := []TopicPartitions{{TopicID: topicA, Partitions: []int32{0, 2, 4}}, {TopicID: topicB, Partitions: []int32{math.MaxInt32}}}
	return []valueSample{
		{"share member metadata", mm, ShareMemberMetadata{RackID: "rack-b", ClientID: "client", ClientHost: "/10.0.0.2",
			SubscribedTopicNames: []string{"orders", "payments"}},
			(&hand{}).i16(0).cstr("rack-b").cstr("client").cstr("/10.0.0.2").carr(2).cstr("orders").cstr("payments").notags().b},
		{"share member metadata null rack, no topics", mm, ShareMemberMetadata{},
			(&hand{}).i16(0).cnull().cstr("").cstr("").carr(0).notags().b},
		{"share group metadata without hash", gm, ShareGroupMetadata{Epoch: 9},
			(&hand{}).i16(0).i32(9).notags().b},
		{"share group metadata with hash", gm, ShareGroupMetadata{Epoch: math.MaxInt32, MetadataHash: math.MinInt64},
			(&hand{}).i16(0).i32(math.MaxInt32).uv(1).tag(0, (&hand{}).i64(math.MinInt64).b).b},
		{"share target metadata", tm, ShareTargetMetadata{AssignmentEpoch: -1},
			(&hand{}).i16(0).i32(-1).notags().b},
		{"share target member", tmm, ShareTargetMember{TopicPartitions: tps},
			(&hand{}).i16(0).carr(2).
				uuid(topicA).carr(3).i32(0).i32(2).i32(4).notags().
				uuid(topicB).carr(1).i32(math.MaxInt32).notags().
				notags().b},
		{"share target member empty", tmm, ShareTargetMember{},
			(&hand{}).i16(0).carr(0).notags().b},
		{"share current assignment", ca, ShareCurrentAssignment{MemberEpoch: 12, PreviousMemberEpoch: 11, State: 1, Assigned: tps},
			(&hand{}).i16(0).i32(12).i32(11).i8(1).
				carr(2).uuid(topicA).carr(3).i32(0).i32(2).i32(4).notags().uuid(topicB).carr(1).i32(math.MaxInt32).notags().
				notags().b},
		{"share current assignment empty", ca, ShareCurrentAssignment{State: -1},
			(&hand{}).i16(0).i32(0).i32(0).i8(-1).carr(0).notags().b},
	}
}

func TestShareGroupKeyRoundTrip(t *testing.T) {
	tests := []struct {
		name          string
		version       int16
		group, member string
		hand          []byte
		want          Key
	}{
		{"member metadata", ShareGroupMemberMetadataKeyV10, "sg", "m-1", (&hand{}).i16(10).str("sg").str("m-1").b, Key{Version: 10, Group: "sg", Member: "m-1"}},
		{"group metadata", ShareGroupMetadataKeyV11, "sg", "ignored", (&hand{}).i16(11).str("sg").b, Key{Version: 11, Group: "sg"}},
		{"target metadata", ShareGroupTargetMetadataKeyV12, "sg", "", (&hand{}).i16(12).str("sg").b, Key{Version: 12, Group: "sg"}},
		{"target member", ShareGroupTargetMemberKeyV13, "sg", "m", (&hand{}).i16(13).str("sg").str("m").b, Key{Version: 13, Group: "sg", Member: "m"}},
		{"current assignment", ShareGroupCurrentAssignmentKeyV14, "sg", "m\x00ü", (&hand{}).i16(14).str("sg").str("m\x00ü").b, Key{Version: 14, Group: "sg", Member: "m\x00ü"}},
		{"empty names", ShareGroupCurrentAssignmentKeyV14, "", "", (&hand{}).i16(14).str("").str("").b, Key{Version: 14}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			enc := EncodeShareGroupKey(tc.version, tc.group, tc.member)
			if !bytes.Equal(enc, tc.hand) {
				t.Fatalf("encoded %x, by hand %x", enc, tc.hand)
			}
			got, err := DecodeKey(enc)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			if !got.IsShareGroup() || !got.IsGroupRecord() || got.IsConsumerGroup() || got.IsOffset() {
				t.Fatalf("IsShareGroup %v IsGroupRecord %v IsConsumerGroup %v IsOffset %v",
					got.IsShareGroup(), got.IsGroupRecord(), got.IsConsumerGroup(), got.IsOffset())
			}
			if again := encodeGroupRecordKey(got); !bytes.Equal(again, enc) {
				t.Fatalf("re-encoded %x, want %x", again, enc)
			}
			rest := groupRecordKey(got)[len(groupPrefix(prefixConsumer, tc.group)):]
			if kk, err := groupRecordKafkaKey(tc.group, rest); err != nil || !bytes.Equal(kk, enc) {
				t.Fatalf("badger key round trip: %x, %v", kk, err)
			}
		})
	}
}

func TestShareGroupKeyGolden(t *testing.T) {
	// Type 10, group "g1", member "m1", by hand from Kafka's
	// ShareGroupMemberMetadataKey schema (not flexible: int16-length strings).
	want := []byte{
		0x00, 0x0a, // key version = record type 10
		0x00, 0x02, 'g', '1', // GroupId
		0x00, 0x02, 'm', '1', // MemberId
	}
	if got := EncodeShareGroupKey(ShareGroupMemberMetadataKeyV10, "g1", "m1"); !bytes.Equal(got, want) {
		t.Fatalf("got %x, want %x", got, want)
	}
	if k, err := DecodeKey(want); err != nil || k != (Key{Version: 10, Group: "g1", Member: "m1"}) {
		t.Fatalf("decoded %+v, %v", k, err)
	}
}

func TestIsShareGroup(t *testing.T) {
	for v := int16(-1); v <= 1002; v++ {
		want := v >= 10 && v <= 14
		k := Key{Version: v}
		if got := k.IsShareGroup(); got != want {
			t.Errorf("version %d: IsShareGroup %v, want %v", v, got, want)
		}
		if want && k.IsConsumerGroup() {
			t.Errorf("version %d: both a share and a consumer group record", v)
		}
		wantGroupRecord := want || k.IsConsumerGroup() || v == ShareStateKeyV1001
		if got := k.IsGroupRecord(); got != wantGroupRecord {
			t.Errorf("version %d: IsGroupRecord %v, want %v", v, got, wantGroupRecord)
		}
		if enc := EncodeShareGroupKey(v, "g", "m"); (enc != nil) != want {
			t.Errorf("version %d: EncodeShareGroupKey %x", v, enc)
		}
		// Each type has one encoder: the consumer group one refuses share types.
		if enc := EncodeConsumerGroupKey(v, "g", "m"); want && enc != nil {
			t.Errorf("version %d: EncodeConsumerGroupKey %x", v, enc)
		}
		if got, want := hasMember(v), v == 5 || v == 7 || v == 8 || v == 10 || v == 13 || v == 14; got != want {
			t.Errorf("version %d: hasMember %v, want %v", v, got, want)
		}
	}
}

func TestShareValueGolden(t *testing.T) {
	// ShareGroupCurrentMemberAssignmentValue (type 14) by hand from Kafka's schema:
	// epochs 5 and 4, state 1, topicB's partitions 1 and 3 assigned. Unlike type 8
	// there is no array of partitions pending revocation.
	want := []byte{
		0x00, 0x00, // value version 0
		0x00, 0x00, 0x00, 0x05, // MemberEpoch
		0x00, 0x00, 0x00, 0x04, // PreviousMemberEpoch
		0x01,                                                                                           // State
		0x02,                                                                                           // AssignedPartitions: 1 entry (+1)
		0xf0, 0xe1, 0xd2, 0xc3, 0xb4, 0xa5, 0x96, 0x87, 0x78, 0x69, 0x5a, 0x4b, 0x3c, 0x2d, 0x1e, 0x0f, // TopicId
		0x03,                   // Partitions: 2 entries (+1)
		0x00, 0x00, 0x00, 0x01, // 1
		0x00, 0x00, 0x00, 0x03, // 3
		0x00, // entry's tagged fields: none
		0x00, // tagged fields: none
	}
	a := ShareCurrentAssignment{MemberEpoch: 5, PreviousMemberEpoch: 4, State: 1,
		Assigned: []TopicPartitions{{TopicID: topicB, Partitions: []int32{1, 3}}}}
	if got := EncodeShareCurrentAssignment(a); !bytes.Equal(got, want) {
		t.Fatalf("got  %x\nwant %x", got, want)
	}
	if got, err := DecodeShareCurrentAssignment(want); err != nil || !reflect.DeepEqual(got, a) {
		t.Fatalf("decoded %+v, %v", got, err)
	}
	if err := checkGroupRecordValue(ShareGroupCurrentAssignmentKeyV14, want); err != nil {
		t.Fatalf("checkGroupRecordValue: %v", err)
	}

	// ShareGroupMetadataValue (type 11) with a metadata hash: as type 3, the tag
	// section holds tag 0, size 8.
	want = []byte{0x00, 0x00, 0x00, 0x00, 0x00, 0x2a, 0x01, 0x00, 0x08, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08}
	g := ShareGroupMetadata{Epoch: 42, MetadataHash: 0x0102030405060708}
	if got := EncodeShareGroupMetadata(g); !bytes.Equal(got, want) {
		t.Fatalf("got  %x\nwant %x", got, want)
	}
}

func TestShareValueUnknownTags(t *testing.T) {
	future := []byte("future")
	tests := []struct {
		name  string
		codec consumerCodec
		in    []byte
		want  any
	}{
		{"member metadata", codecOf(ShareGroupMemberMetadataKeyV10),
			(&hand{}).i16(0).cstr("r").cstr("c").cstr("h").carr(1).cstr("t").uv(2).tag(0, future).tag(7, nil).b,
			ShareMemberMetadata{RackID: "r", ClientID: "c", ClientHost: "h", SubscribedTopicNames: []string{"t"}}},
		{"group metadata: hash among unknown tags", codecOf(ShareGroupMetadataKeyV11),
			(&hand{}).i16(0).i32(3).uv(2).tag(5, future).tag(0, (&hand{}).i64(-7).b).b,
			ShareGroupMetadata{Epoch: 3, MetadataHash: -7}},
		{"target metadata", codecOf(ShareGroupTargetMetadataKeyV12),
			(&hand{}).i16(0).i32(4).uv(1).tag(3, future).b,
			ShareTargetMetadata{AssignmentEpoch: 4}},
		{"target member: nested and top-level tags", codecOf(ShareGroupTargetMemberKeyV13),
			(&hand{}).i16(0).carr(1).uuid(topicB).carr(1).i32(6).uv(1).tag(0, future).uv(1).tag(9, future).b,
			ShareTargetMember{TopicPartitions: []TopicPartitions{{TopicID: topicB, Partitions: []int32{6}}}}},
		{"current assignment: nested tags", codecOf(ShareGroupCurrentAssignmentKeyV14),
			(&hand{}).i16(0).i32(2).i32(1).i8(0).carr(1).uuid(topicA).carr(0).uv(2).tag(1, nil).tag(2, future).uv(1).tag(4, future).b,
			ShareCurrentAssignment{MemberEpoch: 2, PreviousMemberEpoch: 1, Assigned: []TopicPartitions{{TopicID: topicA}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.codec.decode(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestShareValueErrors adds share-specific cases to TestConsumerValueErrors, which
// cuts, extends and re-versions every sample of shareSamples.
func TestShareValueErrors(t *testing.T) {
	mm, gm := codecOf(ShareGroupMemberMetadataKeyV10), codecOf(ShareGroupMetadataKeyV11)
	tmm, ca := codecOf(ShareGroupTargetMemberKeyV13), codecOf(ShareGroupCurrentAssignmentKeyV14)
	tests := []struct {
		name  string
		codec consumerCodec
		in    []byte
	}{
		{"null client id", mm, (&hand{}).i16(0).cnull().cnull().cstr("").carr(0).notags().b},
		{"null client host", mm, (&hand{}).i16(0).cnull().cstr("").cnull().carr(0).notags().b},
		{"null topic list", mm, (&hand{}).i16(0).cnull().cstr("").cstr("").uv(0).notags().b},
		{"null topic name", mm, (&hand{}).i16(0).cnull().cstr("").cstr("").carr(1).cnull().notags().b},
		{"topic count past end", mm, (&hand{}).i16(0).cnull().cstr("").cstr("").carr(math.MaxInt32 - 1).b},
		{"consumer member metadata", mm, EncodeConsumerMemberMetadata(sampleMember())},
		{"hash of 4 bytes", gm, (&hand{}).i16(0).i32(1).uv(1).tag(0, []byte{1, 2, 3, 4}).b},
		{"null topic partitions array", tmm, (&hand{}).i16(0).uv(0).notags().b},
		{"partition count past end", tmm, (&hand{}).i16(0).carr(1).uuid(topicA).carr(3).i32(1).notags().notags().b},
		{"huge topic count", ca, (&hand{}).i16(0).i32(1).i32(0).i8(0).carr(math.MaxInt32 - 1).raw(make([]byte, 64)...).b},
		// A consumer group current assignment (type 8) carries a second array, which
		// a share group one (type 14) does not: it does not decode as one.
		{"consumer current assignment", ca, EncodeConsumerCurrentAssignment(ConsumerCurrentAssignment{MemberEpoch: 1})},
		{"consumer current assignment pending", ca, EncodeConsumerCurrentAssignment(sampleCurrent())},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.codec.decode(tc.in); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err %v, want ErrCorrupt", err)
			}
			if err := checkGroupRecordValue(tc.codec.version, tc.in); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("checkGroupRecordValue: %v, want ErrCorrupt", err)
			}
		})
	}
	// Kafka's share group types this package does not read.
	for _, v := range []int16{9, 15} {
		if err := checkGroupRecordValue(v, []byte{0, 0, 0}); !errors.Is(err, ErrUnsupportedVersion) {
			t.Errorf("type %d: %v, want ErrUnsupportedVersion", v, err)
		}
	}
}

func TestDecodeShareGroupKeyErrors(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"partition metadata type 9", (&hand{}).i16(9).str("g").b, ErrUnsupportedVersion},
		{"state partition metadata type 15", (&hand{}).i16(15).str("g").b, ErrUnsupportedVersion},
		{"metadata trailing", append(EncodeShareGroupKey(11, "g", ""), 0), ErrCorrupt},
		{"target metadata with a member", (&hand{}).i16(12).str("g").str("m").b, ErrCorrupt},
		{"member missing member", (&hand{}).i16(10).str("g").b, ErrCorrupt},
		{"member trailing", append(EncodeShareGroupKey(14, "g", "m"), 1), ErrCorrupt},
		{"member negative member", (&hand{}).i16(13).str("g").i16(-1).b, ErrCorrupt},
		{"member past end", (&hand{}).i16(13).str("g").i16(3).b, ErrCorrupt},
		{"group past end", (&hand{}).i16(11).i16(2).raw('g').b, ErrCorrupt},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k, err := DecodeKey(tc.in)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if errors.Is(err, ErrUnsupportedVersion) && k.Version != int16(tc.in[1]) {
				t.Fatalf("version %d not set on %+v", tc.in[1], k)
			}
		})
	}
}

func TestShareGroupBadgerKeyCorrupt(t *testing.T) {
	for _, rest := range [][]byte{{0, 10}, {0, 11, 0}, {0, 14, 0, 9, 'm'}, {0, 15}, {0, 9}} {
		if kk, err := groupRecordKafkaKey("g", rest); !errors.Is(err, ErrCorrupt) {
			t.Errorf("rest %x: %x, %v; want ErrCorrupt", rest, kk, err)
		}
	}
}
