package recordbatch

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"
)

// codecCase names one way to build a batch.
type codecCase struct {
	name   string
	codec  int
	xerial bool
}

var codecCases = []codecCase{
	{"none", CodecNone, false},
	{"gzip", CodecGzip, false},
	{"snappy", CodecSnappy, false},
	{"snappy-xerial", CodecSnappy, true},
	{"lz4", CodecLZ4, false},
	{"zstd", CodecZstd, false},
}

func opts(c codecCase) Options {
	return Options{
		BaseOffset:           100,
		PartitionLeaderEpoch: 7,
		Codec:                c.codec,
		SnappyXerial:         c.xerial,
		BaseTimestamp:        1_700_000_000_000,
		ProducerID:           NoProducerID,
		ProducerEpoch:        -1,
		BaseSequence:         -1,
	}
}

// sampleRecords returns n records with valueSize-byte values and a mix of null/empty
// keys, negative timestamp deltas and headers.
func sampleRecords(n, valueSize int) []Record {
	recs := make([]Record, n)
	for i := range recs {
		r := &recs[i]
		r.TimestampDelta = int64(i*3 - 5)
		switch i % 4 {
		case 0:
			r.Key = nil
		case 1:
			r.Key = []byte{}
		default:
			r.Key = fmt.Appendf(nil, "key-%d", i)
		}
		if i%5 == 4 {
			r.Value = nil
		} else {
			v := bytes.Repeat([]byte{byte('a' + i%26)}, valueSize)
			copy(v, fmt.Sprintf("value %d ", i))
			r.Value = v
		}
		if i%3 == 0 {
			r.Headers = []RecordHeader{{Key: []byte("h1"), Value: []byte("v1")}, {Key: []byte(""), Value: nil}}
		}
	}
	return recs
}

// plain is a Record with copied slices and no iterator-only fields, for comparison.
type plain struct {
	Attributes     int8
	TimestampDelta int64
	OffsetDelta    int32
	Key, Value     []byte
	Headers        []RecordHeader
}

func toPlain(r *Record, offsetDelta int32) plain {
	p := plain{Attributes: r.Attributes, TimestampDelta: r.TimestampDelta, OffsetDelta: offsetDelta,
		Key: clone(r.Key), Value: clone(r.Value)}
	for _, h := range r.Headers {
		p.Headers = append(p.Headers, RecordHeader{Key: clone(h.Key), Value: clone(h.Value)})
	}
	return p
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

func equalPlain(a, b plain) bool {
	if a.Attributes != b.Attributes || a.TimestampDelta != b.TimestampDelta || a.OffsetDelta != b.OffsetDelta ||
		!equalNullable(a.Key, b.Key) || !equalNullable(a.Value, b.Value) || len(a.Headers) != len(b.Headers) {
		return false
	}
	for i := range a.Headers {
		if !bytes.Equal(a.Headers[i].Key, b.Headers[i].Key) || !equalNullable(a.Headers[i].Value, b.Headers[i].Value) {
			return false
		}
	}
	return true
}

func equalNullable(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

// collect iterates batch with a fresh Decoder and returns copies of its records.
func collect(t testing.TB, batch []byte) ([]Record, Info) {
	t.Helper()
	var d Decoder
	var out []Record
	in, err := d.Records(batch, func(r *Record) error {
		c := *r
		c.Key, c.Value = clone(r.Key), clone(r.Value)
		c.Headers = nil
		for _, h := range r.Headers {
			c.Headers = append(c.Headers, RecordHeader{Key: clone(h.Key), Value: clone(h.Value)})
		}
		out = append(out, c)
		return nil
	})
	if err != nil {
		t.Fatalf("Records: %v", err)
	}
	return out, in
}

// withSection returns a copy of the header of batch with the records section replaced,
// RecordCount and LastOffsetDelta set, and a correct length and CRC.
func withSection(batch, section []byte, count, lastOffsetDelta int32) []byte {
	b := append(append([]byte{}, batch[:HeaderSize]...), section...)
	binary.BigEndian.PutUint32(b[OffBatchLength:], uint32(len(b)-LogOverhead))
	binary.BigEndian.PutUint32(b[OffRecordCount:], uint32(count))
	binary.BigEndian.PutUint32(b[OffLastOffsetDelta:], uint32(lastOffsetDelta))
	SetCRC(b)
	return b
}

// rawRecord encodes one record from its fields, with no checks, for corruption tests.
// Each field is appended as given: ints as zigzag varints, byte strings length-prefixed.
func rawRecord(fields ...any) []byte {
	var body []byte
	for _, f := range fields {
		switch v := f.(type) {
		case int8:
			body = append(body, byte(v))
		case int:
			body = appendVarlong(body, int64(v))
		case []byte:
			body = append(body, v...)
		case string:
			body = append(appendVarlong(body, int64(len(v))), v...)
		default:
			panic(fmt.Sprintf("rawRecord: %T", f))
		}
	}
	return append(appendVarlong(nil, int64(len(body))), body...)
}

// goodRecord is a well-formed record with offset delta od, as raw bytes.
func goodRecord(od int) []byte {
	return rawRecord(int8(0), 0, od, "k", "v", 0)
}
