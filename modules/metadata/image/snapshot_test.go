package image

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"testing"
)

// TestSnapshotFormat4: a reassignment in progress needs format 4 and survives a
// snapshot; without one the oldest format is written again; format 3 ignores
// reassignment fields.
// TestSnapshotFormat4: a reassignment in progress is written in format 4, and a format 3
// snapshot ignores the reassignment fields.
func TestSnapshotFormat4(t *testing.T) {
	s := partitionState(t)
	// The entry AlterPartitionReassignments writes to move p-0 from 1,2,3 to 2,3.
	rec := &PartitionChangeRecord{Topic: "p", ID: id(20), PartitionEpoch: s.Image.Partition("p", 0).PartitionEpoch,
		Replicas: []int32{2, 3, 1}, PartitionChangeV2: PartitionChangeV2{Validate: true, Reassignment: &ReassignmentRecord{Removing: []int32{1}}}}
	moving, err := s.Apply(50, rec)
	if err != nil {
		t.Fatal(err)
	}
	b, err := EncodeSnapshot(moving)
	if err != nil || b[0] != SnapshotFormatV4 {
		t.Fatalf("format %d, %v", b[0], err)
	}
	r, err := DecodeSnapshot(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if p := r.Image.Partition("p", 0); !slices.Equal(p.AddingReplicas, nil) || !slices.Equal(p.RemovingReplicas, []int32{1}) {
		t.Errorf("restored %+v", *p)
	}
	if again, _ := EncodeSnapshot(r); !bytes.Equal(again, b) {
		t.Error("snapshot of the restored state differs")
	}
	if b, _ := EncodeSnapshot(s); b[0] != SnapshotFormatV1 {
		t.Errorf("no reassignment: format %d", b[0])
	}
	b[0] = SnapshotFormatV3
	old := bytes.Replace(b, []byte(`"isr":[1,2]`), []byte(`"isr":[1,2],"removing":[1]`), 1)
	if r, err := DecodeSnapshot(bytes.NewReader(old)); err != nil || len(r.Image.Partition("p", 0).RemovingReplicas) > 0 {
		t.Errorf("format 3 with reassignment fields: %v", err)
	}
}

// TestExtensionCopyOnWrite checks that an entry copies only the namespace it changes.
func TestExtensionCopyOnWrite(t *testing.T) {
	s := EmptyState()
	apply := func(r *ExtensionRecord) {
		t.Helper()
		var err error
		if s, err = s.Apply(s.Image.Version+1, r); err != nil {
			t.Fatal(err)
		}
	}
	apply(&ExtensionRecord{Namespace: "a", Key: "k", Value: []byte("1")})
	apply(&ExtensionRecord{Namespace: "b", Key: "k", Value: []byte("2")})
	before := s.Image
	apply(&ExtensionRecord{Namespace: "a", Key: "k2", Value: []byte("3")})
	after := s.Image
	if reflect.ValueOf(before.Extensions["b"]).Pointer() != reflect.ValueOf(after.Extensions["b"]).Pointer() {
		t.Error("unchanged namespace copied")
	}
	if &before.Extensions["a"]["k"][0] != &after.Extensions["a"]["k"][0] {
		t.Error("unchanged value copied")
	}
	if _, ok := before.Extensions["a"]["k2"]; ok || len(after.Extensions["a"]) != 2 {
		t.Errorf("before %v after %v", before.Extensions, after.Extensions)
	}
	// Deleting an absent key changes nothing but the version.
	apply(&ExtensionRecord{Namespace: "c", Key: "k", Delete: true})
	if reflect.ValueOf(after.Extensions).Pointer() != reflect.ValueOf(s.Image.Extensions).Pointer() {
		t.Error("deleting an absent key copied the map")
	}
}

func TestSnapshotFormats(t *testing.T) {
	plain, err := EncodeSnapshot(EmptyState())
	if err != nil || plain[0] != SnapshotFormatV1 {
		t.Fatalf("no extensions: format %d, %v", plain[0], err)
	}
	s, _ := EmptyState().Apply(1, &ExtensionRecord{Namespace: "a", Key: "k", Value: []byte{0, 1, 2}})
	withExt, err := EncodeSnapshot(s)
	if err != nil || withExt[0] != SnapshotFormatV2 {
		t.Fatalf("extensions: format %d, %v", withExt[0], err)
	}
	r, err := DecodeSnapshot(bytes.NewReader(withExt))
	if err != nil || !bytes.Equal(r.Image.Extension("a", "k"), []byte{0, 1, 2}) {
		t.Fatalf("decode format 2: %v %v", r, err)
	}
	// A format 1 snapshot written before extensions existed still loads.
	old := append([]byte{SnapshotFormatV1}, `{"version":7,"cluster_id":"c","controller_id":1,"brokers":[],"topics":[]}`+"\n"...)
	r, err = DecodeSnapshot(bytes.NewReader(old))
	if err != nil || r.Image.Version != 7 || r.Image.Extensions == nil || len(r.Image.Extensions) != 0 {
		t.Fatalf("decode format 1: %+v %v", r, err)
	}
	if _, err := DecodeSnapshot(bytes.NewReader([]byte{6, '{', '}'})); !errors.Is(err, ErrUnknownRecord) {
		t.Errorf("format 6: %v", err)
	}
}

func TestSnapshotFormat3(t *testing.T) {
	s, _ := EmptyState().Apply(1, &ProducerIDsRecord{BrokerID: 1, Count: 42})
	b, err := EncodeSnapshot(s)
	if err != nil || b[0] != SnapshotFormatV3 {
		t.Fatalf("producer ids: format %d, %v", b[0], err)
	}
	r, err := DecodeSnapshot(bytes.NewReader(b))
	if err != nil || r.NextProducerID != 42 {
		t.Fatalf("decode format 3: %+v %v", r, err)
	}
	// Extensions and producer ids together: format 3 keeps both.
	s, _ = s.Apply(2, &ExtensionRecord{Namespace: "a", Key: "k", Value: []byte("v")})
	if b, err = EncodeSnapshot(s); err != nil || b[0] != SnapshotFormatV3 {
		t.Fatalf("both: format %d, %v", b[0], err)
	}
	if r, err = DecodeSnapshot(bytes.NewReader(b)); err != nil || r.NextProducerID != 42 || string(r.Image.Extension("a", "k")) != "v" {
		t.Fatalf("decode both: %+v %v", r, err)
	}
	// Older formats predate ProducerIDs entries: they load with the counter at 0 (and
	// a field they did not have is ignored, as an older broker would).
	for _, old := range [][]byte{
		append([]byte{SnapshotFormatV1}, `{"version":7,"cluster_id":"c","controller_id":1,"brokers":[],"topics":[]}`+"\n"...),
		append([]byte{SnapshotFormatV2}, `{"version":7,"cluster_id":"c","controller_id":1,"brokers":[],"topics":[],"extensions":{"a":{"k":"dg=="}}}`+"\n"...),
		append([]byte{SnapshotFormatV2}, `{"version":7,"cluster_id":"c","controller_id":1,"brokers":[],"topics":[],"next_producer_id":9}`+"\n"...),
	} {
		r, err := DecodeSnapshot(bytes.NewReader(old))
		if err != nil || r.Image.Version != 7 || r.NextProducerID != 0 {
			t.Fatalf("decode format %d: %+v %v", old[0], r, err)
		}
	}
	// Without allocations the older formats are still written.
	if b, _ := EncodeSnapshot(EmptyState()); b[0] != SnapshotFormatV1 {
		t.Errorf("empty state: format %d", b[0])
	}
	bad := append([]byte{SnapshotFormatV3}, `{"version":7,"brokers":[],"topics":[],"next_producer_id":-1}`...)
	if _, err := DecodeSnapshot(bytes.NewReader(bad)); !errors.Is(err, ErrBadRecord) {
		t.Errorf("negative counter: %v", err)
	}
}
