package producers

import (
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/sluicehq/sluice/kernel"
)

func FuzzDecodeSnapshot(f *testing.F) {
	s := New()
	f.Add([]byte{})
	f.Add(EncodeSnapshot(s, 0)[:5])
	f.Add(EncodeSnapshot(s, 0))
	p := s.Begin()
	_, _, _ = p.Check(data(1, 0, 0, 1, 0, true), Client)
	p.Commit()
	f.Add(EncodeSnapshot(s, 1))
	p = s.Begin()
	_, _, _ = p.Check(data(2, 0, 0, 1, 1, false), Client)
	p.Commit()
	f.Add(EncodeSnapshot(s, 2))
	f.Fuzz(func(t *testing.T, b []byte) {
		checkDecode(t, b)
		// The CRC stops nearly every mutation; decode a copy with a fixed-up CRC too,
		// so the body parser is explored.
		if len(b) >= snapshotHeaderSize {
			c := append([]byte(nil), b...)
			binary.BigEndian.PutUint32(c[2:], crc32.Checksum(c[6:], castagnoli))
			checkDecode(t, c)
		}
	})
}

func checkDecode(t *testing.T, b []byte) {
	off, es, err := DecodeSnapshot(b)
	if err != nil {
		return
	}
	if len(es) > len(b)/entryFixedSize {
		t.Fatalf("%d entries from %d bytes", len(es), len(b))
	}
	s := New()
	s.Load(es)
	if again := EncodeSnapshot(s, off); string(again) != string(b) {
		t.Fatalf("re-encoding differs")
	}
}

func FuzzParseTxnIndex(f *testing.F) {
	e1 := AppendTxnIndexEntry(nil, Aborted{AbortedTxn: kernel.AbortedTxn{ProducerID: 1, FirstOffset: 0, LastOffset: 3}, LastStable: 4})
	e2 := AppendTxnIndexEntry(nil, Aborted{AbortedTxn: kernel.AbortedTxn{ProducerID: 2, FirstOffset: 1, LastOffset: 5}, LastStable: 6})
	f.Add([]byte{})
	f.Add(e1[:10])
	f.Add(e1)
	f.Add(append(append([]byte{}, e1...), e2...))
	f.Fuzz(func(t *testing.T, b []byte) {
		out, _, _ := ParseTxnIndex(b)
		if len(out) > len(b)/TxnIndexEntrySize {
			t.Fatalf("%d entries from %d bytes", len(out), len(b))
		}
		for i := 1; i < len(out); i++ {
			if out[i].LastOffset <= out[i-1].LastOffset {
				t.Fatal("out of order accepted")
			}
		}
	})
}
