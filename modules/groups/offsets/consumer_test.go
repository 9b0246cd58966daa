package offsets

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"testing"
)

// Flexible-version helpers of hand: uvarints, compact strings and arrays.
func (h *hand) uv(v uint32) *hand {
	for v >= 0x80 {
		h.b = append(h.b, byte(v)|0x80)
		v >>= 7
	}
	h.b = append(h.b, byte(v))
	return h
}
func (h *hand) i8(v int8) *hand        { h.b = append(h.b, byte(v)); return h }
func (h *hand) raw(p ...byte) *hand    { h.b = append(h.b, p...); return h }
func (h *hand) cstr(s string) *hand    { h.uv(uint32(len(s)) + 1); h.b = append(h.b, s...); return h }
func (h *hand) cnull() *hand           { return h.uv(0) }
func (h *hand) carr(n int) *hand       { return h.uv(uint32(n) + 1) }
func (h *hand) notags() *hand          { return h.uv(0) }
func (h *hand) uuid(id [16]byte) *hand { h.b = append(h.b, id[:]...); return h }

// tag writes one tagged field (inside a section whose count the caller wrote).
func (h *hand) tag(tag uint32, field []byte) *hand {
	h.uv(tag).uv(uint32(len(field)))
	h.b = append(h.b, field...)
	return h
}

var (
	topicA = [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	topicB = [16]byte{0xF0, 0xE1, 0xD2, 0xC3, 0xB4, 0xA5, 0x96, 0x87, 0x78, 0x69, 0x5A, 0x4B, 0x3C, 0x2D, 0x1E, 0x0F}
)

func TestConsumerKeyRoundTrip(t *testing.T) {
	tests := []struct {
		name          string
		version       int16
		group, member string
		hand          []byte
		want          Key
	}{
		{"group metadata", ConsumerGroupMetadataKeyV3, "g", "ignored", (&hand{}).i16(3).str("g").b, Key{Version: 3, Group: "g"}},
		{"member metadata", ConsumerMemberMetadataKeyV5, "grp", "m-1", (&hand{}).i16(5).str("grp").str("m-1").b, Key{Version: 5, Group: "grp", Member: "m-1"}},
		{"target metadata", ConsumerTargetMetadataKeyV6, "grp", "", (&hand{}).i16(6).str("grp").b, Key{Version: 6, Group: "grp"}},
		{"target member", ConsumerTargetMemberKeyV7, "grp", "m", (&hand{}).i16(7).str("grp").str("m").b, Key{Version: 7, Group: "grp", Member: "m"}},
		{"current assignment", ConsumerCurrentAssignmentKeyV8, "grp", "m\x00ü", (&hand{}).i16(8).str("grp").str("m\x00ü").b, Key{Version: 8, Group: "grp", Member: "m\x00ü"}},
		{"empty names", ConsumerCurrentAssignmentKeyV8, "", "", (&hand{}).i16(8).str("").str("").b, Key{Version: 8}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			enc := EncodeConsumerGroupKey(tc.version, tc.group, tc.member)
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
			if !got.IsConsumerGroup() || got.IsOffset() {
				t.Fatalf("IsConsumerGroup %v IsOffset %v", got.IsConsumerGroup(), got.IsOffset())
			}
		})
	}
}

func TestConsumerKeyGolden(t *testing.T) {
	// Type 5, group "g1", member "m1", by hand from the schema.
	want := []byte{
		0x00, 0x05, // key version = record type 5
		0x00, 0x02, 'g', '1', // GroupId
		0x00, 0x02, 'm', '1', // MemberId
	}
	if got := EncodeConsumerGroupKey(ConsumerMemberMetadataKeyV5, "g1", "m1"); !bytes.Equal(got, want) {
		t.Fatalf("got %x, want %x", got, want)
	}
}

func TestIsConsumerGroup(t *testing.T) {
	for v := int16(-1); v <= 17; v++ {
		want := v == 3 || v == 5 || v == 6 || v == 7 || v == 8
		if got := (Key{Version: v}).IsConsumerGroup(); got != want {
			t.Errorf("version %d: IsConsumerGroup %v, want %v", v, got, want)
		}
		if got := (Key{Version: v}).IsOffset(); got != (v == 0 || v == 1) {
			t.Errorf("version %d: IsOffset %v", v, got)
		}
		if enc := EncodeConsumerGroupKey(v, "g", "m"); (enc != nil) != want {
			t.Errorf("version %d: encoded %x", v, enc)
		}
	}
}

// consumerCodec is one consumer group value type: its encoder and decoder over any.
type consumerCodec struct {
	name    string
	version int16 // key version
	encode  func(any) []byte
	decode  func([]byte) (any, error)
}

func codec[T any](name string, version int16, enc func(T) []byte, dec func([]byte) (T, error)) consumerCodec {
	return consumerCodec{
		name:    name,
		version: version,
		encode:  func(v any) []byte { return enc(v.(T)) },
		decode:  func(b []byte) (any, error) { return dec(b) },
	}
}

// consumerCodecs are the codecs of every group record value (consumer group, share
// group, share state); tests index the first five, the consumer group ones.
var consumerCodecs = []consumerCodec{
	codec("group metadata", ConsumerGroupMetadataKeyV3, EncodeConsumerGroupMetadata, DecodeConsumerGroupMetadata),
	codec("member metadata", ConsumerMemberMetadataKeyV5, EncodeConsumerMemberMetadata, DecodeConsumerMemberMetadata),
	codec("target metadata", ConsumerTargetMetadataKeyV6, EncodeConsumerTargetMetadata, DecodeConsumerTargetMetadata),
	codec("target member", ConsumerTargetMemberKeyV7, EncodeConsumerTargetMember, DecodeConsumerTargetMember),
	codec("current assignment", ConsumerCurrentAssignmentKeyV8, EncodeConsumerCurrentAssignment, DecodeConsumerCurrentAssignment),
	codec("share state", ShareStateKeyV1001, EncodeShareState, DecodeShareState),
	codec("share member metadata", ShareGroupMemberMetadataKeyV10, EncodeShareMemberMetadata, DecodeShareMemberMetadata),
	codec("share group metadata", ShareGroupMetadataKeyV11, EncodeShareGroupMetadata, DecodeShareGroupMetadata),
	codec("share target metadata", ShareGroupTargetMetadataKeyV12, EncodeShareTargetMetadata, DecodeShareTargetMetadata),
	codec("share target member", ShareGroupTargetMemberKeyV13, EncodeShareTargetMember, DecodeShareTargetMember),
	codec("share current assignment", ShareGroupCurrentAssignmentKeyV14, EncodeShareCurrentAssignment, DecodeShareCurrentAssignment),
}

// codecOf is the codec of key version v.
func codecOf(v int16) consumerCodec {
	for _, c := range consumerCodecs {
		if c.version == v {
			return c
		}
	}
	panic(fmt.Sprintf("no codec for key version %d", v))
}

func sampleMember() ConsumerMemberMetadata {
	return ConsumerMemberMetadata{
		InstanceID: "i-1", RackID: "rack-a", ClientID: "client", ClientHost: "/10.0.0.1",
		SubscribedTopicNames: []string{"orders", "payments"}, SubscribedTopicRegex: "ord.*",
		ServerAssignor: "uniform", RebalanceTimeoutMs: 45000,
	}
}

func sampleCurrent() ConsumerCurrentAssignment {
	return ConsumerCurrentAssignment{
		MemberEpoch: 12, PreviousMemberEpoch: 11, State: 1,
		Assigned:          []TopicPartitions{{TopicID: topicA, Partitions: []int32{0, 2, 4}}, {TopicID: topicB, Partitions: []int32{1}}},
		PendingRevocation: []TopicPartitions{{TopicID: topicB, Partitions: []int32{3, math.MaxInt32}}},
	}
}

// valueSample is a group record value, its codec and its encoding by hand.
type valueSample struct {
	name  string
	codec consumerCodec
	value any
	hand  []byte
}

// The values each test round-trips, with their encodings by hand: the consumer
// group ones, then the share group ones (shareSamples).
func consumerSamples() []valueSample {
	var (
		gm, mm, tm, tmm, ca = consumerCodecs[0], consumerCodecs[1], consumerCodecs[2], consumerCodecs[3], consumerCodecs[4]
	)
	m := sampleMember()
	cur := sampleCurrent()
	return append([]valueSample{
		{"group metadata without hash", gm, ConsumerGroupMetadata{Epoch: 7},
			(&hand{}).i16(0).i32(7).notags().b},
		{"group metadata with hash", gm, ConsumerGroupMetadata{Epoch: -1, MetadataHash: -2},
			(&hand{}).i16(0).i32(-1).uv(1).tag(0, (&hand{}).i64(-2).b).b},
		{"member metadata", mm, m,
			(&hand{}).i16(0).cstr("i-1").cstr("rack-a").cstr("client").cstr("/10.0.0.1").
				carr(2).cstr("orders").cstr("payments").cstr("ord.*").cstr("uniform").i32(45000).notags().b},
		{"member metadata of a classic member", mm, ConsumerMemberMetadata{ClientID: "c", ClientHost: "h", RebalanceTimeoutMs: 9,
			Classic: &ClassicMemberMetadata{SessionTimeoutMs: 45000, SupportedProtocols: []ClassicProtocol{
				{Name: "cooperative-sticky", Metadata: []byte{0, 3, 1}}, {Name: "range"}}}},
			(&hand{}).i16(0).cnull().cnull().cstr("c").cstr("h").carr(0).cnull().cnull().i32(9).
				uv(1).tag(0, (&hand{}).i32(45000).carr(2).
				cstr("cooperative-sticky").uv(4).raw(0, 3, 1).notags().
				cstr("range").uv(1).notags().
				notags().b).b},
		{"member metadata nulls and empties", mm, ConsumerMemberMetadata{RebalanceTimeoutMs: -1},
			(&hand{}).i16(0).cnull().cnull().cstr("").cstr("").carr(0).cnull().cnull().i32(-1).notags().b},
		{"target metadata", tm, ConsumerTargetMetadata{AssignmentEpoch: 3},
			(&hand{}).i16(0).i32(3).notags().b},
		{"target member", tmm, ConsumerTargetMember{TopicPartitions: cur.Assigned},
			(&hand{}).i16(0).carr(2).
				uuid(topicA).carr(3).i32(0).i32(2).i32(4).notags().
				uuid(topicB).carr(1).i32(1).notags().
				notags().b},
		{"target member empty", tmm, ConsumerTargetMember{},
			(&hand{}).i16(0).carr(0).notags().b},
		{"target member topic without partitions", tmm, ConsumerTargetMember{TopicPartitions: []TopicPartitions{{TopicID: topicA}}},
			(&hand{}).i16(0).carr(1).uuid(topicA).carr(0).notags().notags().b},
		{"current assignment", ca, cur,
			(&hand{}).i16(0).i32(12).i32(11).i8(1).
				carr(2).uuid(topicA).carr(3).i32(0).i32(2).i32(4).notags().uuid(topicB).carr(1).i32(1).notags().
				carr(1).uuid(topicB).carr(2).i32(3).i32(math.MaxInt32).notags().
				notags().b},
		{"current assignment empty", ca, ConsumerCurrentAssignment{State: -1},
			(&hand{}).i16(0).i32(0).i32(0).i8(-1).carr(0).carr(0).notags().b},
	}, shareSamples()...)
}

func TestConsumerValueRoundTrip(t *testing.T) {
	for _, tc := range consumerSamples() {
		t.Run(tc.name, func(t *testing.T) {
			enc := tc.codec.encode(tc.value)
			if !bytes.Equal(enc, tc.hand) {
				t.Fatalf("encoded %x\nby hand %x", enc, tc.hand)
			}
			got, err := tc.codec.decode(enc)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.value) {
				t.Fatalf("got %+v\nwant %+v", got, tc.value)
			}
			if err := checkGroupRecordValue(tc.codec.version, enc); err != nil {
				t.Fatalf("checkGroupRecordValue: %v", err)
			}
		})
	}
}

func TestConsumerValueGolden(t *testing.T) {
	// Type 8 by hand from the schema: epochs 5 and 4, state 1, topicA's partitions
	// 0 and 2 assigned, nothing pending revocation.
	want := []byte{
		0x00, 0x00, // value version 0
		0x00, 0x00, 0x00, 0x05, // MemberEpoch
		0x00, 0x00, 0x00, 0x04, // PreviousMemberEpoch
		0x01,                                                                                           // State
		0x02,                                                                                           // AssignedPartitions: 1 entry (+1)
		0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, // TopicId
		0x03,                   // Partitions: 2 entries (+1)
		0x00, 0x00, 0x00, 0x00, // 0
		0x00, 0x00, 0x00, 0x02, // 2
		0x00, // entry's tagged fields: none
		0x01, // PartitionsPendingRevocation: 0 entries (+1)
		0x00, // tagged fields: none
	}
	a := ConsumerCurrentAssignment{MemberEpoch: 5, PreviousMemberEpoch: 4, State: 1,
		Assigned: []TopicPartitions{{TopicID: topicA, Partitions: []int32{0, 2}}}}
	if got := EncodeConsumerCurrentAssignment(a); !bytes.Equal(got, want) {
		t.Fatalf("got  %x\nwant %x", got, want)
	}
	if got, err := DecodeConsumerCurrentAssignment(want); err != nil || !reflect.DeepEqual(got, a) {
		t.Fatalf("decoded %+v, %v", got, err)
	}

	// Type 3 with a metadata hash: the tag section holds tag 0, size 8.
	want = []byte{0x00, 0x00, 0x00, 0x00, 0x00, 0x2a, 0x01, 0x00, 0x08, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08}
	g := ConsumerGroupMetadata{Epoch: 42, MetadataHash: 0x0102030405060708}
	if got := EncodeConsumerGroupMetadata(g); !bytes.Equal(got, want) {
		t.Fatalf("got  %x\nwant %x", got, want)
	}
}

func TestConsumerValueUnknownTags(t *testing.T) {
	future := []byte("future")
	tests := []struct {
		name  string
		codec consumerCodec
		in    []byte
		want  any
	}{
		{"group metadata: hash among unknown tags", consumerCodecs[0],
			(&hand{}).i16(0).i32(9).uv(3).tag(1, future).tag(0, (&hand{}).i64(77).b).tag(200, nil).b,
			ConsumerGroupMetadata{Epoch: 9, MetadataHash: 77}},
		{"group metadata: explicit zero hash", consumerCodecs[0],
			(&hand{}).i16(0).i32(9).uv(1).tag(0, make([]byte, 8)).b,
			ConsumerGroupMetadata{Epoch: 9}},
		{"member metadata: classic member metadata among unknown tags", consumerCodecs[1],
			(&hand{}).i16(0).cnull().cnull().cstr("c").cstr("h").carr(1).cstr("t").cnull().cnull().i32(5).
				uv(2).tag(0, (&hand{}).i32(10).carr(0).uv(1).tag(4, future).b).tag(1, future).b,
			ConsumerMemberMetadata{ClientID: "c", ClientHost: "h", SubscribedTopicNames: []string{"t"}, RebalanceTimeoutMs: 5,
				Classic: &ClassicMemberMetadata{SessionTimeoutMs: 10}}},
		{"target metadata", consumerCodecs[2],
			(&hand{}).i16(0).i32(4).uv(1).tag(3, future).b,
			ConsumerTargetMetadata{AssignmentEpoch: 4}},
		{"target member: nested and top-level tags", consumerCodecs[3],
			(&hand{}).i16(0).carr(1).uuid(topicB).carr(1).i32(6).uv(1).tag(0, future).uv(1).tag(9, future).b,
			ConsumerTargetMember{TopicPartitions: []TopicPartitions{{TopicID: topicB, Partitions: []int32{6}}}}},
		{"current assignment: nested tags", consumerCodecs[4],
			(&hand{}).i16(0).i32(2).i32(1).i8(0).carr(0).carr(1).uuid(topicA).carr(0).uv(2).tag(1, nil).tag(2, future).notags().b,
			ConsumerCurrentAssignment{MemberEpoch: 2, PreviousMemberEpoch: 1, PendingRevocation: []TopicPartitions{{TopicID: topicA}}}},
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

func TestConsumerValueErrors(t *testing.T) {
	for _, tc := range consumerSamples() {
		t.Run(tc.name, func(t *testing.T) {
			for n := 0; n < len(tc.hand); n++ {
				if _, err := tc.codec.decode(tc.hand[:n]); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("prefix %d of %d: %v, want ErrCorrupt", n, len(tc.hand), err)
				}
			}
			if _, err := tc.codec.decode(append(bytes.Clone(tc.hand), 0)); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("trailing byte: %v, want ErrCorrupt", err)
			}
			for _, v := range []int16{1, 2, -1, math.MaxInt16} {
				in := append((&hand{}).i16(v).b, tc.hand[2:]...)
				if _, err := tc.codec.decode(in); !errors.Is(err, ErrUnsupportedVersion) {
					t.Fatalf("value version %d: %v, want ErrUnsupportedVersion", v, err)
				}
				if err := checkGroupRecordValue(tc.codec.version, in); !errors.Is(err, ErrUnsupportedVersion) {
					t.Fatalf("checkGroupRecordValue version %d: %v", v, err)
				}
			}
		})
	}
	tests := []struct {
		name  string
		codec consumerCodec
		in    []byte
	}{
		{"hash of 4 bytes", consumerCodecs[0], (&hand{}).i16(0).i32(1).uv(1).tag(0, []byte{1, 2, 3, 4}).b},
		{"hash of 9 bytes", consumerCodecs[0], (&hand{}).i16(0).i32(1).uv(1).tag(0, make([]byte, 9)).b},
		{"tag past end", consumerCodecs[0], (&hand{}).i16(0).i32(1).uv(1).uv(5).uv(100).b},
		{"huge tag count", consumerCodecs[2], (&hand{}).i16(0).i32(1).uv(math.MaxUint32).b},
		{"null client id", consumerCodecs[1], (&hand{}).i16(0).cnull().cnull().cnull().cstr("").carr(0).cnull().cnull().i32(0).notags().b},
		{"null topic list", consumerCodecs[1], (&hand{}).i16(0).cnull().cnull().cstr("").cstr("").uv(0).cnull().cnull().i32(0).notags().b},
		{"null topic name", consumerCodecs[1], (&hand{}).i16(0).cnull().cnull().cstr("").cstr("").carr(1).cnull().cnull().cnull().i32(0).notags().b},
		{"topic count past end", consumerCodecs[1], (&hand{}).i16(0).cnull().cnull().cstr("").cstr("").carr(math.MaxInt32 - 1).b},
		{"overlong varint", consumerCodecs[1], (&hand{}).i16(0).raw(0xFF, 0xFF, 0xFF, 0xFF, 0x7F).b},
		{"null partitions array", consumerCodecs[3], (&hand{}).i16(0).carr(1).uuid(topicA).uv(0).notags().notags().b},
		{"null topic partitions array", consumerCodecs[3], (&hand{}).i16(0).uv(0).notags().b},
		{"topic count past end", consumerCodecs[3], (&hand{}).i16(0).carr(2).uuid(topicA).carr(0).notags().notags().b},
		{"huge topic count", consumerCodecs[4], (&hand{}).i16(0).i32(1).i32(0).i8(0).carr(math.MaxInt32 - 1).raw(make([]byte, 64)...).b},
		{"partition count past end", consumerCodecs[4], (&hand{}).i16(0).i32(1).i32(0).i8(0).carr(1).uuid(topicA).carr(5).i32(1).i32(2).notags().carr(0).notags().b},
		{"compact length over int32", consumerCodecs[3], (&hand{}).i16(0).uv(math.MaxUint32).b},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.codec.decode(tc.in); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err %v, want ErrCorrupt", err)
			}
		})
	}
}

// TestConsumerValueBoundedAllocation: a count the bytes cannot hold fails before
// anything is allocated for it.
func TestConsumerValueBoundedAllocation(t *testing.T) {
	in := (&hand{}).i16(0).i32(1).i32(0).i8(0).carr(math.MaxInt32 - 1).raw(make([]byte, 64)...).b
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := DecodeConsumerCurrentAssignment(in)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("err %v, want ErrCorrupt", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 64<<10 {
		t.Fatalf("%d bytes allocated decoding a forged count", n)
	}
}

func TestCheckConsumerValueWrongType(t *testing.T) {
	// A value of one type under another type's key fails (here type 3's value,
	// too short for type 8's).
	v := EncodeConsumerGroupMetadata(ConsumerGroupMetadata{Epoch: 1})
	if err := checkGroupRecordValue(ConsumerCurrentAssignmentKeyV8, v); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("err %v, want ErrCorrupt", err)
	}
	if err := checkGroupRecordValue(4, v); !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("type 4: %v, want ErrUnsupportedVersion", err)
	}
}
