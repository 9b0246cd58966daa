package assignor

import (
	"context"
	"encoding/base64"
	"fmt"
)

// The contract types. The SDK owns them: they are the plugin side of
// sluice.assignor.v1 (proto/assignor.proto), and the broker converts its own
// types to and from them, so a plugin never depends on the broker's module.
// Within ProtocolVersion 1 they only grow (new fields), as the protocol does.

// Assignor computes a group's target assignment from its members and the
// metadata of the topics they subscribe to.
//
// The broker calls one Assignor concurrently for different groups: an
// implementation must be stateless or safe for concurrent use, must not keep
// or modify its Input, and should return promptly when ctx ends (the broker's
// timeout_ms deadline).
type Assignor interface {
	// Name is the name clients use to ask for this assignor
	// (ConsumerGroupHeartbeat's ServerAssignor), e.g. "rack-aware".
	Name() string
	// Assign returns the target assignment for in; Check must accept it.
	// An invalid in (see Validate) is an error wrapping ErrInvalidInput.
	Assign(ctx context.Context, in Input) (Assignment, error)
}

// TopicID is a Kafka topic id (a UUID). Its text form, used as a JSON map key,
// is Kafka's: unpadded URL-safe base64 of the 16 bytes.
type TopicID [16]byte

// String returns the text form of id.
func (id TopicID) String() string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// MarshalText implements encoding.TextMarshaler.
func (id TopicID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (id *TopicID) UnmarshalText(b []byte) error {
	if len(b) != base64.RawURLEncoding.EncodedLen(len(id)) {
		return fmt.Errorf("topic id %q: not 22 characters of url-safe base64", b)
	}
	var raw TopicID
	if _, err := base64.RawURLEncoding.Decode(raw[:], b); err != nil {
		return fmt.Errorf("topic id %q: not 22 characters of url-safe base64", b)
	}
	*id = raw
	return nil
}

// Input is everything an assignor sees about one group.
//
// Rules (Validate reports a violation; Assign should then return its error):
// member ids are non-empty and unique; every Topics key equals its Topic's
// ID; topic names are unique; Partitions >= 0; PartitionRacks,
// PartitionEndOffsets and PartitionLag are each empty or have exactly
// Partitions entries.
//
// Tolerated and ignored: subscriptions to topic names not in Topics (the topic
// may not exist yet), duplicate subscriptions, and Current entries naming
// unknown topics, out-of-range partitions, topics the member no longer
// subscribes to, or partitions another member also claims.
type Input struct {
	Members []Member          `json:"members"`
	Topics  map[TopicID]Topic `json:"topics"`
}

// Member is one group member.
type Member struct {
	ID         string `json:"id"`
	InstanceID string `json:"instance_id,omitempty"` // static membership (group.instance.id), "" if none
	Rack       string `json:"rack,omitempty"`        // client.rack, "" if unknown
	// Topics are the names of the topics the member subscribes to; regular
	// expression subscriptions are resolved by the broker.
	Topics []string `json:"topics"`
	// Current is the member's current assignment (partitions per topic).
	Current map[TopicID][]int32 `json:"current,omitempty"`
}

// Topic is the metadata of one topic.
type Topic struct {
	ID         TopicID `json:"id"`
	Name       string  `json:"name"`
	Partitions int32   `json:"partitions"`
	// PartitionRacks optionally lists, per partition, the racks of its
	// replicas. Empty means unknown.
	PartitionRacks [][]string `json:"partition_racks,omitempty"`
	// PartitionEndOffsets optionally lists each partition's end offset (its
	// high watermark when the assignment was asked for). Empty means unknown.
	PartitionEndOffsets []int64 `json:"partition_end_offsets,omitempty"`
	// PartitionLag optionally lists the group's lag on each partition: end
	// offset minus the group's committed offset (the whole partition, from
	// its start, when nothing is committed); -1 for a partition whose lag is
	// unknown. Empty means unknown. A member's current lag is the sum over
	// its Current partitions.
	PartitionLag []int64 `json:"partition_lag,omitempty"`
}

// Assignment maps member id → topic id → ascending partitions. Members left
// out get nothing.
type Assignment map[string]map[TopicID][]int32
