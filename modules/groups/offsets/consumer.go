package offsets

import (
	"encoding/binary"
	"fmt"
)

// Key versions of the KIP-848 consumer group records (the key version is the record
// type). Frozen: they are Kafka's. Types 4 (partition metadata) and 16 (regular
// expressions) are not read, nor are share group types 9 and 15 (sharegroup.go):
// DecodeKey returns ErrUnsupportedVersion and an apply skips them.
const (
	// ConsumerGroupMetadataKeyV3 keys a group's epoch (ConsumerGroupMetadataValue).
	ConsumerGroupMetadataKeyV3 int16 = 3
	// ConsumerMemberMetadataKeyV5 keys one member's subscription and client
	// (ConsumerGroupMemberMetadataValue).
	ConsumerMemberMetadataKeyV5 int16 = 5
	// ConsumerTargetMetadataKeyV6 keys the epoch of the group's target assignment
	// (ConsumerGroupTargetAssignmentMetadataValue).
	ConsumerTargetMetadataKeyV6 int16 = 6
	// ConsumerTargetMemberKeyV7 keys one member's target assignment
	// (ConsumerGroupTargetAssignmentMemberValue).
	ConsumerTargetMemberKeyV7 int16 = 7
	// ConsumerCurrentAssignmentKeyV8 keys one member's current assignment and epochs
	// (ConsumerGroupCurrentMemberAssignmentValue).
	ConsumerCurrentAssignmentKeyV8 int16 = 8
)

// ConsumerValueV0 is the only version of the consumer group record values, read and
// written. It is flexible (compact strings and arrays, tagged fields).
const ConsumerValueV0 int16 = 0

// IsConsumerGroup reports whether k is the key of a KIP-848 consumer group record
// (versions 3, 5, 6, 7 and 8). Member is set for 5, 7 and 8.
func (k Key) IsConsumerGroup() bool {
	switch k.Version {
	case ConsumerGroupMetadataKeyV3, ConsumerTargetMetadataKeyV6:
		return true
	}
	return consumerHasMember(k.Version)
}

// consumerHasMember reports whether consumer group keys of version v carry a member id.
func consumerHasMember(v int16) bool {
	return v == ConsumerMemberMetadataKeyV5 || v == ConsumerTargetMemberKeyV7 || v == ConsumerCurrentAssignmentKeyV8
}

// hasMember reports whether group record keys of version v carry a member id after
// the group: consumer group types 5, 7, 8 and share group types 10, 13, 14.
func hasMember(v int16) bool { return consumerHasMember(v) || shareHasMember(v) }

// EncodeConsumerGroupKey returns the key of a consumer group record of type version
// (ConsumerGroupMetadataKeyV3 ... ConsumerCurrentAssignmentKeyV8): the group, and for
// the member records (5, 7, 8) the member; member is ignored for 3 and 6. Any other
// version returns nil, which no decoder accepts. group and member must fit a Kafka
// string (32767 bytes), as for the other encoders.
func EncodeConsumerGroupKey(version int16, group, member string) []byte {
	if !(Key{Version: version}).IsConsumerGroup() {
		return nil
	}
	return appendMemberKey(version, group, member)
}

// appendMemberKey returns the key of a consumer or share group record of type version:
// the group, and the member if the type carries one (hasMember).
func appendMemberKey(version int16, group, member string) []byte {
	dst := make([]byte, 0, 6+len(group)+len(member))
	dst = binary.BigEndian.AppendUint16(dst, uint16(version))
	dst = appendString(dst, group)
	if hasMember(version) {
		dst = appendString(dst, member)
	}
	return dst
}

// TopicPartitions is a topic, by id, and some of its partitions: an entry of a target
// or current assignment.
type TopicPartitions struct {
	TopicID    [16]byte
	Partitions []int32
}

// ConsumerGroupMetadata is a ConsumerGroupMetadataValue (key type 3).
type ConsumerGroupMetadata struct {
	Epoch int32
	// MetadataHash is tagged field 0, written only when not zero (Kafka 4.1+ hashes
	// the subscribed topics' metadata into it; absent decodes as 0).
	MetadataHash int64
}

// ConsumerMemberMetadata is a ConsumerGroupMemberMetadataValue (key type 5). The
// nullable strings (InstanceID, RackID, SubscribedTopicRegex, ServerAssignor) decode
// null as "" and encode "" as null. Classic is Kafka's tagged field 0
// (ClassicMemberMetadata), set for classic-protocol members of a consumer group and
// written only then.
type ConsumerMemberMetadata struct {
	InstanceID           string
	RackID               string
	ClientID             string
	ClientHost           string
	SubscribedTopicNames []string
	SubscribedTopicRegex string
	ServerAssignor       string
	RebalanceTimeoutMs   int32
	Classic              *ClassicMemberMetadata
}

// ClassicMemberMetadata is what a classic-protocol member of a consumer group said in
// its JoinGroup: its session timeout and protocols (name and metadata, in preference
// order).
type ClassicMemberMetadata struct {
	SessionTimeoutMs   int32
	SupportedProtocols []ClassicProtocol
}

// ClassicProtocol is one protocol of a ClassicMemberMetadata.
type ClassicProtocol struct {
	Name     string
	Metadata []byte
}

// ConsumerTargetMetadata is a ConsumerGroupTargetAssignmentMetadataValue (key type 6).
type ConsumerTargetMetadata struct {
	AssignmentEpoch int32
}

// ConsumerTargetMember is a ConsumerGroupTargetAssignmentMemberValue (key type 7).
type ConsumerTargetMember struct {
	TopicPartitions []TopicPartitions
}

// ConsumerCurrentAssignment is a ConsumerGroupCurrentMemberAssignmentValue (key type
// 8). State is Kafka's MemberState id, kept as is.
type ConsumerCurrentAssignment struct {
	MemberEpoch         int32
	PreviousMemberEpoch int32
	State               int8
	Assigned            []TopicPartitions // AssignedPartitions
	PendingRevocation   []TopicPartitions // PartitionsPendingRevocation
}

// Empty arrays decode as nil, so a decoded value re-encodes to the same value.

// EncodeConsumerGroupMetadata returns g as a version 0 value.
func EncodeConsumerGroupMetadata(g ConsumerGroupMetadata) []byte {
	return appendGroupEpochValue(ConsumerValueV0, g.Epoch, g.MetadataHash)
}

// DecodeConsumerGroupMetadata decodes a version 0 ConsumerGroupMetadataValue.
// Tagged field 0 must be 8 bytes; other tags are skipped.
func DecodeConsumerGroupMetadata(b []byte) (ConsumerGroupMetadata, error) {
	epoch, hash, err := decodeGroupEpochValue("consumer group metadata value", ConsumerValueV0, b)
	if err != nil {
		return ConsumerGroupMetadata{}, err
	}
	return ConsumerGroupMetadata{Epoch: epoch, MetadataHash: hash}, nil
}

// appendGroupEpochValue is a consumer or share group metadata value (types 3, 11):
// the epoch, and tagged field 0, the metadata hash, when it is not zero.
func appendGroupEpochValue(version int16, epoch int32, hash int64) []byte {
	dst := binary.BigEndian.AppendUint16(nil, uint16(version))
	dst = binary.BigEndian.AppendUint32(dst, uint32(epoch))
	if hash == 0 {
		return append(dst, 0) // no tagged fields
	}
	dst = append(dst, 1, 0, 8) // one tagged field: tag 0, 8 bytes
	return binary.BigEndian.AppendUint64(dst, uint64(hash))
}

// decodeGroupEpochValue decodes what appendGroupEpochValue writes, of version only
// (what names the value in errors).
func decodeGroupEpochValue(what string, version int16, b []byte) (epoch int32, hash int64, err error) {
	r := reader{b: b}
	if _, err := r.valueVersion(what, version, version, version); err != nil {
		return 0, 0, err
	}
	epoch = r.int32()
	r.taggedFields(func(tag uint32, field []byte) error {
		if tag != 0 {
			return nil
		}
		if len(field) != 8 {
			return fmt.Errorf("metadata hash of %d bytes: %w", len(field), ErrCorrupt)
		}
		hash = int64(binary.BigEndian.Uint64(field))
		return nil
	})
	if err := r.done(); err != nil {
		return 0, 0, fmt.Errorf("%s version %d: %w", what, version, err)
	}
	return epoch, hash, nil
}

// EncodeConsumerMemberMetadata returns m as a version 0 value.
func EncodeConsumerMemberMetadata(m ConsumerMemberMetadata) []byte {
	dst := binary.BigEndian.AppendUint16(nil, uint16(ConsumerValueV0))
	dst = appendCompactNullableString(dst, m.InstanceID)
	dst = appendCompactNullableString(dst, m.RackID)
	dst = appendCompactString(dst, m.ClientID)
	dst = appendCompactString(dst, m.ClientHost)
	dst = appendCompactLen(dst, len(m.SubscribedTopicNames))
	for _, t := range m.SubscribedTopicNames {
		dst = appendCompactString(dst, t)
	}
	dst = appendCompactNullableString(dst, m.SubscribedTopicRegex)
	dst = appendCompactNullableString(dst, m.ServerAssignor)
	dst = binary.BigEndian.AppendUint32(dst, uint32(m.RebalanceTimeoutMs))
	if m.Classic == nil {
		return append(dst, 0) // no tagged fields
	}
	// Tagged field 0: the ClassicMemberMetadata struct, flexible (its protocols
	// and itself end with an empty tagged-field section).
	var c []byte
	c = binary.BigEndian.AppendUint32(c, uint32(m.Classic.SessionTimeoutMs))
	c = appendCompactLen(c, len(m.Classic.SupportedProtocols))
	for _, p := range m.Classic.SupportedProtocols {
		c = appendCompactString(c, p.Name)
		c = append(appendCompactLen(c, len(p.Metadata)), p.Metadata...)
		c = append(c, 0)
	}
	c = append(c, 0)
	dst = append(dst, 1, 0) // one tagged field, tag 0
	dst = binary.AppendUvarint(dst, uint64(len(c)))
	return append(dst, c...)
}

// DecodeConsumerMemberMetadata decodes a version 0
// ConsumerGroupMemberMetadataValue; its tags are skipped.
func DecodeConsumerMemberMetadata(b []byte) (ConsumerMemberMetadata, error) {
	const what = "consumer member metadata value"
	r := reader{b: b}
	if _, err := r.valueVersion(what, ConsumerValueV0, ConsumerValueV0, ConsumerValueV0); err != nil {
		return ConsumerMemberMetadata{}, err
	}
	var m ConsumerMemberMetadata
	m.InstanceID = r.nullableString()
	m.RackID = r.nullableString()
	m.ClientID = r.string()
	m.ClientHost = r.string()
	m.SubscribedTopicNames = r.compactStrings("subscribed topic")
	m.SubscribedTopicRegex = r.nullableString()
	m.ServerAssignor = r.nullableString()
	m.RebalanceTimeoutMs = r.int32()
	r.taggedFields(func(tag uint32, field []byte) error {
		if tag != 0 {
			return nil
		}
		c, err := decodeClassicMemberMetadata(field)
		m.Classic = c
		return err
	})
	if err := r.done(); err != nil {
		return ConsumerMemberMetadata{}, fmt.Errorf("%s version 0: %w", what, err)
	}
	return m, nil
}

// decodeClassicMemberMetadata decodes tagged field 0 of a member metadata value.
func decodeClassicMemberMetadata(b []byte) (*ClassicMemberMetadata, error) {
	r := reader{b: b, flex: true}
	c := &ClassicMemberMetadata{SessionTimeoutMs: r.int32()}
	// A protocol is at least its name's length, its metadata's length and its
	// empty tagged-field section.
	n := r.count("classic protocol", 3)
	for range n {
		p := ClassicProtocol{Name: r.string(), Metadata: r.bytes()}
		r.tags()
		c.SupportedProtocols = append(c.SupportedProtocols, p)
	}
	r.tags()
	if err := r.done(); err != nil {
		return nil, fmt.Errorf("classic member metadata: %w", err)
	}
	return c, nil
}

// EncodeConsumerTargetMetadata returns t as a version 0 value.
func EncodeConsumerTargetMetadata(t ConsumerTargetMetadata) []byte {
	return appendInt32Value(ConsumerValueV0, t.AssignmentEpoch)
}

// DecodeConsumerTargetMetadata decodes a version 0
// ConsumerGroupTargetAssignmentMetadataValue; its tags are skipped.
func DecodeConsumerTargetMetadata(b []byte) (ConsumerTargetMetadata, error) {
	epoch, err := decodeInt32Value("consumer target metadata value", ConsumerValueV0, b)
	if err != nil {
		return ConsumerTargetMetadata{}, err
	}
	return ConsumerTargetMetadata{AssignmentEpoch: epoch}, nil
}

// appendInt32Value is a flexible value of one int32 field (types 6, 12).
func appendInt32Value(version int16, v int32) []byte {
	dst := binary.BigEndian.AppendUint16(nil, uint16(version))
	dst = binary.BigEndian.AppendUint32(dst, uint32(v))
	return append(dst, 0) // no tagged fields
}

// decodeInt32Value decodes what appendInt32Value writes, of version only; tags are
// skipped.
func decodeInt32Value(what string, version int16, b []byte) (int32, error) {
	r := reader{b: b}
	if _, err := r.valueVersion(what, version, version, version); err != nil {
		return 0, err
	}
	v := r.int32()
	r.tags()
	if err := r.done(); err != nil {
		return 0, fmt.Errorf("%s version %d: %w", what, version, err)
	}
	return v, nil
}

// EncodeConsumerTargetMember returns t as a version 0 value.
func EncodeConsumerTargetMember(t ConsumerTargetMember) []byte {
	return appendTopicPartitionsValue(ConsumerValueV0, t.TopicPartitions)
}

// DecodeConsumerTargetMember decodes a version 0
// ConsumerGroupTargetAssignmentMemberValue; its tags are skipped.
func DecodeConsumerTargetMember(b []byte) (ConsumerTargetMember, error) {
	tps, err := decodeTopicPartitionsValue("consumer target member value", ConsumerValueV0, b)
	if err != nil {
		return ConsumerTargetMember{}, err
	}
	return ConsumerTargetMember{TopicPartitions: tps}, nil
}

// appendTopicPartitionsValue is a flexible value of one TopicPartitions array
// (types 7, 13).
func appendTopicPartitionsValue(version int16, tps []TopicPartitions) []byte {
	dst := binary.BigEndian.AppendUint16(nil, uint16(version))
	dst = appendTopicPartitions(dst, tps)
	return append(dst, 0) // no tagged fields
}

// decodeTopicPartitionsValue decodes what appendTopicPartitionsValue writes, of
// version only; tags are skipped.
func decodeTopicPartitionsValue(what string, version int16, b []byte) ([]TopicPartitions, error) {
	r := reader{b: b}
	if _, err := r.valueVersion(what, version, version, version); err != nil {
		return nil, err
	}
	tps := r.topicPartitions()
	r.tags()
	if err := r.done(); err != nil {
		return nil, fmt.Errorf("%s version %d: %w", what, version, err)
	}
	return tps, nil
}

// EncodeConsumerCurrentAssignment returns a as a version 0 value.
func EncodeConsumerCurrentAssignment(a ConsumerCurrentAssignment) []byte {
	dst := binary.BigEndian.AppendUint16(nil, uint16(ConsumerValueV0))
	dst = binary.BigEndian.AppendUint32(dst, uint32(a.MemberEpoch))
	dst = binary.BigEndian.AppendUint32(dst, uint32(a.PreviousMemberEpoch))
	dst = append(dst, byte(a.State))
	dst = appendTopicPartitions(dst, a.Assigned)
	dst = appendTopicPartitions(dst, a.PendingRevocation)
	return append(dst, 0) // no tagged fields
}

// DecodeConsumerCurrentAssignment decodes a version 0
// ConsumerGroupCurrentMemberAssignmentValue; its tags are skipped.
func DecodeConsumerCurrentAssignment(b []byte) (ConsumerCurrentAssignment, error) {
	const what = "consumer current assignment value"
	r := reader{b: b}
	if _, err := r.valueVersion(what, ConsumerValueV0, ConsumerValueV0, ConsumerValueV0); err != nil {
		return ConsumerCurrentAssignment{}, err
	}
	var a ConsumerCurrentAssignment
	a.MemberEpoch = r.int32()
	a.PreviousMemberEpoch = r.int32()
	a.State = r.int8()
	a.Assigned = r.topicPartitions()
	a.PendingRevocation = r.topicPartitions()
	r.tags()
	if err := r.done(); err != nil {
		return ConsumerCurrentAssignment{}, fmt.Errorf("%s version 0: %w", what, err)
	}
	return a, nil
}

// checkGroupRecordValue reports whether b decodes as the value of a group record
// (IsGroupRecord) with key version keyVersion (an apply stores only values that do).
func checkGroupRecordValue(keyVersion int16, b []byte) error {
	var err error
	switch keyVersion {
	case ConsumerGroupMetadataKeyV3:
		_, err = DecodeConsumerGroupMetadata(b)
	case ConsumerMemberMetadataKeyV5:
		_, err = DecodeConsumerMemberMetadata(b)
	case ConsumerTargetMetadataKeyV6:
		_, err = DecodeConsumerTargetMetadata(b)
	case ConsumerTargetMemberKeyV7:
		_, err = DecodeConsumerTargetMember(b)
	case ConsumerCurrentAssignmentKeyV8:
		_, err = DecodeConsumerCurrentAssignment(b)
	case ShareGroupMemberMetadataKeyV10:
		_, err = DecodeShareMemberMetadata(b)
	case ShareGroupMetadataKeyV11:
		_, err = DecodeShareGroupMetadata(b)
	case ShareGroupTargetMetadataKeyV12:
		_, err = DecodeShareTargetMetadata(b)
	case ShareGroupTargetMemberKeyV13:
		_, err = DecodeShareTargetMember(b)
	case ShareGroupCurrentAssignmentKeyV14:
		_, err = DecodeShareCurrentAssignment(b)
	case ShareStateKeyV1001:
		_, err = DecodeShareState(b)
	default:
		err = fmt.Errorf("key version %d: %w", keyVersion, ErrUnsupportedVersion)
	}
	return err
}

// minTopicPartitionsLen is the smallest encoding of one TopicPartitions: a uuid, an
// empty compact array and an empty tag section. It bounds the count by the bytes
// present, so a forged count cannot force a large allocation.
const minTopicPartitionsLen = 16 + 1 + 1

func appendTopicPartitions(dst []byte, tps []TopicPartitions) []byte {
	dst = appendCompactLen(dst, len(tps))
	for _, tp := range tps {
		dst = append(dst, tp.TopicID[:]...)
		dst = appendCompactLen(dst, len(tp.Partitions))
		for _, p := range tp.Partitions {
			dst = binary.BigEndian.AppendUint32(dst, uint32(p))
		}
		dst = append(dst, 0) // no tagged fields
	}
	return dst
}

// topicPartitions reads a compact array of TopicPartitions (flexible versions only).
func (r *reader) topicPartitions() []TopicPartitions {
	n := r.count("topic", minTopicPartitionsLen)
	if n == 0 {
		return nil
	}
	tps := make([]TopicPartitions, n)
	for i := range tps {
		tp := &tps[i]
		copy(tp.TopicID[:], r.take(16))
		if m := r.count("partition", 4); m > 0 {
			tp.Partitions = make([]int32, m)
			for j := range tp.Partitions {
				tp.Partitions[j] = r.int32()
			}
		}
		r.tags()
		if r.err != nil {
			return nil
		}
	}
	return tps
}

// compactStrings reads a compact array of compact strings, none null (flexible
// versions only); empty decodes as nil.
func (r *reader) compactStrings(what string) []string {
	// A compact string is at least its one-byte length.
	n := r.count(what, 1)
	if n == 0 {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = r.string()
	}
	return out
}

// count reads the length of an array that is not nullable and whose elements take at
// least minLen bytes each: a null or negative length, or more elements than the
// remaining bytes can hold, is ErrCorrupt. It returns 0 after an error.
func (r *reader) count(what string, minLen int) int {
	n := r.arrayLen()
	if r.err != nil {
		return 0
	}
	if n < 0 || int64(n)*int64(minLen) > int64(len(r.b)) {
		r.err = fmt.Errorf("%s count %d with %d bytes left: %w", what, n, len(r.b), ErrCorrupt)
		return 0
	}
	return int(n)
}

func (r *reader) int8() int8 {
	if p := r.take(1); p != nil {
		return int8(p[0])
	}
	return 0
}

// appendCompactLen writes a compact length: uvarint(n+1), as Kafka's flexible
// versions do for strings and arrays.
func appendCompactLen(dst []byte, n int) []byte {
	return binary.AppendUvarint(dst, uint64(n)+1)
}

func appendCompactString(dst []byte, s string) []byte {
	return append(appendCompactLen(dst, len(s)), s...)
}

// appendCompactNullableString writes "" as null (length 0).
func appendCompactNullableString(dst []byte, s string) []byte {
	if s == "" {
		return append(dst, 0)
	}
	return appendCompactString(dst, s)
}
