package image

import (
	"encoding"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
)

// recordType is the first byte of a metadata log entry. Values are frozen: a type is
// never renumbered or reused, even after it is retired.
type recordType uint8

// Record types (see metadata's doc.go for the format).
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
	RecPartitionChange   recordType = 10
	recLeaderChange      recordType = 11
	recExtension         recordType = 12
	recProducerIDs       recordType = 13
	recBatch             recordType = 14
	recFeatureLevel      recordType = 15
	recUnregisterBroker  recordType = 16
)

// recordVersions returns, for a type, the newest payload version this code writes and
// the oldest it still reads; ok is false for an unknown type. Bumping a version: add the
// field, raise newest, keep decoding newest-1 (see metadata's doc.go).
func recordVersions(t recordType) (newest, oldest uint8, ok bool) {
	switch t {
	case RecPartitionChange:
		return 2, 1, true
	case recClusterID, recRegisterBroker, recFenceBroker, recUnfenceBroker, recCreateTopic,
		recDeleteTopic, recCreatePartitions, recAlterTopicConfigs, recAlterBrokerCfgs,
		recLeaderChange, recExtension, recProducerIDs, recBatch, recFeatureLevel, recUnregisterBroker:
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

// Record is one typed metadata log entry.
type Record interface{ recordType() recordType }

// versionedRecord is a record whose payload may be written at an older version than
// its type's newest: it names the oldest version that holds it, so entries that use no
// new field stay readable by brokers that know only the older version.
type versionedRecord interface {
	Record
	payloadVersion() uint8
}

// UUID is a 16-byte id (cluster, topic, incarnation), written in JSON as Kafka prints
// it: unpadded base64url, 22 characters.
type UUID [16]byte

func (u UUID) String() string { return base64.RawURLEncoding.EncodeToString(u[:]) }

// MarshalText implements encoding.TextMarshaler.
func (u UUID) MarshalText() ([]byte, error) { return []byte(u.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (u *UUID) UnmarshalText(b []byte) error {
	n, err := base64.RawURLEncoding.Decode(u[:], b)
	if err != nil || n != 16 || len(b) != 22 {
		return fmt.Errorf("uuid %q: %w", b, ErrBadRecord)
	}
	return nil
}

type ClusterIDRecord struct {
	ClusterID string `json:"cluster_id"`
}

type Endpoint struct {
	Name string `json:"name"`
	Host string `json:"host"`
	Port int32  `json:"port"`
}

type RegisterBrokerRecord struct {
	NodeID      int32      `json:"node_id"`
	Incarnation UUID       `json:"incarnation"`
	Rack        string     `json:"rack,omitempty"`
	Endpoints   []Endpoint `json:"endpoints"`
	Fenced      bool       `json:"fenced,omitempty"`
	// Features are the feature levels the broker supports, [min, max] by name; absent
	// from brokers that predate feature levels (old readers ignore it: it only
	// informs the checks of later feature changes).
	Features map[string][2]int16 `json:"features,omitempty"`
}

// FenceBrokerRecord fences (or, as unfenceBrokerRecord, unfences) a broker. Epoch is
// the registration's epoch (its log index); a record for an older registration is a
// no-op. 0 matches any registration.
type FenceBrokerRecord struct {
	NodeID int32  `json:"node_id"`
	Epoch  uint64 `json:"epoch,omitempty"`
}

type UnfenceBrokerRecord FenceBrokerRecord

type PartitionAssignment struct {
	Replicas []int32 `json:"replicas"`
	Leader   int32   `json:"leader"`
	ISR      []int32 `json:"isr"`
}

type CreateTopicRecord struct {
	Name       string                `json:"name"`
	ID         UUID                  `json:"id"`
	Partitions []PartitionAssignment `json:"partitions"`
	Configs    map[string]string     `json:"configs,omitempty"`
}

type DeleteTopicRecord struct {
	Name string `json:"name"`
	ID   UUID   `json:"id"`
}

// CreatePartitionsRecord appends partitions to a topic that has exactly From of them.
type CreatePartitionsRecord struct {
	Topic      string                `json:"topic"`
	ID         UUID                  `json:"id"`
	From       int32                 `json:"from"`
	Partitions []PartitionAssignment `json:"partitions"`
}

// ConfigChange edits a config map: with Replace the map becomes Set; otherwise Set
// entries are written and Delete names removed.
type ConfigChange struct {
	Set     map[string]string `json:"set,omitempty"`
	Delete  []string          `json:"delete,omitempty"`
	Replace bool              `json:"replace,omitempty"`
}

type AlterTopicConfigsRecord struct {
	Topic string `json:"topic"`
	ID    UUID   `json:"id"`
	ConfigChange
}

// AlterBrokerConfigsRecord edits dynamic broker configs; Node "" is the cluster default.
type AlterBrokerConfigsRecord struct {
	Node string `json:"node"`
	ConfigChange
}

// PartitionChangeRecord changes a partition's leader, ISR or replicas (nil = keep).
// PartitionEpoch is the epoch the proposer saw (-1: don't check). A leader change
// bumps the leader epoch; any change bumps the partition epoch.
//
// Version 2 adds partitionChangeV2's fields, which old readers must not ignore: an
// entry that sets any of them is written as version 2, any other as version 1.
type PartitionChangeRecord struct {
	Topic          string  `json:"topic"`
	ID             UUID    `json:"id"`
	Partition      int32   `json:"partition"`
	PartitionEpoch int32   `json:"partition_epoch"`
	Leader         *int32  `json:"leader,omitempty"`
	ISR            []int32 `json:"isr,omitempty"`
	Replicas       []int32 `json:"replicas,omitempty"`
	PartitionChangeV2
}

// PartitionChangeV2 are the version 2 fields of a PartitionChange entry (see metadata's doc.go).
type PartitionChangeV2 struct {
	// ExpectLeader and ExpectLeaderEpoch are the leader and leader epoch the proposer
	// saw (nil: not checked). AlterPartition sets them; Apply rejects the entry when
	// the partition has another leader (errNotLeader) or leader epoch
	// (errFencedLeaderEpoch).
	ExpectLeader      *int32 `json:"expect_leader,omitempty"`
	ExpectLeaderEpoch *int32 `json:"expect_leader_epoch,omitempty"`
	// Validate makes Apply check the partition the entry leaves (see
	// State.checkPartition) and accept an entry that changes nothing without a new
	// partition epoch.
	Validate bool `json:"validate,omitempty"`
	// Reassignment sets the partition's adding and removing replicas (both empty: no
	// reassignment in progress); nil keeps them.
	Reassignment *ReassignmentRecord `json:"reassignment,omitempty"`
}

// ReassignmentRecord is the reassignment state a PartitionChange entry sets.
type ReassignmentRecord struct {
	Adding   []int32 `json:"adding,omitempty"`
	Removing []int32 `json:"removing,omitempty"`
}

// payloadVersion implements versionedRecord: 2 when a version 2 field is set.
func (r *PartitionChangeRecord) payloadVersion() uint8 {
	if r.ExpectLeader != nil || r.ExpectLeaderEpoch != nil || r.Validate || r.Reassignment != nil {
		return 2
	}
	return 1
}

// LeaderChangeRecord is written by a newly elected raft leader: it is the controller.
type LeaderChangeRecord struct {
	NodeID int32  `json:"node_id"`
	Term   uint64 `json:"term"`
}

func (*ClusterIDRecord) recordType() recordType          { return recClusterID }
func (*RegisterBrokerRecord) recordType() recordType     { return recRegisterBroker }
func (*FenceBrokerRecord) recordType() recordType        { return recFenceBroker }
func (*UnfenceBrokerRecord) recordType() recordType      { return recUnfenceBroker }
func (*CreateTopicRecord) recordType() recordType        { return recCreateTopic }
func (*DeleteTopicRecord) recordType() recordType        { return recDeleteTopic }
func (*CreatePartitionsRecord) recordType() recordType   { return recCreatePartitions }
func (*AlterTopicConfigsRecord) recordType() recordType  { return recAlterTopicConfigs }
func (*AlterBrokerConfigsRecord) recordType() recordType { return recAlterBrokerCfgs }
func (*PartitionChangeRecord) recordType() recordType    { return RecPartitionChange }
func (*LeaderChangeRecord) recordType() recordType       { return recLeaderChange }
func (*BatchRecord) recordType() recordType              { return recBatch }

// newRecord returns an empty record of type t, or nil for an unknown type.
func newRecord(t recordType) Record {
	switch t {
	case recClusterID:
		return &ClusterIDRecord{}
	case recRegisterBroker:
		return &RegisterBrokerRecord{}
	case recFenceBroker:
		return &FenceBrokerRecord{}
	case recUnfenceBroker:
		return &UnfenceBrokerRecord{}
	case recCreateTopic:
		return &CreateTopicRecord{}
	case recDeleteTopic:
		return &DeleteTopicRecord{}
	case recCreatePartitions:
		return &CreatePartitionsRecord{}
	case recAlterTopicConfigs:
		return &AlterTopicConfigsRecord{}
	case recAlterBrokerCfgs:
		return &AlterBrokerConfigsRecord{}
	case RecPartitionChange:
		return &PartitionChangeRecord{}
	case recLeaderChange:
		return &LeaderChangeRecord{}
	case recExtension:
		return &ExtensionRecord{}
	case recProducerIDs:
		return &ProducerIDsRecord{}
	case recFeatureLevel:
		return &FeatureLevelRecord{}
	case recUnregisterBroker:
		return &UnregisterBrokerRecord{}
	}
	return nil
}

// EncodeRecord writes | type u8 | version u8 | JSON payload | at the newest version
// (a BatchRecord: | 14 | 1 | its entries as EncodeBatch writes them |).
func EncodeRecord(r Record) ([]byte, error) {
	if b, ok := r.(*BatchRecord); ok {
		entries := make([][]byte, len(b.Records))
		for i, rec := range b.Records {
			if _, nested := rec.(*BatchRecord); nested {
				return nil, fmt.Errorf("encode batch: nested batch: %w", ErrInvalidEntry)
			}
			e, err := EncodeRecord(rec)
			if err != nil {
				return nil, err
			}
			entries[i] = e
		}
		return EncodeBatch(entries), nil
	}
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

// DecodeRecord parses an entry written by EncodeRecord (any readable version).
func DecodeRecord(b []byte) (Record, error) {
	if len(b) < 2 {
		return nil, fmt.Errorf("%d bytes: %w", len(b), ErrBadRecord)
	}
	t, ver := recordType(b[0]), b[1]
	newest, oldest, ok := recordVersions(t)
	if !ok || ver < oldest || ver > newest {
		return nil, fmt.Errorf("type %d version %d: %w", t, ver, ErrUnknownRecord)
	}
	if t == recBatch {
		return decodeBatch(b[2:])
	}
	r := newRecord(t)
	if err := json.Unmarshal(b[2:], r); err != nil {
		return nil, fmt.Errorf("type %d version %d: %w: %v", t, ver, ErrBadRecord, err)
	}
	if pc, ok := r.(*PartitionChangeRecord); ok && ver < 2 {
		// A version 1 entry means what it meant to version 1 readers, whatever else
		// its payload holds: every broker applies it alike.
		pc.PartitionChangeV2 = PartitionChangeV2{}
	}
	return r, nil
}

// BatchRecord is several records in one log entry, so that one admin request (a
// CreateTopics of 10,000 topics) is one raft append and one new image rather than one
// of each per record. Its records apply in order, each as if it were its own entry at
// the batch's index, to one new state; a record the state rejects changes nothing and
// the rest still apply (ApplyResult.Batch says which). Batches do not nest.
//
// Encoded: | 14 | 1 | count u32 | count × (len u32 | entry) | (big endian), each entry
// as EncodeRecord writes it, so each keeps its own type and version. A batch with an
// entry this broker cannot read is unreadable as a whole: every broker then keeps the
// same image for it.
type BatchRecord struct {
	Records []Record
}

// EncodeBatch writes a BatchRecord of entries already encoded by EncodeRecord (none a
// batch: the proposer checks).
func EncodeBatch(entries [][]byte) []byte {
	n := 6
	for _, e := range entries {
		n += 4 + len(e)
	}
	out := make([]byte, 0, n)
	out = append(out, byte(recBatch), 1)
	out = binary.BigEndian.AppendUint32(out, uint32(len(entries)))
	for _, e := range entries {
		out = binary.BigEndian.AppendUint32(out, uint32(len(e)))
		out = append(out, e...)
	}
	return out
}

// minBatchedEntry is the smallest entry a batch can hold: its length and two header bytes.
const minBatchedEntry = 4 + 2

// decodeBatch parses a BatchRecord's payload (after type and version).
func decodeBatch(b []byte) (*BatchRecord, error) {
	if len(b) < 4 {
		return nil, fmt.Errorf("batch of %d bytes: %w", len(b), ErrBadRecord)
	}
	count := binary.BigEndian.Uint32(b)
	b = b[4:]
	// The count is checked against the bytes before anything is allocated for it.
	if uint64(count)*minBatchedEntry > uint64(len(b)) {
		return nil, fmt.Errorf("batch of %d entries in %d bytes: %w", count, len(b), ErrBadRecord)
	}
	out := &BatchRecord{Records: make([]Record, 0, count)}
	for i := range count {
		if len(b) < 4 {
			return nil, fmt.Errorf("batch entry %d: %w", i, ErrBadRecord)
		}
		n := binary.BigEndian.Uint32(b)
		b = b[4:]
		if uint64(n) > uint64(len(b)) {
			return nil, fmt.Errorf("batch entry %d of %d bytes in %d: %w", i, n, len(b), ErrBadRecord)
		}
		e := b[:n]
		b = b[n:]
		if len(e) > 0 && recordType(e[0]) == recBatch {
			return nil, fmt.Errorf("batch entry %d: nested batch: %w", i, ErrBadRecord)
		}
		r, err := DecodeRecord(e)
		if err != nil {
			return nil, fmt.Errorf("batch entry %d: %w", i, err)
		}
		out.Records = append(out.Records, r)
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("batch: %d bytes after its last entry: %w", len(b), ErrBadRecord)
	}
	return out, nil
}

var (
	_ encoding.TextMarshaler   = UUID{}
	_ encoding.TextUnmarshaler = (*UUID)(nil)
)
