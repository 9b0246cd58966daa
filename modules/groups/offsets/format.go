package offsets

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/sluicehq/sluice/internal/kafkahash"
)

// Key versions of __consumer_offsets records. Frozen: they are Kafka's.
const (
	// OffsetKeyV0 and OffsetKeyV1 share one schema; Kafka writes V1.
	OffsetKeyV0 int16 = 0
	OffsetKeyV1 int16 = 1
	// GroupKeyV2 is the group metadata key.
	GroupKeyV2 int16 = 2
)

// Versions of the offset commit value that are read (0-4) and written (1, 3).
const (
	OffsetValueV0 int16 = 0
	OffsetValueV1 int16 = 1
	OffsetValueV2 int16 = 2
	OffsetValueV3 int16 = 3
	// OffsetValueV4 is v3 in Kafka's flexible encoding (compact strings, tagged
	// fields, tag 0 a topic id); read only, tags are skipped.
	OffsetValueV4 int16 = 4
)

// Versions of the group metadata value that are read (0-4); only 3 is written.
const (
	GroupValueV0 int16 = 0
	GroupValueV1 int16 = 1
	GroupValueV2 int16 = 2
	GroupValueV3 int16 = 3
	// GroupValueV4 is v3 in the flexible encoding; read only, tags are skipped.
	GroupValueV4 int16 = 4
)

// NoLeaderEpoch is the leader epoch of a commit that carries none (values v0-v2).
const NoLeaderEpoch int32 = -1

// NoTimestamp is the current state timestamp of group values v0-v1.
const NoTimestamp int64 = -1

// ErrCorrupt marks bytes that do not decode: short, overlong, negative lengths,
// trailing garbage. Test with errors.Is.
var ErrCorrupt = errors.New("offsets: corrupt record")

// ErrUnsupportedVersion marks a record whose version this package does not read.
var ErrUnsupportedVersion = errors.New("offsets: unsupported record version")

// Committed is one committed offset. Timestamps are milliseconds since the epoch.
// ExpireTimestamp <= 0 means "none" (the usual case since Kafka 2.1); a positive
// one is only carried by value version 1, which cannot carry a leader epoch.
type Committed struct {
	Offset          int64
	LeaderEpoch     int32
	Metadata        string
	CommitTimestamp int64
	ExpireTimestamp int64
}

// Key is a decoded __consumer_offsets record key. Versions 0 and 1 are offset
// commit keys (Group, Topic, Partition); version 2 is a group metadata key (Group);
// versions 3, 5, 6, 7 and 8 are KIP-848 consumer group records (Group, and Member for
// 5, 7 and 8; see IsConsumerGroup); versions 10-14 are KIP-932 share group records
// (Group, and Member for 10, 13 and 14; see IsShareGroup); version 1001 is Sluice's
// share-partition state (Group, TopicID, Partition; share.go).
type Key struct {
	Version   int16
	Group     string
	Topic     string
	Partition int32
	Member    string
	TopicID   [16]byte
}

// IsOffset reports whether k is an offset commit key (versions 0 and 1).
func (k Key) IsOffset() bool { return k.Version == OffsetKeyV0 || k.Version == OffsetKeyV1 }

// GroupMetadata is a decoded group metadata value. Nullable strings (Protocol,
// Leader, Member.GroupInstanceID) decode null as "" and encode "" as null.
type GroupMetadata struct {
	ProtocolType          string
	Generation            int32
	Protocol              string
	Leader                string
	CurrentStateTimestamp int64 // NoTimestamp when absent (v0-v1)
	Members               []Member
}

// Member is one member of a classic group as stored in group metadata.
type Member struct {
	MemberID           string
	GroupInstanceID    string // v3+
	ClientID           string
	ClientHost         string
	RebalanceTimeoutMs int32 // v1+; v0 decodes it as SessionTimeoutMs, as Kafka does
	SessionTimeoutMs   int32
	Subscription       []byte
	Assignment         []byte
}

// EncodeOffsetKey returns the version 1 offset commit key.
func EncodeOffsetKey(group, topic string, partition int32) []byte {
	return appendOffsetKey(nil, OffsetKeyV1, group, topic, partition)
}

// EncodeGroupKey returns the version 2 group metadata key.
func EncodeGroupKey(group string) []byte {
	dst := binary.BigEndian.AppendUint16(nil, uint16(GroupKeyV2))
	return appendString(dst, group)
}

func appendOffsetKey(dst []byte, version int16, group, topic string, partition int32) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(version))
	dst = appendString(dst, group)
	dst = appendString(dst, topic)
	return binary.BigEndian.AppendUint32(dst, uint32(partition))
}

// DecodeKey decodes a record key. Unknown versions (among them record types 4, 9,
// and every one from 15 up but 1001) return ErrUnsupportedVersion with the version
// set.
func DecodeKey(b []byte) (Key, error) {
	r := reader{b: b}
	k := Key{Version: r.int16()}
	if r.err != nil {
		return Key{}, r.err
	}
	switch k.Version {
	case OffsetKeyV0, OffsetKeyV1:
		k.Group = r.string()
		k.Topic = r.string()
		k.Partition = r.int32()
	case GroupKeyV2, ConsumerGroupMetadataKeyV3, ConsumerTargetMetadataKeyV6,
		ShareGroupMetadataKeyV11, ShareGroupTargetMetadataKeyV12:
		k.Group = r.string()
	case ConsumerMemberMetadataKeyV5, ConsumerTargetMemberKeyV7, ConsumerCurrentAssignmentKeyV8,
		ShareGroupMemberMetadataKeyV10, ShareGroupTargetMemberKeyV13, ShareGroupCurrentAssignmentKeyV14:
		k.Group = r.string()
		k.Member = r.string()
	case ShareStateKeyV1001:
		k.Group = r.string()
		copy(k.TopicID[:], r.take(16))
		k.Partition = r.int32()
	default:
		return Key{Version: k.Version}, fmt.Errorf("key version %d: %w", k.Version, ErrUnsupportedVersion)
	}
	if err := r.done(); err != nil {
		return Key{}, fmt.Errorf("key version %d: %w", k.Version, err)
	}
	return k, nil
}

// EncodeOffsetValue returns c as Kafka writes it: version 1 when c carries an
// expire timestamp (the leader epoch is then lost), else version 3.
func EncodeOffsetValue(c Committed) []byte {
	if c.ExpireTimestamp > 0 {
		return appendOffsetValue(nil, OffsetValueV1, c)
	}
	return appendOffsetValue(nil, OffsetValueV3, c)
}

// appendOffsetValue writes any readable version; tests use it for v0 and v2.
func appendOffsetValue(dst []byte, version int16, c Committed) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(version))
	dst = binary.BigEndian.AppendUint64(dst, uint64(c.Offset))
	if version >= OffsetValueV3 {
		dst = binary.BigEndian.AppendUint32(dst, uint32(c.LeaderEpoch))
	}
	dst = appendString(dst, c.Metadata)
	dst = binary.BigEndian.AppendUint64(dst, uint64(c.CommitTimestamp))
	if version == OffsetValueV1 {
		dst = binary.BigEndian.AppendUint64(dst, uint64(c.ExpireTimestamp))
	}
	return dst
}

// DecodeOffsetValue decodes an offset commit value of version 0-4.
func DecodeOffsetValue(b []byte) (Committed, error) {
	r := reader{b: b}
	v, err := r.valueVersion("offset value", OffsetValueV0, OffsetValueV4, OffsetValueV4)
	if err != nil {
		return Committed{}, err
	}
	c := Committed{LeaderEpoch: NoLeaderEpoch}
	c.Offset = r.int64()
	if v >= OffsetValueV3 {
		c.LeaderEpoch = r.int32()
	}
	c.Metadata = r.string()
	c.CommitTimestamp = r.int64()
	if v == OffsetValueV1 {
		c.ExpireTimestamp = r.int64()
	}
	r.tags()
	if err := r.done(); err != nil {
		return Committed{}, fmt.Errorf("offset value version %d: %w", v, err)
	}
	return c, nil
}

// EncodeGroupMetadataValue returns g as a version 3 group metadata value.
func EncodeGroupMetadataValue(g GroupMetadata) []byte {
	return appendGroupValue(nil, GroupValueV3, g)
}

func appendGroupValue(dst []byte, version int16, g GroupMetadata) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(version))
	dst = appendString(dst, g.ProtocolType)
	dst = binary.BigEndian.AppendUint32(dst, uint32(g.Generation))
	dst = appendNullableString(dst, g.Protocol)
	dst = appendNullableString(dst, g.Leader)
	if version >= GroupValueV2 {
		dst = binary.BigEndian.AppendUint64(dst, uint64(g.CurrentStateTimestamp))
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(g.Members)))
	for _, m := range g.Members {
		dst = appendString(dst, m.MemberID)
		if version >= GroupValueV3 {
			dst = appendNullableString(dst, m.GroupInstanceID)
		}
		dst = appendString(dst, m.ClientID)
		dst = appendString(dst, m.ClientHost)
		if version >= GroupValueV1 {
			dst = binary.BigEndian.AppendUint32(dst, uint32(m.RebalanceTimeoutMs))
		}
		dst = binary.BigEndian.AppendUint32(dst, uint32(m.SessionTimeoutMs))
		dst = appendBytes(dst, m.Subscription)
		dst = appendBytes(dst, m.Assignment)
	}
	return dst
}

// minMemberLen is the smallest encoding of one member (v0: three empty strings,
// session timeout, two empty byte arrays); it bounds the member count by the
// bytes present, so a forged count cannot force a large allocation.
const minMemberLen = 3*2 + 4 + 2*4

// minFlexMemberLen is the same for v4: four compact strings, two timeouts, two
// compact byte arrays and an empty tag section.
const minFlexMemberLen = 4 + 2*4 + 2 + 1

// DecodeGroupMetadataValue decodes a group metadata value of version 0-4.
func DecodeGroupMetadataValue(b []byte) (GroupMetadata, error) {
	r := reader{b: b}
	v, err := r.valueVersion("group value", GroupValueV0, GroupValueV4, GroupValueV4)
	if err != nil {
		return GroupMetadata{}, err
	}
	g := GroupMetadata{CurrentStateTimestamp: NoTimestamp}
	g.ProtocolType = r.string()
	g.Generation = r.int32()
	g.Protocol = r.nullableString()
	g.Leader = r.nullableString()
	if v >= GroupValueV2 {
		g.CurrentStateTimestamp = r.int64()
	}
	n := r.arrayLen()
	minLen := int64(minMemberLen)
	if r.flex {
		minLen = minFlexMemberLen
	}
	if r.err == nil && (n < 0 || int64(n)*minLen > int64(len(r.b))) {
		r.err = fmt.Errorf("member count %d with %d bytes left: %w", n, len(r.b), ErrCorrupt)
	}
	if r.err == nil && n > 0 {
		g.Members = make([]Member, n)
	}
	for i := 0; r.err == nil && i < int(n); i++ {
		m := &g.Members[i]
		m.MemberID = r.string()
		if v >= GroupValueV3 {
			m.GroupInstanceID = r.nullableString()
		}
		m.ClientID = r.string()
		m.ClientHost = r.string()
		if v >= GroupValueV1 {
			m.RebalanceTimeoutMs = r.int32()
		}
		m.SessionTimeoutMs = r.int32()
		if v < GroupValueV1 {
			m.RebalanceTimeoutMs = m.SessionTimeoutMs
		}
		m.Subscription = r.bytes()
		m.Assignment = r.bytes()
		r.tags()
	}
	r.tags()
	if err := r.done(); err != nil {
		return GroupMetadata{}, fmt.Errorf("group value version %d: %w", v, err)
	}
	return g, nil
}

// PartitionFor returns the __consumer_offsets partition of group, as Kafka computes
// it (internal/kafkahash).
func PartitionFor(group string, n int32) int32 { return kafkahash.Partition(group, n) }

func appendString(dst []byte, s string) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(s)))
	return append(dst, s...)
}

func appendNullableString(dst []byte, s string) []byte {
	if s == "" {
		return binary.BigEndian.AppendUint16(dst, 0xFFFF)
	}
	return appendString(dst, s)
}

func appendBytes(dst []byte, b []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(b)))
	return append(dst, b...)
}

// reader decodes big-endian Kafka primitives with a sticky error: after the
// first short read every call returns zero values.
type reader struct {
	b    []byte
	err  error
	flex bool // flexible version: compact lengths (uvarint n+1) and tagged fields
}

// valueVersion reads the version that opens a value named what ("offset value"):
// versions lo to hi are read, the flexible encoding from flexFrom on.
func (r *reader) valueVersion(what string, lo, hi, flexFrom int16) (int16, error) {
	v := r.int16()
	if r.err != nil {
		return 0, r.err
	}
	if v < lo || v > hi {
		return v, fmt.Errorf("%s version %d: %w", what, v, ErrUnsupportedVersion)
	}
	r.flex = v >= flexFrom
	return v, nil
}

// uvarint reads an unsigned varint of at most 5 bytes (fits 32 bits).
func (r *reader) uvarint() uint32 {
	var v uint32
	for i := 0; i < 5; i++ {
		p := r.take(1)
		if p == nil {
			return 0
		}
		if i == 4 && p[0] > 0x0F {
			r.err = fmt.Errorf("varint overflows 32 bits: %w", ErrCorrupt)
			return 0
		}
		v |= uint32(p[0]&0x7F) << (7 * i)
		if p[0] < 0x80 {
			return v
		}
	}
	return v
}

// length reads a string/bytes/array length: -1 is null. Compact lengths are
// stored plus one, so 0 is null; larger than an int32 is corrupt.
func (r *reader) length(fixed func() int32) int32 {
	if !r.flex {
		return fixed()
	}
	u := r.uvarint()
	if u > math.MaxInt32 {
		r.err = fmt.Errorf("compact length %d: %w", u, ErrCorrupt)
		return 0
	}
	return int32(u) - 1
}

func (r *reader) arrayLen() int32 { return r.length(r.int32) }

// tags skips a tagged-field section in flexible versions.
func (r *reader) tags() { r.taggedFields(nil) }

// taggedFields reads a tagged-field section in flexible versions and passes each
// field's tag and bytes to fn (nil: skip them all); an error from fn becomes the
// reader's. Every field takes at least two bytes, so a forged count ends at the
// input's end.
func (r *reader) taggedFields(fn func(tag uint32, field []byte) error) {
	if !r.flex {
		return
	}
	n := r.uvarint()
	for i := uint32(0); r.err == nil && i < n; i++ {
		tag := r.uvarint()
		size := r.uvarint()
		if size > math.MaxInt32 {
			r.err = fmt.Errorf("tag size %d: %w", size, ErrCorrupt)
			return
		}
		field := r.take(int(size))
		if r.err == nil && fn != nil {
			if err := fn(tag, field); err != nil {
				r.err = err
			}
		}
	}
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.err = fmt.Errorf("need %d bytes, have %d: %w", n, len(r.b), ErrCorrupt)
		return nil
	}
	p := r.b[:n:n]
	r.b = r.b[n:]
	return p
}

func (r *reader) int16() int16 {
	if p := r.take(2); p != nil {
		return int16(binary.BigEndian.Uint16(p))
	}
	return 0
}

func (r *reader) int32() int32 {
	if p := r.take(4); p != nil {
		return int32(binary.BigEndian.Uint32(p))
	}
	return 0
}

func (r *reader) int64() int64 {
	if p := r.take(8); p != nil {
		return int64(binary.BigEndian.Uint64(p))
	}
	return 0
}

func (r *reader) string() string {
	n := r.length(func() int32 { return int32(r.int16()) })
	if r.err == nil && n < 0 {
		r.err = fmt.Errorf("string length %d: %w", n, ErrCorrupt)
	}
	return string(r.take(int(n)))
}

func (r *reader) nullableString() string {
	n := r.length(func() int32 { return int32(r.int16()) })
	if r.err == nil && n < -1 {
		r.err = fmt.Errorf("nullable string length %d: %w", n, ErrCorrupt)
	}
	if n == -1 {
		return ""
	}
	return string(r.take(int(n)))
}

// bytes returns a copy, so a decoded value never aliases its input.
func (r *reader) bytes() []byte {
	n := r.length(r.int32)
	if r.err == nil && n < 0 {
		r.err = fmt.Errorf("bytes length %d: %w", n, ErrCorrupt)
	}
	p := r.take(int(n))
	if len(p) == 0 {
		return nil
	}
	return append([]byte(nil), p...)
}

func (r *reader) done() error {
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%d trailing bytes: %w", len(r.b), ErrCorrupt)
	}
	return r.err
}
