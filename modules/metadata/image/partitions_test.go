package image

import (
	"errors"
	"slices"
	"testing"
)

// partitionState is a state with brokers 1-4 (4 fenced) and topic "p" (id 20) whose
// partition 0 has replicas 1,2,3, leader 1, ISR 1,2.
func partitionState(t *testing.T) *State {
	t.Helper()
	s := EmptyState()
	recs := []Record{
		&RegisterBrokerRecord{NodeID: 1, Incarnation: id(1)},
		&RegisterBrokerRecord{NodeID: 2, Incarnation: id(2)},
		&RegisterBrokerRecord{NodeID: 3, Incarnation: id(3)},
		&RegisterBrokerRecord{NodeID: 4, Incarnation: id(4)},
		&FenceBrokerRecord{NodeID: 4},
		&CreateTopicRecord{Name: "p", ID: id(20), Partitions: []PartitionAssignment{{Replicas: []int32{1, 2, 3}, Leader: 1, ISR: []int32{1, 2}}}},
	}
	for i, r := range recs {
		var err error
		if s, err = s.Apply(uint64(i+1), r); err != nil {
			t.Fatalf("setup %d: %v", i, err)
		}
	}
	return s
}

// alterRec is the entry AlterPartition writes.
func alterRec(leader, leaderEpoch, partitionEpoch int32, isr ...int32) *PartitionChangeRecord {
	return &PartitionChangeRecord{Topic: "p", ID: id(20), PartitionEpoch: partitionEpoch, ISR: isr,
		PartitionChangeV2: PartitionChangeV2{ExpectLeader: &leader, ExpectLeaderEpoch: &leaderEpoch, Validate: true}}
}

// TestApplyAlterPartition: every check of a validated PartitionChange, through the
// record codec (version 2), on the state alone.
func TestApplyAlterPartition(t *testing.T) {
	base := partitionState(t)
	for _, tc := range []struct {
		name    string
		rec     *PartitionChangeRecord
		wantErr error
		wantISR []int32
		epoch   int32 // partition epoch after
	}{
		{"expand", alterRec(1, 0, 0, 1, 2, 3), nil, []int32{1, 2, 3}, 1},
		{"shrink", alterRec(1, 0, 0, 1), nil, []int32{1}, 1},
		{"same set", alterRec(1, 0, 0, 2, 1), nil, []int32{1, 2}, 0},
		{"not the leader", alterRec(2, 0, 0, 1, 2), ErrNotLeader, nil, 0},
		{"old leader epoch", alterRec(1, 3, 0, 1, 2), ErrFencedLeaderEpoch, nil, 0},
		{"stale partition epoch", alterRec(1, 0, 4, 1), ErrStale, nil, 0},
		{"leader left out", alterRec(1, 0, 0, 2), ErrInvalidEntry, nil, 0},
		{"duplicate", alterRec(1, 0, 0, 1, 1), ErrInvalidEntry, nil, 0},
		{"duplicate same size", alterRec(1, 0, 0, 1, 1, 2), ErrInvalidEntry, nil, 0},
		{"not a replica", alterRec(1, 0, 0, 1, 4), ErrInvalidEntry, nil, 0},
		{"unknown topic", &PartitionChangeRecord{Topic: "p", ID: id(21), ISR: []int32{1}, PartitionChangeV2: PartitionChangeV2{Validate: true}}, ErrUnknownTopic, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := EncodeRecord(tc.rec)
			if err != nil || b[1] != 2 {
				t.Fatalf("encode: version %d, %v", b[1], err)
			}
			rec, err := DecodeRecord(b)
			if err != nil {
				t.Fatal(err)
			}
			s, err := base.Apply(100, rec)
			if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			p := s.Image.Partition("p", 0)
			if tc.wantErr != nil {
				if !slices.Equal(p.ISR, []int32{1, 2}) || p.PartitionEpoch != 0 {
					t.Errorf("rejected entry changed the partition: %+v", p)
				}
				return
			}
			if !slices.Equal(p.ISR, tc.wantISR) || p.PartitionEpoch != tc.epoch || p.Leader != 1 || p.LeaderEpoch != 0 {
				t.Errorf("partition %+v, want ISR %v epoch %d", p, tc.wantISR, tc.epoch)
			}
		})
	}
	// A fenced broker cannot join the ISR.
	s, err := base.Apply(7, &PartitionChangeRecord{Topic: "p", ID: id(20), PartitionEpoch: 0, Replicas: []int32{1, 2, 3, 4},
		PartitionChangeV2: PartitionChangeV2{Validate: true}})
	if err != nil {
		t.Fatalf("add replica 4: %v", err)
	}
	if _, err := s.Apply(8, alterRec(1, 0, 1, 1, 2, 4)); !errors.Is(err, ErrIneligibleReplica) {
		t.Errorf("fenced broker joins the ISR: %v", err)
	}
	// A member that stays need not be live: broker 2 fenced, the leader keeps it.
	s, _ = s.Apply(9, &FenceBrokerRecord{NodeID: 2})
	if _, err := s.Apply(10, alterRec(1, 0, 1, 1, 2)); err != nil {
		t.Errorf("keeping a fenced member: %v", err)
	}
	// A validated change may not name an unregistered replica or a fenced new leader.
	if _, err := base.Apply(11, &PartitionChangeRecord{Topic: "p", ID: id(20), PartitionEpoch: -1, Replicas: []int32{1, 2, 3, 9},
		PartitionChangeV2: PartitionChangeV2{Validate: true}}); !errors.Is(err, ErrUnknownBroker) {
		t.Errorf("unregistered replica: %v", err)
	}
	if _, err := s.Apply(12, &PartitionChangeRecord{Topic: "p", ID: id(20), PartitionEpoch: -1, Leader: i32(2),
		PartitionChangeV2: PartitionChangeV2{Validate: true}}); !errors.Is(err, ErrIneligibleReplica) {
		t.Errorf("fenced new leader: %v", err)
	}
}

// TestPartitionChangeVersions: an entry with no version 2 field stays version 1, and a
// version 1 entry's payload never carries version 2 meaning.
func TestPartitionChangeVersions(t *testing.T) {
	v1 := &PartitionChangeRecord{Topic: "p", ID: id(20), PartitionEpoch: 0, Leader: i32(2)}
	b, err := EncodeRecord(v1)
	if err != nil || b[1] != 1 {
		t.Fatalf("plain change: version %d, %v", b[1], err)
	}
	// A version 1 header with a version 2 field: the field is dropped on decoding.
	forged := append([]byte{byte(RecPartitionChange), 1}, `{"topic":"p","id":"`+id(20).String()+`","partition":0,"partition_epoch":0,"isr":[2],"expect_leader":7,"validate":true}`...)
	rec, err := DecodeRecord(forged)
	if err != nil {
		t.Fatal(err)
	}
	if pc := rec.(*PartitionChangeRecord); pc.ExpectLeader != nil || pc.Validate {
		t.Errorf("version 1 entry kept version 2 fields: %+v", pc)
	}
	if _, err := DecodeRecord(append([]byte{byte(RecPartitionChange), 3}, '{', '}')); !errors.Is(err, ErrUnknownRecord) {
		t.Errorf("version 3: %v", err)
	}
}
