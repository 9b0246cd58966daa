package offsets

import (
	"encoding/binary"
	"fmt"
)

// ShareStateKeyV1001 keys the durable state of one share-partition (KIP-932): a share
// group's position and in-flight record states on one topic partition. It is Sluice's
// record type, not Kafka's: Kafka keeps this state in its own internal topic
// (__share_group_state) behind a share coordinator, where Sluice keeps it with the
// group, in the group's __consumer_offsets partition, so the group coordinator that
// answers DescribeShareGroupOffsets holds it. The number is far above Kafka's record
// types so that it cannot collide with a future one.
//
// Key: int16 1001, string group, uuid topic id (16 bytes), int32 partition.
const ShareStateKeyV1001 int16 = 1001

// ShareStateValueV0 is the only version of the share state value, read and written.
// It is flexible (compact arrays, tagged fields), modelled on Kafka's ShareSnapshotValue.
const ShareStateValueV0 int16 = 0

// IsGroupRecord reports whether k keys a record the store keeps per group and returns
// with GroupRecords: a KIP-848 consumer group record (IsConsumerGroup), a KIP-932
// share group record (IsShareGroup) or a share state record (ShareStateKeyV1001).
func (k Key) IsGroupRecord() bool {
	return k.IsConsumerGroup() || k.IsShareGroup() || k.Version == ShareStateKeyV1001
}

// encodeGroupRecordKey returns the Kafka key of a group record (IsGroupRecord) with
// its type's encoder; nil for any other key.
func encodeGroupRecordKey(k Key) []byte {
	switch {
	case k.IsConsumerGroup():
		return EncodeConsumerGroupKey(k.Version, k.Group, k.Member)
	case k.IsShareGroup():
		return EncodeShareGroupKey(k.Version, k.Group, k.Member)
	case k.Version == ShareStateKeyV1001:
		return EncodeShareStateKey(k.Group, k.TopicID, k.Partition)
	}
	return nil
}

// EncodeShareStateKey returns the key of group's share state on one topic partition.
func EncodeShareStateKey(group string, topicID [16]byte, partition int32) []byte {
	dst := make([]byte, 0, 24+len(group))
	dst = binary.BigEndian.AppendUint16(dst, uint16(ShareStateKeyV1001))
	dst = appendString(dst, group)
	dst = append(dst, topicID[:]...)
	return binary.BigEndian.AppendUint32(dst, uint32(partition))
}

// ShareStateBatch is a run of in-flight offsets with one delivery state (Kafka's
// values: 0 available, 2 acknowledged, 4 archived) and delivery count.
type ShareStateBatch struct {
	FirstOffset, LastOffset int64
	DeliveryState           int8
	DeliveryCount           int16
}

// ShareState is one share-partition's durable state. StateEpoch grows when the state
// is reset (AlterShareGroupOffsets, DeleteShareGroupOffsets), LeaderEpoch is the data
// partition's leader epoch of the writer: a write from an older leader or an older
// state epoch is refused. StartOffset is the share-partition start offset (SPSO).
type ShareState struct {
	StateEpoch  int32
	LeaderEpoch int32
	StartOffset int64
	Batches     []ShareStateBatch
}

// minShareBatchLen is the smallest encoding of one ShareStateBatch.
const minShareBatchLen = 8 + 8 + 1 + 2 + 1

// EncodeShareState returns s as a version 0 value.
func EncodeShareState(s ShareState) []byte {
	dst := make([]byte, 0, 2+4+4+8+1+len(s.Batches)*minShareBatchLen+1)
	dst = binary.BigEndian.AppendUint16(dst, uint16(ShareStateValueV0))
	dst = binary.BigEndian.AppendUint32(dst, uint32(s.StateEpoch))
	dst = binary.BigEndian.AppendUint32(dst, uint32(s.LeaderEpoch))
	dst = binary.BigEndian.AppendUint64(dst, uint64(s.StartOffset))
	dst = appendCompactLen(dst, len(s.Batches))
	for _, b := range s.Batches {
		dst = binary.BigEndian.AppendUint64(dst, uint64(b.FirstOffset))
		dst = binary.BigEndian.AppendUint64(dst, uint64(b.LastOffset))
		dst = append(dst, byte(b.DeliveryState))
		dst = binary.BigEndian.AppendUint16(dst, uint16(b.DeliveryCount))
		dst = append(dst, 0) // no tagged fields
	}
	return append(dst, 0) // no tagged fields
}

// DecodeShareState decodes a version 0 share state value; tags are skipped.
func DecodeShareState(b []byte) (ShareState, error) {
	const what = "share state value"
	r := reader{b: b}
	if _, err := r.valueVersion(what, ShareStateValueV0, ShareStateValueV0, ShareStateValueV0); err != nil {
		return ShareState{}, err
	}
	var s ShareState
	s.StateEpoch = r.int32()
	s.LeaderEpoch = r.int32()
	s.StartOffset = r.int64()
	if n := r.count("state batch", minShareBatchLen); n > 0 {
		s.Batches = make([]ShareStateBatch, n)
		for i := range s.Batches {
			sb := &s.Batches[i]
			sb.FirstOffset = r.int64()
			sb.LastOffset = r.int64()
			sb.DeliveryState = r.int8()
			sb.DeliveryCount = r.int16()
			r.tags()
		}
	}
	r.tags()
	if err := r.done(); err != nil {
		return ShareState{}, fmt.Errorf("%s version 0: %w", what, err)
	}
	return s, nil
}
