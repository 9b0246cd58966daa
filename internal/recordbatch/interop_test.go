package recordbatch

import (
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// kmsgRecords returns franz-go records covering null/empty keys and values, headers
// with null values, and negative and large timestamp deltas.
func kmsgRecords() []kmsg.Record {
	var out []kmsg.Record
	for i := range 25 {
		r := kmsg.Record{
			Attributes:       0,
			TimestampDelta64: int64(i*1000 - 3000),
			OffsetDelta:      int32(i),
			Value:            []byte("value-" + string(rune('a'+i))),
		}
		switch i % 3 {
		case 0:
			r.Key = []byte("key")
		case 1:
			r.Key = []byte{}
		}
		if i == 7 {
			r.Value = nil
			r.TimestampDelta64 = 1 << 40
		}
		if i%4 == 0 {
			r.Headers = []kmsg.Header{{Key: "trace", Value: []byte{1, 2, 3}}, {Key: "empty", Value: nil}}
		}
		out = append(out, r)
	}
	return out
}

// encodeKmsg encodes recs with kmsg, compresses them with c (our test helper, using the
// compression libraries directly) and wraps them in a kmsg.RecordBatch with its CRC.
func encodeKmsg(t *testing.T, c codecCase, recs []kmsg.Record) []byte {
	t.Helper()
	var section []byte
	for i := range recs {
		r := &recs[i]
		r.Length = 0
		body := r.AppendTo(nil) // with Length 0 (a 1-byte varint) to measure the body
		r.Length = int32(len(body) - 1)
		section = r.AppendTo(section)
	}
	section = compressWith(t, c, section)
	rb := kmsg.RecordBatch{
		FirstOffset:          1234,
		PartitionLeaderEpoch: 3,
		Magic:                2,
		Attributes:           int16(c.codec),
		LastOffsetDelta:      int32(len(recs) - 1),
		FirstTimestamp:       1_600_000_000_000,
		MaxTimestamp:         1_600_000_000_000 + 1<<40,
		ProducerID:           77,
		ProducerEpoch:        1,
		FirstSequence:        500,
		NumRecords:           int32(len(recs)),
		Records:              section,
	}
	rb.Length = int32(HeaderSize - LogOverhead + len(section))
	b := rb.AppendTo(nil)
	rb.CRC = int32(crc32.Checksum(b[OffAttributes:], crc32.MakeTable(crc32.Castagnoli)))
	return rb.AppendTo(nil)
}

func TestInteropKmsgEncoded(t *testing.T) {
	for _, c := range codecCases {
		t.Run(c.name, func(t *testing.T) {
			want := kmsgRecords()
			batch := encodeKmsg(t, c, want)
			in, err := Validate(batch)
			if err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if in.Records != len(want) || in.BaseOffset != 1234 || in.ProducerID != 77 || in.BaseSequence != 500 {
				t.Fatalf("info %+v", in)
			}
			if in.MinTimestamp != 1_600_000_000_000-3000 || in.MaxTimestamp != 1_600_000_000_000+1<<40 {
				t.Fatalf("timestamps %d..%d", in.MinTimestamp, in.MaxTimestamp)
			}
			got, _ := collect(t, batch)
			if len(got) != len(want) {
				t.Fatalf("%d records, want %d", len(got), len(want))
			}
			for i := range want {
				w, g := &want[i], &got[i]
				if g.Attributes != w.Attributes || g.TimestampDelta != w.TimestampDelta64 || g.OffsetDelta != w.OffsetDelta ||
					!equalNullable(g.Key, w.Key) || !equalNullable(g.Value, w.Value) || len(g.Headers) != len(w.Headers) {
					t.Fatalf("record %d: got %+v, want %+v", i, g, w)
				}
				for j := range w.Headers {
					if string(g.Headers[j].Key) != w.Headers[j].Key || !equalNullable(g.Headers[j].Value, w.Headers[j].Value) {
						t.Fatalf("record %d header %d: got %+v, want %+v", i, j, g.Headers[j], w.Headers[j])
					}
				}
			}
		})
	}
}

// TestInteropKmsgDecodes checks the other direction: kmsg reads what Builder writes.
func TestInteropKmsgDecodes(t *testing.T) {
	recs := sampleRecords(30, 40)
	batch := Build(opts(codecCases[0]), recs...)
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(batch); err != nil {
		t.Fatal(err)
	}
	if rb.NumRecords != 30 || rb.LastOffsetDelta != 29 || rb.FirstOffset != 100 || uint32(rb.CRC) != binary.BigEndian.Uint32(batch[OffCRC:]) {
		t.Fatalf("kmsg batch %+v", rb)
	}
	rest := rb.Records
	for i := range recs {
		var r kmsg.Record
		if err := r.ReadFrom(rest); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		n := int(r.Length) + varlongLen(int64(r.Length))
		rest = rest[n:]
		w := &recs[i]
		if r.OffsetDelta != int32(i) || r.TimestampDelta64 != w.TimestampDelta || !equalNullable(r.Key, w.Key) ||
			!equalNullable(r.Value, w.Value) || len(r.Headers) != len(w.Headers) {
			t.Fatalf("record %d: kmsg read %+v, built from %+v", i, r, w)
		}
		for j := range w.Headers {
			if r.Headers[j].Key != string(w.Headers[j].Key) || !equalNullable(r.Headers[j].Value, w.Headers[j].Value) {
				t.Fatalf("record %d header %d differs", i, j)
			}
		}
	}
	if len(rest) != 0 {
		t.Fatalf("%d bytes left", len(rest))
	}
}
