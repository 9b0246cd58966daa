package offsets

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// hand builds bytes field by field, as the Kafka schema reads.
type hand struct{ b []byte }

func (h *hand) i16(v int16) *hand { h.b = append(h.b, byte(uint16(v)>>8), byte(v)); return h }
func (h *hand) i32(v int32) *hand {
	u := uint32(v)
	h.b = append(h.b, byte(u>>24), byte(u>>16), byte(u>>8), byte(u))
	return h
}
func (h *hand) i64(v int64) *hand { h.i32(int32(uint64(v) >> 32)); return h.i32(int32(uint32(v))) }
func (h *hand) str(s string) *hand {
	h.i16(int16(len(s)))
	h.b = append(h.b, s...)
	return h
}
func (h *hand) null() *hand { return h.i16(-1) }
func (h *hand) bytes(p []byte) *hand {
	h.i32(int32(len(p)))
	h.b = append(h.b, p...)
	return h
}

func TestKeyRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		enc  []byte
		want Key
	}{
		{"offset v0", appendOffsetKey(nil, 0, "g", "t", 7), Key{Version: 0, Group: "g", Topic: "t", Partition: 7}},
		{"offset v1", EncodeOffsetKey("group-1", "orders", 2147483647), Key{Version: 1, Group: "group-1", Topic: "orders", Partition: 2147483647}},
		{"offset v1 empty names", EncodeOffsetKey("", "", -1), Key{Version: 1, Partition: -1}},
		{"group v2", EncodeGroupKey("g\x00ü"), Key{Version: 2, Group: "g\x00ü"}},
		{"hand offset v1", (&hand{}).i16(1).str("grp").str("topic").i32(3).b, Key{Version: 1, Group: "grp", Topic: "topic", Partition: 3}},
		{"hand group v2", (&hand{}).i16(2).str("grp").b, Key{Version: 2, Group: "grp"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeKey(tc.enc)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			if got.IsOffset() != (tc.want.Version < 2) {
				t.Fatalf("IsOffset %v for version %d", got.IsOffset(), got.Version)
			}
		})
	}
}

func TestKeyMatchesKmsg(t *testing.T) {
	k := kmsg.NewOffsetCommitKey()
	k.Version, k.Group, k.Topic, k.Partition = 1, "g", "t", 9
	if got := EncodeOffsetKey("g", "t", 9); !bytes.Equal(got, k.AppendTo(nil)) {
		t.Fatalf("offset key %x, kmsg %x", got, k.AppendTo(nil))
	}
	g := kmsg.NewGroupMetadataKey()
	g.Version, g.Group = 2, "g"
	if got := EncodeGroupKey("g"); !bytes.Equal(got, g.AppendTo(nil)) {
		t.Fatalf("group key %x, kmsg %x", got, g.AppendTo(nil))
	}
}

func TestDecodeKeyErrors(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, ErrCorrupt},
		{"one byte", []byte{0}, ErrCorrupt},
		{"version only", []byte{0, 1}, ErrCorrupt},
		{"short partition", (&hand{}).i16(1).str("g").str("t").i16(0).b, ErrCorrupt},
		{"negative string", (&hand{}).i16(1).i16(-1).b, ErrCorrupt},
		{"string past end", (&hand{}).i16(2).i16(0x7fff).b, ErrCorrupt},
		{"trailing", append(EncodeGroupKey("g"), 0), ErrCorrupt},
		{"partition metadata type 4", (&hand{}).i16(4).str("g").b, ErrUnsupportedVersion},
		{"share group type 9", (&hand{}).i16(9).str("g").b, ErrUnsupportedVersion},
		{"regular expression type 16", (&hand{}).i16(16).str("g").str("re").b, ErrUnsupportedVersion},
		{"consumer metadata trailing", append(EncodeConsumerGroupKey(3, "g", ""), 0), ErrCorrupt},
		{"consumer member missing member", (&hand{}).i16(5).str("g").b, ErrCorrupt},
		{"consumer member trailing", append(EncodeConsumerGroupKey(8, "g", "m"), 1), ErrCorrupt},
		{"consumer member negative member", (&hand{}).i16(7).str("g").i16(-1).b, ErrCorrupt},
		{"consumer member past end", (&hand{}).i16(7).str("g").i16(3).b, ErrCorrupt},
		{"negative version", (&hand{}).i16(-1).b, ErrUnsupportedVersion},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := DecodeKey(tc.in); !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
		})
	}
}

func TestOffsetValueVersions(t *testing.T) {
	c := Committed{Offset: 1 << 40, LeaderEpoch: 17, Metadata: "meta", CommitTimestamp: 1700000000000, ExpireTimestamp: 1700000060000}
	tests := []struct {
		name    string
		version int16
		hand    []byte
		want    Committed
	}{
		{"v0", 0, (&hand{}).i16(0).i64(c.Offset).str("meta").i64(c.CommitTimestamp).b,
			Committed{Offset: c.Offset, LeaderEpoch: -1, Metadata: "meta", CommitTimestamp: c.CommitTimestamp}},
		{"v1", 1, (&hand{}).i16(1).i64(c.Offset).str("meta").i64(c.CommitTimestamp).i64(c.ExpireTimestamp).b,
			Committed{Offset: c.Offset, LeaderEpoch: -1, Metadata: "meta", CommitTimestamp: c.CommitTimestamp, ExpireTimestamp: c.ExpireTimestamp}},
		{"v2", 2, (&hand{}).i16(2).i64(c.Offset).str("meta").i64(c.CommitTimestamp).b,
			Committed{Offset: c.Offset, LeaderEpoch: -1, Metadata: "meta", CommitTimestamp: c.CommitTimestamp}},
		{"v3", 3, (&hand{}).i16(3).i64(c.Offset).i32(17).str("meta").i64(c.CommitTimestamp).b,
			Committed{Offset: c.Offset, LeaderEpoch: 17, Metadata: "meta", CommitTimestamp: c.CommitTimestamp}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			enc := appendOffsetValue(nil, tc.version, c)
			if !bytes.Equal(enc, tc.hand) {
				t.Fatalf("encoded %x, by hand %x", enc, tc.hand)
			}
			k := kmsg.NewOffsetCommitValue()
			k.Version, k.Offset, k.LeaderEpoch, k.Metadata = tc.version, c.Offset, c.LeaderEpoch, c.Metadata
			k.CommitTimestamp, k.ExpireTimestamp = c.CommitTimestamp, c.ExpireTimestamp
			if kb := k.AppendTo(nil); !bytes.Equal(enc, kb) {
				t.Fatalf("encoded %x, kmsg %x", enc, kb)
			}
			got, err := DecodeOffsetValue(tc.hand)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestEncodeOffsetValueWrittenVersion(t *testing.T) {
	tests := []struct {
		name    string
		c       Committed
		version byte
	}{
		{"no expire writes v3", Committed{Offset: 5, LeaderEpoch: 2, CommitTimestamp: 9}, 3},
		{"negative expire writes v3", Committed{Offset: 5, LeaderEpoch: 2, CommitTimestamp: 9, ExpireTimestamp: -1}, 3},
		{"expire writes v1", Committed{Offset: 5, LeaderEpoch: -1, CommitTimestamp: 9, ExpireTimestamp: 10}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			enc := EncodeOffsetValue(tc.c)
			if enc[0] != 0 || enc[1] != tc.version {
				t.Fatalf("version bytes %x, want %d", enc[:2], tc.version)
			}
			got, err := DecodeOffsetValue(enc)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.c
			if want.ExpireTimestamp < 0 {
				want.ExpireTimestamp = 0
			}
			if got != want {
				t.Fatalf("got %+v, want %+v", got, want)
			}
		})
	}
}

func TestDecodeOffsetValueErrors(t *testing.T) {
	good := EncodeOffsetValue(Committed{Offset: 1, Metadata: "abc"})
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, ErrCorrupt},
		{"version only", []byte{0, 3}, ErrCorrupt},
		{"truncated", good[:len(good)-1], ErrCorrupt},
		{"trailing", append(bytes.Clone(good), 1), ErrCorrupt},
		{"negative metadata", (&hand{}).i16(0).i64(1).i16(-1).i64(2).b, ErrCorrupt},
		{"metadata past end", (&hand{}).i16(0).i64(1).i16(0x7fff).b, ErrCorrupt},
		{"v5", (&hand{}).i16(5).i64(1).b, ErrUnsupportedVersion},
		{"v4 truncated", (&hand{}).i16(4).i64(1).b, ErrCorrupt},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := DecodeOffsetValue(tc.in); !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
		})
	}
}

func sampleGroup() GroupMetadata {
	return GroupMetadata{
		ProtocolType:          "consumer",
		Generation:            7,
		Protocol:              "cooperative-sticky",
		Leader:                "m1",
		CurrentStateTimestamp: 1700000000000,
		Members: []Member{
			{MemberID: "m1", GroupInstanceID: "i1", ClientID: "c1", ClientHost: "/127.0.0.1",
				RebalanceTimeoutMs: 60000, SessionTimeoutMs: 45000, Subscription: []byte{1, 2}, Assignment: []byte{3}},
			{MemberID: "m2", ClientID: "c2", ClientHost: "/10.0.0.2", RebalanceTimeoutMs: 30000, SessionTimeoutMs: 10000},
		},
	}
}

func TestGroupValueVersions(t *testing.T) {
	g := sampleGroup()
	for v := GroupValueV0; v <= GroupValueV3; v++ {
		t.Run("v"+string(rune('0'+v)), func(t *testing.T) {
			enc := appendGroupValue(nil, v, g)

			// By hand, per the schema.
			h := (&hand{}).i16(v).str("consumer").i32(7).str("cooperative-sticky").str("m1")
			if v >= 2 {
				h.i64(g.CurrentStateTimestamp)
			}
			h.i32(2)
			for _, m := range g.Members {
				h.str(m.MemberID)
				if v >= 3 {
					if m.GroupInstanceID == "" {
						h.null()
					} else {
						h.str(m.GroupInstanceID)
					}
				}
				h.str(m.ClientID).str(m.ClientHost)
				if v >= 1 {
					h.i32(m.RebalanceTimeoutMs)
				}
				h.i32(m.SessionTimeoutMs).bytes(m.Subscription).bytes(m.Assignment)
			}
			if !bytes.Equal(enc, h.b) {
				t.Fatalf("encoded %x\nby hand %x", enc, h.b)
			}

			// Against kmsg's independent encoder.
			k := kmsgGroupValue(v, g)
			if kb := k.AppendTo(nil); !bytes.Equal(enc, kb) {
				t.Fatalf("encoded %x\nkmsg    %x", enc, kb)
			}

			got, err := DecodeGroupMetadataValue(enc)
			if err != nil {
				t.Fatal(err)
			}
			want := g
			want.Members = append([]Member(nil), g.Members...)
			if v < 2 {
				want.CurrentStateTimestamp = NoTimestamp
			}
			for i := range want.Members {
				if v < 3 {
					want.Members[i].GroupInstanceID = ""
				}
				if v < 1 {
					want.Members[i].RebalanceTimeoutMs = want.Members[i].SessionTimeoutMs
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestGroupValueEmptyGroup(t *testing.T) {
	// An Empty group as Kafka writes it: null protocol and leader, no members.
	in := (&hand{}).i16(3).str("consumer").i32(3).null().null().i64(5).i32(0).b
	got, err := DecodeGroupMetadataValue(in)
	if err != nil {
		t.Fatal(err)
	}
	want := GroupMetadata{ProtocolType: "consumer", Generation: 3, CurrentStateTimestamp: 5}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if enc := EncodeGroupMetadataValue(got); !bytes.Equal(enc, in) {
		t.Fatalf("re-encoded %x, want %x", enc, in)
	}
}

func TestDecodeGroupValueErrors(t *testing.T) {
	good := EncodeGroupMetadataValue(sampleGroup())
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, ErrCorrupt},
		{"truncated", good[:len(good)-1], ErrCorrupt},
		{"trailing", append(bytes.Clone(good), 0), ErrCorrupt},
		{"huge member count", (&hand{}).i16(3).str("c").i32(1).null().null().i64(0).i32(0x7fffffff).b, ErrCorrupt},
		{"negative member count", (&hand{}).i16(3).str("c").i32(1).null().null().i64(0).i32(-1).b, ErrCorrupt},
		{"bad nullable", (&hand{}).i16(3).str("c").i32(1).i16(-2).b, ErrCorrupt},
		{"negative bytes", (&hand{}).i16(0).str("c").i32(1).null().null().i32(1).
			str("m").str("c").str("h").i32(1).i32(-5).b, ErrCorrupt},
		{"v5", (&hand{}).i16(5).b, ErrUnsupportedVersion},
		{"v4 truncated", (&hand{}).i16(4).b, ErrCorrupt},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := DecodeGroupMetadataValue(tc.in); !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
		})
	}
}

func TestPartitionFor(t *testing.T) {
	tests := []struct {
		group string
		n     int32
		want  int32
	}{
		{"", 50, 0},
		{"a", 50, 47},  // "a".hashCode() == 97
		{"ab", 50, 5},  // 97*31+98 == 3105
		{"Aa", 50, 12}, // 2112, the classic collision with "BB"
		{"BB", 50, 12},
		{"polygenelubricants", 50, 0}, // hashCode == Integer.MIN_VALUE; Kafka's Utils.abs gives 0
		{"é", 50, 33},                 // 233
		{"\U0001F600", 50, 49},        // UTF-16 D83D DE00: 55357*31+56832 == 1772899
		{strings.Repeat("z", 100), 1, 0},
	}
	for _, tc := range tests {
		t.Run(tc.group, func(t *testing.T) {
			if got := PartitionFor(tc.group, tc.n); got != tc.want {
				t.Fatalf("got %d, want %d", got, tc.want)
			}
		})
	}
}

func kmsgOffsetValueV4() []byte {
	k := kmsg.NewOffsetCommitValue()
	k.Version, k.Offset, k.LeaderEpoch, k.Metadata, k.CommitTimestamp = 4, 77, 6, "flex", 1234
	k.TopicID = [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	k.UnknownTags.Set(9, []byte("future"))
	return k.AppendTo(nil)
}

// kmsgGroupValue is g as kmsg's independent encoder holds it at version v.
func kmsgGroupValue(v int16, g GroupMetadata) *kmsg.GroupMetadataValue {
	k := kmsg.NewGroupMetadataValue()
	k.Version, k.ProtocolType, k.Generation = v, g.ProtocolType, g.Generation
	k.Protocol, k.Leader, k.CurrentStateTimestamp = &g.Protocol, &g.Leader, g.CurrentStateTimestamp
	for _, m := range g.Members {
		km := kmsg.NewGroupMetadataValueMember()
		km.MemberID, km.ClientID, km.ClientHost = m.MemberID, m.ClientID, m.ClientHost
		if m.GroupInstanceID != "" {
			km.InstanceID = &m.GroupInstanceID
		}
		km.RebalanceTimeoutMillis, km.SessionTimeoutMillis = m.RebalanceTimeoutMs, m.SessionTimeoutMs
		km.Subscription, km.Assignment = m.Subscription, m.Assignment
		k.Members = append(k.Members, km)
	}
	return &k
}

func kmsgGroupValueV4() []byte {
	k := kmsgGroupValue(4, sampleGroup())
	for i := range k.Members {
		k.Members[i].UnknownTags.Set(3, []byte{0xAA})
	}
	k.UnknownTags.Set(5, []byte("top"))
	return k.AppendTo(nil)
}

func TestReadFlexibleV4(t *testing.T) {
	t.Run("offset value", func(t *testing.T) {
		got, err := DecodeOffsetValue(kmsgOffsetValueV4())
		if err != nil {
			t.Fatal(err)
		}
		want := Committed{Offset: 77, LeaderEpoch: 6, Metadata: "flex", CommitTimestamp: 1234}
		if got != want {
			t.Fatalf("got %+v, want %+v", got, want)
		}
	})
	t.Run("offset value by hand", func(t *testing.T) {
		// version 4, offset, epoch, compact "ab" (len+1 = 3), commit ts, no tags.
		in := append((&hand{}).i16(4).i64(1).i32(2).b, 3, 'a', 'b')
		in = append((&hand{b: in}).i64(3).b, 0)
		got, err := DecodeOffsetValue(in)
		if err != nil || got != (Committed{Offset: 1, LeaderEpoch: 2, Metadata: "ab", CommitTimestamp: 3}) {
			t.Fatalf("got %+v %v", got, err)
		}
	})
	t.Run("group value", func(t *testing.T) {
		got, err := DecodeGroupMetadataValue(kmsgGroupValueV4())
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, sampleGroup()) {
			t.Fatalf("got %+v\nwant %+v", got, sampleGroup())
		}
	})
	t.Run("truncated", func(t *testing.T) {
		ob, gb := kmsgOffsetValueV4(), kmsgGroupValueV4()
		for n := 0; n < len(ob); n++ {
			if _, err := DecodeOffsetValue(ob[:n]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("offset value prefix %d: %v", n, err)
			}
		}
		for n := 0; n < len(gb); n++ {
			if _, err := DecodeGroupMetadataValue(gb[:n]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("group value prefix %d: %v", n, err)
			}
		}
	})
	t.Run("overlong varint", func(t *testing.T) {
		in := append((&hand{}).i16(4).i64(1).i32(2).b, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F)
		if _, err := DecodeOffsetValue(in); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("err %v", err)
		}
	})
}
