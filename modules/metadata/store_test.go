package metadata

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func testLog(i uint64) *raft.Log {
	l := &raft.Log{Index: i, Term: i/3 + 1, Type: raft.LogCommand, Data: []byte{byte(i), 1, 2}}
	if i%2 == 0 {
		l.Extensions = []byte("ext")
		l.AppendedAt = time.Unix(1700000000, int64(i))
	}
	return l
}

func sameLog(a, b *raft.Log) bool {
	return a.Index == b.Index && a.Term == b.Term && a.Type == b.Type && bytes.Equal(a.Data, b.Data) &&
		bytes.Equal(a.Extensions, b.Extensions) && a.AppendedAt.Equal(b.AppendedAt)
}

// reopenBolt closes s and opens the store at path again, closed when the test ends.
func reopenBolt(t *testing.T, s *boltStore, path string) *boltStore {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := openBoltStore(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestBoltStoreLogs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metadata", "raft.db")
	s, err := openBoltStore(path)
	if err != nil {
		t.Fatal(err)
	}
	if first, _ := s.FirstIndex(); first != 0 {
		t.Errorf("empty FirstIndex = %d", first)
	}
	if last, _ := s.LastIndex(); last != 0 {
		t.Errorf("empty LastIndex = %d", last)
	}
	var l raft.Log
	if err := s.GetLog(1, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Errorf("GetLog on empty store: %v", err)
	}
	if err := s.StoreLog(testLog(1)); err != nil {
		t.Fatal(err)
	}
	var batch []*raft.Log
	for i := uint64(2); i <= 300; i++ { // past 255, so keys must sort as numbers
		batch = append(batch, testLog(i))
	}
	if err := s.StoreLogs(batch); err != nil {
		t.Fatal(err)
	}
	check := func(s *boltStore, first, last uint64) {
		t.Helper()
		if f, err := s.FirstIndex(); err != nil || f != first {
			t.Errorf("FirstIndex = %d, %v; want %d", f, err, first)
		}
		if la, err := s.LastIndex(); err != nil || la != last {
			t.Errorf("LastIndex = %d, %v; want %d", la, err, last)
		}
		for i := first; i <= last; i++ {
			var got raft.Log
			if err := s.GetLog(i, &got); err != nil || !sameLog(&got, testLog(i)) {
				t.Fatalf("GetLog(%d) = %+v, %v", i, got, err)
			}
		}
	}
	check(s, 1, 300)
	if err := s.DeleteRange(1, 10); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRange(290, 300); err != nil { // raft truncating a conflicting tail
		t.Fatal(err)
	}
	check(s, 11, 289)
	if err := s.GetLog(5, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Errorf("GetLog(5) after delete: %v", err)
	}

	// Reopen: everything committed is there.
	s = reopenBolt(t, s, path)
	check(s, 11, 289)
}

func TestBoltStoreStable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.db")
	s, err := openBoltStore(path)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := s.Get([]byte("missing")); err != nil || len(v) != 0 {
		t.Errorf("Get(missing) = %q, %v", v, err)
	}
	if v, err := s.GetUint64([]byte("missing")); err != nil || v != 0 {
		t.Errorf("GetUint64(missing) = %d, %v", v, err)
	}
	if err := s.Set([]byte("LastVoteCand"), []byte("node-1")); err != nil {
		t.Fatal(err)
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 42); err != nil {
		t.Fatal(err)
	}
	s = reopenBolt(t, s, path)
	if v, err := s.Get([]byte("LastVoteCand")); err != nil || string(v) != "node-1" {
		t.Errorf("Get after reopen = %q, %v", v, err)
	}
	if v, err := s.GetUint64([]byte("CurrentTerm")); err != nil || v != 42 {
		t.Errorf("GetUint64 after reopen = %d, %v", v, err)
	}
	if err := s.Set([]byte("bad"), []byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetUint64([]byte("bad")); !errors.Is(err, ErrCorruptEntry) {
		t.Errorf("GetUint64 of a 3-byte value: %v", err)
	}
}

func TestDecodeLogCorrupt(t *testing.T) {
	good := encodeLog(testLog(2))
	var l raft.Log
	if err := decodeLog(good, &l); err != nil || !sameLog(&l, testLog(2)) {
		t.Fatalf("round trip: %+v %v", l, err)
	}
	bad := map[string][]byte{
		"empty":      nil,
		"short":      good[:10],
		"version":    append([]byte{9}, good[1:]...),
		"truncated":  good[:len(good)-1],
		"extra byte": append(append([]byte{}, good...), 0),
	}
	for name, b := range bad {
		if err := decodeLog(b, &l); !errors.Is(err, ErrCorruptEntry) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func FuzzDecodeLog(f *testing.F) {
	f.Add([]byte{})
	f.Add(encodeLog(testLog(1))[:5])
	f.Add(encodeLog(testLog(1)))
	f.Add(encodeLog(testLog(2)))
	f.Add(append(encodeLog(testLog(1)), encodeLog(testLog(2))...))
	f.Fuzz(func(t *testing.T, b []byte) {
		var l raft.Log
		if err := decodeLog(b, &l); err != nil {
			return
		}
		if again := encodeLog(&l); !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs")
		}
	})
}
