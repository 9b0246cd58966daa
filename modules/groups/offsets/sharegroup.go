package offsets

import (
	"encoding/binary"
	"fmt"
)

// Key versions of the KIP-932 share group membership records (the key version is the
// record type). Frozen: they are Kafka's (its ShareGroup*Key schemas). Type 9
// (ShareGroupPartitionMetadata, dropped by Kafka 4.1) and type 15
// (ShareGroupStatePartitionMetadata, the share coordinator's initialized topics, which
// Sluice keeps as share state records instead: ShareStateKeyV1001) are not read:
// DecodeKey returns ErrUnsupportedVersion and an apply skips them.
const (
	// ShareGroupMemberMetadataKeyV10 keys one member's subscription and client
	// (ShareGroupMemberMetadataValue).
	ShareGroupMemberMetadataKeyV10 int16 = 10
	// ShareGroupMetadataKeyV11 keys a share group's epoch (ShareGroupMetadataValue).
	ShareGroupMetadataKeyV11 int16 = 11
	// ShareGroupTargetMetadataKeyV12 keys the epoch of the group's target assignment
	// (ShareGroupTargetAssignmentMetadataValue).
	ShareGroupTargetMetadataKeyV12 int16 = 12
	// ShareGroupTargetMemberKeyV13 keys one member's target assignment
	// (ShareGroupTargetAssignmentMemberValue).
	ShareGroupTargetMemberKeyV13 int16 = 13
	// ShareGroupCurrentAssignmentKeyV14 keys one member's current assignment and
	// epochs (ShareGroupCurrentMemberAssignmentValue).
	ShareGroupCurrentAssignmentKeyV14 int16 = 14
)

// ShareGroupValueV0 is the only version of the share group record values, read and
// written. It is flexible (compact strings and arrays, tagged fields).
const ShareGroupValueV0 int16 = 0

// IsShareGroup reports whether k is the key of a KIP-932 share group membership
// record (versions 10-14). Member is set for 10, 13 and 14.
func (k Key) IsShareGroup() bool {
	switch k.Version {
	case ShareGroupMetadataKeyV11, ShareGroupTargetMetadataKeyV12:
		return true
	}
	return shareHasMember(k.Version)
}

// shareHasMember reports whether share group keys of version v carry a member id.
func shareHasMember(v int16) bool {
	return v == ShareGroupMemberMetadataKeyV10 || v == ShareGroupTargetMemberKeyV13 || v == ShareGroupCurrentAssignmentKeyV14
}

// EncodeShareGroupKey returns the key of a share group record of type version
// (ShareGroupMemberMetadataKeyV10 ... ShareGroupCurrentAssignmentKeyV14): the group,
// and for the member records (10, 13, 14) the member; member is ignored for 11 and
// 12. Any other version returns nil, which no decoder accepts. group and member must
// fit a Kafka string (32767 bytes), as for the other encoders.
func EncodeShareGroupKey(version int16, group, member string) []byte {
	if !(Key{Version: version}).IsShareGroup() {
		return nil
	}
	return appendMemberKey(version, group, member)
}

// ShareMemberMetadata is a ShareGroupMemberMetadataValue (key type 10). RackID, a
// nullable string, decodes null as "" and encodes "" as null.
type ShareMemberMetadata struct {
	RackID               string
	ClientID             string
	ClientHost           string
	SubscribedTopicNames []string
}

// ShareGroupMetadata is a ShareGroupMetadataValue (key type 11), laid out as
// ConsumerGroupMetadata.
type ShareGroupMetadata struct {
	Epoch int32
	// MetadataHash is tagged field 0, written only when not zero (Kafka 4.1+; absent
	// decodes as 0).
	MetadataHash int64
}

// ShareTargetMetadata is a ShareGroupTargetAssignmentMetadataValue (key type 12).
type ShareTargetMetadata struct {
	AssignmentEpoch int32
}

// ShareTargetMember is a ShareGroupTargetAssignmentMemberValue (key type 13).
type ShareTargetMember struct {
	TopicPartitions []TopicPartitions
}

// ShareCurrentAssignment is a ShareGroupCurrentMemberAssignmentValue (key type 14).
// State is Kafka's MemberState id, kept as is. Unlike a consumer group member's, a
// share group member's partitions are never pending revocation.
type ShareCurrentAssignment struct {
	MemberEpoch         int32
	PreviousMemberEpoch int32
	State               int8
	Assigned            []TopicPartitions // AssignedPartitions
}

// Empty arrays decode as nil, so a decoded value re-encodes to the same value.

// EncodeShareMemberMetadata returns m as a version 0 value.
func EncodeShareMemberMetadata(m ShareMemberMetadata) []byte {
	dst := binary.BigEndian.AppendUint16(nil, uint16(ShareGroupValueV0))
	dst = appendCompactNullableString(dst, m.RackID)
	dst = appendCompactString(dst, m.ClientID)
	dst = appendCompactString(dst, m.ClientHost)
	dst = appendCompactLen(dst, len(m.SubscribedTopicNames))
	for _, t := range m.SubscribedTopicNames {
		dst = appendCompactString(dst, t)
	}
	return append(dst, 0) // no tagged fields
}

// DecodeShareMemberMetadata decodes a version 0 ShareGroupMemberMetadataValue; its
// tags are skipped.
func DecodeShareMemberMetadata(b []byte) (ShareMemberMetadata, error) {
	const what = "share member metadata value"
	r := reader{b: b}
	if _, err := r.valueVersion(what, ShareGroupValueV0, ShareGroupValueV0, ShareGroupValueV0); err != nil {
		return ShareMemberMetadata{}, err
	}
	var m ShareMemberMetadata
	m.RackID = r.nullableString()
	m.ClientID = r.string()
	m.ClientHost = r.string()
	m.SubscribedTopicNames = r.compactStrings("subscribed topic")
	r.tags()
	if err := r.done(); err != nil {
		return ShareMemberMetadata{}, fmt.Errorf("%s version 0: %w", what, err)
	}
	return m, nil
}

// EncodeShareGroupMetadata returns g as a version 0 value.
func EncodeShareGroupMetadata(g ShareGroupMetadata) []byte {
	return appendGroupEpochValue(ShareGroupValueV0, g.Epoch, g.MetadataHash)
}

// DecodeShareGroupMetadata decodes a version 0 ShareGroupMetadataValue. Tagged
// field 0 must be 8 bytes; other tags are skipped.
func DecodeShareGroupMetadata(b []byte) (ShareGroupMetadata, error) {
	epoch, hash, err := decodeGroupEpochValue("share group metadata value", ShareGroupValueV0, b)
	if err != nil {
		return ShareGroupMetadata{}, err
	}
	return ShareGroupMetadata{Epoch: epoch, MetadataHash: hash}, nil
}

// EncodeShareTargetMetadata returns t as a version 0 value.
func EncodeShareTargetMetadata(t ShareTargetMetadata) []byte {
	return appendInt32Value(ShareGroupValueV0, t.AssignmentEpoch)
}

// DecodeShareTargetMetadata decodes a version 0
// ShareGroupTargetAssignmentMetadataValue; its tags are skipped.
func DecodeShareTargetMetadata(b []byte) (ShareTargetMetadata, error) {
	epoch, err := decodeInt32Value("share target metadata value", ShareGroupValueV0, b)
	if err != nil {
		return ShareTargetMetadata{}, err
	}
	return ShareTargetMetadata{AssignmentEpoch: epoch}, nil
}

// EncodeShareTargetMember returns t as a version 0 value.
func EncodeShareTargetMember(t ShareTargetMember) []byte {
	return appendTopicPartitionsValue(ShareGroupValueV0, t.TopicPartitions)
}

// DecodeShareTargetMember decodes a version 0 ShareGroupTargetAssignmentMemberValue;
// its tags are skipped.
func DecodeShareTargetMember(b []byte) (ShareTargetMember, error) {
	tps, err := decodeTopicPartitionsValue("share target member value", ShareGroupValueV0, b)
	if err != nil {
		return ShareTargetMember{}, err
	}
	return ShareTargetMember{TopicPartitions: tps}, nil
}

// EncodeShareCurrentAssignment returns a as a version 0 value.
func EncodeShareCurrentAssignment(a ShareCurrentAssignment) []byte {
	dst := binary.BigEndian.AppendUint16(nil, uint16(ShareGroupValueV0))
	dst = binary.BigEndian.AppendUint32(dst, uint32(a.MemberEpoch))
	dst = binary.BigEndian.AppendUint32(dst, uint32(a.PreviousMemberEpoch))
	dst = append(dst, byte(a.State))
	dst = appendTopicPartitions(dst, a.Assigned)
	return append(dst, 0) // no tagged fields
}

// DecodeShareCurrentAssignment decodes a version 0
// ShareGroupCurrentMemberAssignmentValue; its tags are skipped.
func DecodeShareCurrentAssignment(b []byte) (ShareCurrentAssignment, error) {
	const what = "share current assignment value"
	r := reader{b: b}
	if _, err := r.valueVersion(what, ShareGroupValueV0, ShareGroupValueV0, ShareGroupValueV0); err != nil {
		return ShareCurrentAssignment{}, err
	}
	var a ShareCurrentAssignment
	a.MemberEpoch = r.int32()
	a.PreviousMemberEpoch = r.int32()
	a.State = r.int8()
	a.Assigned = r.topicPartitions()
	r.tags()
	if err := r.done(); err != nil {
		return ShareCurrentAssignment{}, fmt.Errorf("%s version 0: %w", what, err)
	}
	return a, nil
}
