package metadata

import (
	"encoding"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
)

// recordType is the first byte of a metadata log entry. Values are frozen: a type is
// never renumbered or reused, even after it is retired.
type recordType uint8

// Record types (see doc.go for the format).
const (
	recClusterID         recordType = 1
	recRegisterBroker    recordType = 2
	recFenceBroker       recordType = 3
	recUnfenceBroker     recordType = 4
	recCreateTopic       recordType = 5
	recDeleteTopic       recordType = 6
	recCreatePartitions  recordType = 7
	recAlterTopicConfigs recordType = 8
	recAlterBrokerCfgs   recordType = 9
	recPartitionChange   recordType = 10
	recLeaderChange      recordType = 11
	recExtension         recordType = 12
	recProducerIDs       recordType = 13
)

// recordVersions returns, for a type, the newest payload version this code writes and
// the oldest it still reads; ok is false for an unknown type. Bumping a version: add the
// field, raise newest, keep decoding newest-1 (see doc.go).
func recordVersions(t recordType) (newest, oldest uint8, ok bool) {
	switch t {
	case recPartitionChange:
		return 2, 1, true
	case recClusterID, recRegisterBroker, recFenceBroker, recUnfenceBroker, recCreateTopic,
		recDeleteTopic, recCreatePartitions, recAlterTopicConfigs, recAlterBrokerCfgs,
		recLeaderChange, recExtension, recProducerIDs:
		return 1, 1, true
	}
	return 0, 0, false
}

// Errors of record decoding.
var (
	// ErrUnknownRecord marks a log entry whose type or version this broker cannot read.
	ErrUnknownRecord = errors.New("metadata: unknown record type or version")
	// ErrBadRecord marks a log entry whose payload does not decode.
	ErrBadRecord = errors.New("metadata: malformed record")
)

// record is one typed metadata log entry.
type record interface{ recordType() recordType }

// versionedRecord is a record whose payload may be written at an older version than
// its type's newest: it names the oldest version that holds it, so entries that use no
// new field stay readable by brokers that know only the older version.
type versionedRecord interface {
	record
	payloadVersion() uint8
}

// uuid is a 16-byte id (cluster, topic, incarnation), written in JSON as Kafka prints
// it: unpadded base64url, 22 characters.
type uuid [16]byte

func (u uuid) String() string { return base64.RawURLEncoding.EncodeToString(u[:]) }

// MarshalText implements encoding.TextMarshaler.
func (u uuid) MarshalText() ([]byte, error) { return []byte(u.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (u *uuid) UnmarshalText(b []byte) error {
	n, err := base64.RawURLEncoding.Decode(u[:], b)
	if err != nil || n != 16 || len(b) != 22 {
		return fmt.Errorf("uuid %q: %w", b, ErrBadRecord)
	}
	return nil
}

type clusterIDRecord struct {
	ClusterID string `json:"cluster_id"`
}

type endpoint struct {
	Name string `json:"name"`
	Host string `json:"host"`
	Port int32  `json:"port"`
}

type registerBrokerRecord struct {
	NodeID      int32      `json:"node_id"`
	Incarnation uuid       `json:"incarnation"`
	Rack        string     `json:"rack,omitempty"`
	Endpoints   []endpoint `json:"endpoints"`
	Fenced      bool       `json:"fenced,omitempty"`
}

// fenceBrokerRecord fences (or, as unfenceBrokerRecord, unfences) a broker. Epoch is
// the registration's epoch (its log index); a record for an older registration is a
// no-op. 0 matches any registration.
type fenceBrokerRecord struct {
	NodeID int32  `json:"node_id"`
	Epoch  uint64 `json:"epoch,omitempty"`
}

type unfenceBrokerRecord fenceBrokerRecord

type partitionAssignment struct {
	Replicas []int32 `json:"replicas"`
	Leader   int32   `json:"leader"`
	ISR      []int32 `json:"isr"`
}

type createTopicRecord struct {
	Name       string                `json:"name"`
	ID         uuid                  `json:"id"`
	Partitions []partitionAssignment `json:"partitions"`
	Configs    map[string]string     `json:"configs,omitempty"`
}

type deleteTopicRecord struct {
	Name string `json:"name"`
	ID   uuid   `json:"id"`
}

// createPartitionsRecord appends partitions to a topic that has exactly From of them.
type createPartitionsRecord struct {
	Topic      string                `json:"topic"`
	ID         uuid                  `json:"id"`
	From       int32                 `json:"from"`
	Partitions []partitionAssignment `json:"partitions"`
}

// configChange edits a config map: with Replace the map becomes Set; otherwise Set
// entries are written and Delete names removed.
type configChange struct {
	Set     map[string]string `json:"set,omitempty"`
	Delete  []string          `json:"delete,omitempty"`
	Replace bool              `json:"replace,omitempty"`
}

type alterTopicConfigsRecord struct {
	Topic string `json:"topic"`
	ID    uuid   `json:"id"`
	configChange
}

// alterBrokerConfigsRecord edits dynamic broker configs; Node "" is the cluster default.
type alterBrokerConfigsRecord struct {
	Node string `json:"node"`
	configChange
}

// partitionChangeRecord changes a partition's leader, ISR or replicas (nil = keep).
// PartitionEpoch is the epoch the proposer saw (-1: don't check). A leader change
// bumps the leader epoch; any change bumps the partition epoch.
//
// Version 2 adds partitionChangeV2's fields, which old readers must not ignore: an
// entry that sets any of them is written as version 2, any other as version 1.
type partitionChangeRecord struct {
	Topic          string  `json:"topic"`
	ID             uuid    `json:"id"`
	Partition      int32   `json:"partition"`
	PartitionEpoch int32   `json:"partition_epoch"`
	Leader         *int32  `json:"leader,omitempty"`
	ISR            []int32 `json:"isr,omitempty"`
	Replicas       []int32 `json:"replicas,omitempty"`
	partitionChangeV2
}

// partitionChangeV2 are the version 2 fields of a PartitionChange entry (see doc.go).
type partitionChangeV2 struct {
	// ExpectLeader and ExpectLeaderEpoch are the leader and leader epoch the proposer
	// saw (nil: not checked). AlterPartition sets them; Apply rejects the entry when
	// the partition has another leader (errNotLeader) or leader epoch
	// (errFencedLeaderEpoch).
	ExpectLeader      *int32 `json:"expect_leader,omitempty"`
	ExpectLeaderEpoch *int32 `json:"expect_leader_epoch,omitempty"`
	// Validate makes Apply check the partition the entry leaves (see
	// state.checkPartition) and accept an entry that changes nothing without a new
	// partition epoch.
	Validate bool `json:"validate,omitempty"`
	// Reassignment sets the partition's adding and removing replicas (both empty: no
	// reassignment in progress); nil keeps them.
	Reassignment *reassignmentRecord `json:"reassignment,omitempty"`
}

// reassignmentRecord is the reassignment state a PartitionChange entry sets.
type reassignmentRecord struct {
	Adding   []int32 `json:"adding,omitempty"`
	Removing []int32 `json:"removing,omitempty"`
}

// payloadVersion implements versionedRecord: 2 when a version 2 field is set.
func (r *partitionChangeRecord) payloadVersion() uint8 {
	if r.ExpectLeader != nil || r.ExpectLeaderEpoch != nil || r.Validate || r.Reassignment != nil {
		return 2
	}
	return 1
}

// leaderChangeRecord is written by a newly elected raft leader: it is the controller.
type leaderChangeRecord struct {
	NodeID int32  `json:"node_id"`
	Term   uint64 `json:"term"`
}

func (*clusterIDRecord) recordType() recordType          { return recClusterID }
func (*registerBrokerRecord) recordType() recordType     { return recRegisterBroker }
func (*fenceBrokerRecord) recordType() recordType        { return recFenceBroker }
func (*unfenceBrokerRecord) recordType() recordType      { return recUnfenceBroker }
func (*createTopicRecord) recordType() recordType        { return recCreateTopic }
func (*deleteTopicRecord) recordType() recordType        { return recDeleteTopic }
func (*createPartitionsRecord) recordType() recordType   { return recCreatePartitions }
func (*alterTopicConfigsRecord) recordType() recordType  { return recAlterTopicConfigs }
func (*alterBrokerConfigsRecord) recordType() recordType { return recAlterBrokerCfgs }
func (*partitionChangeRecord) recordType() recordType    { return recPartitionChange }
func (*leaderChangeRecord) recordType() recordType       { return recLeaderChange }

// newRecord returns an empty record of type t, or nil for an unknown type.
func newRecord(t recordType) record {
	switch t {
	case recClusterID:
		return &clusterIDRecord{}
	case recRegisterBroker:
		return &registerBrokerRecord{}
	case recFenceBroker:
		return &fenceBrokerRecord{}
	case recUnfenceBroker:
		return &unfenceBrokerRecord{}
	case recCreateTopic:
		return &createTopicRecord{}
	case recDeleteTopic:
		return &deleteTopicRecord{}
	case recCreatePartitions:
		return &createPartitionsRecord{}
	case recAlterTopicConfigs:
		return &alterTopicConfigsRecord{}
	case recAlterBrokerCfgs:
		return &alterBrokerConfigsRecord{}
	case recPartitionChange:
		return &partitionChangeRecord{}
	case recLeaderChange:
		return &leaderChangeRecord{}
	case recExtension:
		return &extensionRecord{}
	case recProducerIDs:
		return &producerIDsRecord{}
	}
	return nil
}

// encodeRecord writes | type u8 | version u8 | JSON payload | at the newest version.
func encodeRecord(r record) ([]byte, error) {
	t := r.recordType()
	newest, oldest, ok := recordVersions(t)
	if !ok {
		return nil, fmt.Errorf("encode type %d: %w", t, ErrUnknownRecord)
	}
	ver := newest
	if vr, ok := r.(versionedRecord); ok {
		ver = vr.payloadVersion()
		if ver < oldest || ver > newest {
			return nil, fmt.Errorf("encode type %d version %d: %w", t, ver, ErrUnknownRecord)
		}
	}
	payload, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode type %d: %w", t, err)
	}
	return append([]byte{byte(t), ver}, payload...), nil
}

// decodeRecord parses an entry written by encodeRecord (any readable version).
func decodeRecord(b []byte) (record, error) {
	if len(b) < 2 {
		return nil, fmt.Errorf("%d bytes: %w", len(b), ErrBadRecord)
	}
	t, ver := recordType(b[0]), b[1]
	newest, oldest, ok := recordVersions(t)
	if !ok || ver < oldest || ver > newest {
		return nil, fmt.Errorf("type %d version %d: %w", t, ver, ErrUnknownRecord)
	}
	r := newRecord(t)
	if err := json.Unmarshal(b[2:], r); err != nil {
		return nil, fmt.Errorf("type %d version %d: %w: %v", t, ver, ErrBadRecord, err)
	}
	if pc, ok := r.(*partitionChangeRecord); ok && ver < 2 {
		// A version 1 entry means what it meant to version 1 readers, whatever else
		// its payload holds: every broker applies it alike.
		pc.partitionChangeV2 = partitionChangeV2{}
	}
	return r, nil
}

var (
	_ encoding.TextMarshaler   = uuid{}
	_ encoding.TextUnmarshaler = (*uuid)(nil)
)
