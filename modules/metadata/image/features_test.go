package image

import (
	"bytes"
	"errors"
	"maps"
	"testing"
)

// featureState has broker 1 supporting g 0-1 and m 7-27, and broker 2 from before
// feature levels (no features listed).
func featureState(t *testing.T) *State {
	t.Helper()
	s := EmptyState()
	for i, r := range []Record{
		&RegisterBrokerRecord{NodeID: 1, Incarnation: id(1), Features: map[string][2]int16{"g": {0, 1}, "m": {7, 27}}},
		&RegisterBrokerRecord{NodeID: 2, Incarnation: id(2)},
	} {
		var err error
		if s, err = s.Apply(uint64(i+1), r); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func TestFeatureLevels(t *testing.T) {
	s := featureState(t)
	if got := s.Image.Brokers[1].Features["m"]; got != [2]int16{7, 27} {
		t.Fatalf("broker 1's m range %v", got)
	}
	apply := func(r *FeatureLevelRecord) error {
		t.Helper()
		next, err := s.Apply(s.Image.Version+1, r)
		s = next
		return err
	}
	if err := apply(&FeatureLevelRecord{Name: "m", Level: 27}); err != nil {
		t.Fatal(err)
	}
	before := s.Image
	if err := apply(&FeatureLevelRecord{Name: "g", Level: 1}); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(s.Image.Features, map[string]int16{"m": 27, "g": 1}) || len(before.Features) != 1 {
		t.Fatalf("features %v, the image before %v (must not change)", s.Image.Features, before.Features)
	}
	// Beyond broker 1's range, or a feature it does not list: refused, nothing changes.
	for _, r := range []*FeatureLevelRecord{{Name: "m", Level: 28}, {Name: "g", Level: 2}, {Name: "x", Level: 1}} {
		if err := apply(r); !errors.Is(err, ErrUnsupportedFeature) {
			t.Errorf("%+v: %v, want ErrUnsupportedFeature", r, err)
		}
	}
	for _, r := range []*FeatureLevelRecord{{Name: "", Level: 1}, {Name: "g", Level: -1}} {
		if err := apply(r); !errors.Is(err, ErrInvalidEntry) {
			t.Errorf("%+v: %v, want ErrInvalidEntry", r, err)
		}
	}
	if s.Image.Feature("g") != 1 || s.Image.Feature("x") != 0 {
		t.Fatalf("features after refusals %v", s.Image.Features)
	}
	// Level 0 takes a feature out; with none left the map is nil.
	if err := apply(&FeatureLevelRecord{Name: "g", Level: 0}); err != nil || s.Image.Feature("g") != 0 {
		t.Fatalf("g off: %v %v", err, s.Image.Features)
	}
	if err := apply(&FeatureLevelRecord{Name: "m", Level: 0}); err != nil || s.Image.Features != nil {
		t.Fatalf("all off: %v %v", err, s.Image.Features)
	}
}

// Feature levels and the brokers' ranges survive a snapshot, in format 5.
func TestSnapshotFormat5(t *testing.T) {
	s := featureState(t)
	s, _ = s.Apply(3, &FeatureLevelRecord{Name: "m", Level: 20})
	b, err := EncodeSnapshot(s)
	if err != nil || b[0] != SnapshotFormatV5 {
		t.Fatalf("format %d, %v", b[0], err)
	}
	r, err := DecodeSnapshot(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if r.Image.Feature("m") != 20 || r.Image.Brokers[1].Features["g"] != [2]int16{0, 1} || r.Image.Brokers[2].Features != nil {
		t.Fatalf("restored features %v, brokers %+v %+v", r.Image.Features, *r.Image.Brokers[1], *r.Image.Brokers[2])
	}
	if again, _ := EncodeSnapshot(r); !bytes.Equal(again, b) {
		t.Error("snapshot of the restored state differs")
	}
	bad := bytes.Replace(b, []byte(`"features":{"m":20}`), []byte(`"features":{"m":0}`), 1)
	if _, err := DecodeSnapshot(bytes.NewReader(bad)); !errors.Is(err, ErrBadRecord) {
		t.Errorf("a finalized level 0: %v", err)
	}
}

func TestUnregisterBroker(t *testing.T) {
	s := featureState(t)
	if _, err := s.Apply(3, &UnregisterBrokerRecord{NodeID: 1}); !errors.Is(err, ErrBrokerLive) {
		t.Fatalf("a live broker: %v", err)
	}
	if _, err := s.Apply(3, &UnregisterBrokerRecord{NodeID: 9}); !errors.Is(err, ErrUnknownBroker) {
		t.Fatalf("an unknown broker: %v", err)
	}
	s, _ = s.Apply(3, &FenceBrokerRecord{NodeID: 1})
	before := s.Image
	next, err := s.Apply(4, &UnregisterBrokerRecord{NodeID: 1})
	if err != nil {
		t.Fatal(err)
	}
	if next.Image.Brokers[1] != nil || len(next.Image.Brokers) != 1 || next.Regs[1] != (BrokerReg{}) || before.Brokers[1] == nil {
		t.Fatalf("after: brokers %v regs %v; before %v", next.Image.Brokers, next.Regs, before.Brokers)
	}
}
