package image

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/sluicehq/sluice/kernel"
)

// Snapshot formats, the first byte of a snapshot (see metadata's doc.go). Format 2 is format 1
// plus Extensions; format 3 is format 2 plus NextProducerID; format 4 is format 3 plus
// each partition's adding and removing replicas; format 5 is format 4 plus the
// finalized feature levels and the brokers' supported ones. Each snapshot is written
// in the oldest format that holds the state: 1 without extensions and producer ids, 2
// with extensions only, 3 once a producer id was allocated, 4 while a reassignment is
// in progress, 5 once a feature is finalized or a broker registered its features. So
// a state that does not
// need a newer format still gives a snapshot older brokers read, and an older broker
// meets a newer format only once entries it cannot read either are in the log; it then
// refuses the snapshot instead of silently dropping the extensions or, worse, resetting
// the producer id counter (which would hand out ids twice).
const (
	SnapshotFormatV1 = 1
	SnapshotFormatV2 = 2
	SnapshotFormatV3 = 3
	SnapshotFormatV4 = 4
	SnapshotFormatV5 = 5
)

// snapshotV1 is the serialized state (formats 1, 2 and 3). Slices are sorted (brokers by
// id, topics by name) and encoding/json sorts map keys, so equal states give equal
// bytes.
type snapshotV1 struct {
	Version       uint64                       `json:"version"`
	ClusterID     string                       `json:"cluster_id"`
	ControllerID  int32                        `json:"controller_id"`
	Brokers       []snapBroker                 `json:"brokers"`
	Topics        []snapTopic                  `json:"topics"`
	BrokerConfigs map[string]map[string]string `json:"broker_configs,omitempty"`
	// Extensions is namespace -> key -> value (base64); formats 2 and 3.
	Extensions map[string]map[string][]byte `json:"extensions,omitempty"`
	// NextProducerID is the first unallocated producer id; format 3 only (older
	// formats predate ProducerIDs entries, so their states have 0).
	NextProducerID int64 `json:"next_producer_id,omitempty"`
	// Features are the finalized feature levels; format 5 only.
	Features map[string]int16 `json:"features,omitempty"`
}

type snapBroker struct {
	ID          int32      `json:"id"`
	Rack        string     `json:"rack,omitempty"`
	Endpoints   []Endpoint `json:"endpoints"`
	Fenced      bool       `json:"fenced,omitempty"`
	Incarnation UUID       `json:"incarnation"`
	Epoch       uint64     `json:"epoch"`
	// Features are the levels the broker supports; format 5 only.
	Features map[string][2]int16 `json:"features,omitempty"`
}

type snapTopic struct {
	Name       string            `json:"name"`
	ID         UUID              `json:"id"`
	Partitions []snapPartition   `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"`
}

type snapPartition struct {
	Leader         int32   `json:"leader"`
	LeaderEpoch    int32   `json:"leader_epoch"`
	PartitionEpoch int32   `json:"partition_epoch"`
	Replicas       []int32 `json:"replicas"`
	ISR            []int32 `json:"isr"`
	// Adding and Removing are a reassignment in progress; format 4 only.
	Adding   []int32 `json:"adding,omitempty"`
	Removing []int32 `json:"removing,omitempty"`
}

// EncodeSnapshot writes | format u8 | JSON |.
func EncodeSnapshot(s *State) ([]byte, error) {
	im := s.Image
	snap := snapshotV1{
		Version:       im.Version,
		ClusterID:     im.ClusterID,
		ControllerID:  im.ControllerID,
		Brokers:       []snapBroker{},
		Topics:        []snapTopic{},
		BrokerConfigs: im.BrokerConfigs,
	}
	format := byte(SnapshotFormatV1)
	if len(im.Extensions) > 0 {
		format, snap.Extensions = SnapshotFormatV2, im.Extensions
	}
	if s.NextProducerID > 0 {
		format, snap.NextProducerID = SnapshotFormatV3, s.NextProducerID
	}
	// Topics below raise the format to 4 while a reassignment is in progress, and
	// features (after them) to 5.
	features := len(im.Features) > 0
	for _, id := range slices.Sorted(maps.Keys(im.Brokers)) {
		b := im.Brokers[id]
		sb := snapBroker{ID: b.ID, Rack: b.Rack, Fenced: b.Fenced, Endpoints: []Endpoint{},
			Incarnation: s.Regs[id].Incarnation, Epoch: s.Regs[id].Epoch, Features: b.Features}
		features = features || b.Features != nil
		for _, e := range b.Endpoints {
			sb.Endpoints = append(sb.Endpoints, Endpoint{Name: e.Name, Host: e.Host, Port: e.Port})
		}
		snap.Brokers = append(snap.Brokers, sb)
	}
	names := make([]string, 0, im.NumTopics())
	for name := range im.Topics() {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		t := im.Topic(name)
		st := snapTopic{Name: t.Name, ID: t.ID, Configs: t.Configs, Partitions: []snapPartition{}}
		for _, p := range t.Partitions {
			st.Partitions = append(st.Partitions, snapPartition{
				Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch,
				Replicas: p.Replicas, ISR: p.ISR, Adding: p.AddingReplicas, Removing: p.RemovingReplicas,
			})
			if len(p.AddingReplicas) > 0 || len(p.RemovingReplicas) > 0 {
				format = SnapshotFormatV4
			}
		}
		snap.Topics = append(snap.Topics, st)
	}
	if features {
		format, snap.Features = SnapshotFormatV5, im.Features
	}
	var buf bytes.Buffer
	buf.WriteByte(format)
	if err := json.NewEncoder(&buf).Encode(&snap); err != nil {
		return nil, fmt.Errorf("encode snapshot: %w", err)
	}
	return buf.Bytes(), nil
}

// DecodeSnapshot reads what encodeSnapshot wrote.
func DecodeSnapshot(r io.Reader) (*State, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read snapshot: %w", err)
	}
	if len(b) == 0 || b[0] < SnapshotFormatV1 || b[0] > SnapshotFormatV5 {
		return nil, fmt.Errorf("snapshot format: %w", ErrUnknownRecord)
	}
	var snap snapshotV1
	if err := json.Unmarshal(b[1:], &snap); err != nil {
		return nil, fmt.Errorf("decode snapshot: %w: %v", ErrBadRecord, err)
	}
	snapFormat := b[0]
	s := EmptyState()
	im := s.Image
	im.Version, im.ClusterID, im.ControllerID = snap.Version, snap.ClusterID, snap.ControllerID
	for _, sb := range snap.Brokers {
		b := &kernel.BrokerImage{ID: sb.ID, Rack: sb.Rack, Fenced: sb.Fenced}
		if len(sb.Features) > 0 && snapFormat >= SnapshotFormatV5 {
			b.Features = sb.Features
		}
		for _, e := range sb.Endpoints {
			b.Endpoints = append(b.Endpoints, kernel.ListenerInfo{Name: e.Name, Host: e.Host, Port: e.Port})
		}
		im.Brokers[sb.ID] = b
		s.Regs[sb.ID] = BrokerReg{Incarnation: sb.Incarnation, Epoch: sb.Epoch}
	}
	for _, st := range snap.Topics {
		t := &kernel.TopicImage{Name: st.Name, ID: st.ID, Internal: IsInternalTopic(st.Name), Configs: st.Configs}
		for i, p := range st.Partitions {
			pi := kernel.PartitionImage{
				Partition: int32(i), Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
				PartitionEpoch: p.PartitionEpoch, Replicas: p.Replicas, ISR: p.ISR,
			}
			if b[0] >= SnapshotFormatV4 && (len(p.Adding) > 0 || len(p.Removing) > 0) {
				pi.AddingReplicas, pi.RemovingReplicas = p.Adding, p.Removing
			}
			t.Partitions = append(t.Partitions, pi)
		}
		im.PutTopic(t)
	}
	for k, v := range snap.BrokerConfigs {
		if len(v) > 0 {
			im.BrokerConfigs[k] = v
		}
	}
	if b[0] >= SnapshotFormatV2 {
		for ns, kv := range snap.Extensions {
			if len(kv) == 0 {
				continue
			}
			for k, v := range kv {
				if v == nil { // JSON null: an empty value, as Apply stores it
					kv[k] = []byte{}
				}
			}
			im.Extensions[ns] = kv
		}
	}
	if b[0] >= SnapshotFormatV3 {
		if snap.NextProducerID < 0 {
			return nil, fmt.Errorf("decode snapshot: next producer id %d: %w", snap.NextProducerID, ErrBadRecord)
		}
		s.NextProducerID = snap.NextProducerID
	}
	if snapFormat >= SnapshotFormatV5 {
		for name, level := range snap.Features {
			if name == "" || level <= 0 {
				return nil, fmt.Errorf("decode snapshot: feature %q level %d: %w", name, level, ErrBadRecord)
			}
		}
		if len(snap.Features) > 0 {
			im.Features = snap.Features
		}
	}
	// Formats 1 and 2 leave nextProducerID at 0: they were written by brokers that had
	// no ProducerIDs entries, so no id can have been allocated before such a snapshot.
	return s, nil
}
