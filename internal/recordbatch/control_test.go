package recordbatch

import (
	"errors"
	"testing"
)

func TestMarkerRoundTrip(t *testing.T) {
	for _, commit := range []bool{false, true} {
		b := BuildMarker(42, 7, Marker{Commit: commit, CoordinatorEpoch: 3}, 1000)
		if _, err := Validate(b); err != nil {
			t.Fatal(err)
		}
		h, err := ParseHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		if !h.IsControl() || !h.IsTransactional() || h.ProducerID != 42 || h.ProducerEpoch != 7 || h.BaseSequence != -1 || h.RecordCount != 1 {
			t.Fatalf("header %+v", h)
		}
		m, err := ParseMarker(b)
		if err != nil || m.Commit != commit || m.CoordinatorEpoch != 3 {
			t.Fatalf("marker %+v, %v", m, err)
		}
	}
}

func TestParseMarkerRejectsOtherControlTypes(t *testing.T) {
	b := Build(Options{Control: true, Transactional: true, ProducerID: 1, BaseSequence: -1},
		Record{Key: []byte{0, 0, 0, 5}, Value: []byte{0, 0, 0, 0, 0, 0}})
	if _, err := ParseMarker(b); !errors.Is(err, ErrRecords) {
		t.Fatalf("type 5: %v", err)
	}
	b = Build(Options{Control: true, ProducerID: 1, BaseSequence: -1},
		Record{Key: []byte{0, 0, 0, 1}}, Record{Key: []byte{0, 0, 0, 1}})
	if _, err := ParseMarker(b); !errors.Is(err, ErrRecords) {
		t.Fatalf("two records: %v", err)
	}
}
