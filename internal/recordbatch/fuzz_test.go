package recordbatch

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// fuzzLimit keeps decompression small while fuzzing.
const fuzzLimit = 1 << 20

// FuzzValidate feeds arbitrary bytes to Validate, as one batch and split into batches,
// and again with the CRC fixed so inputs reach the records section. Whatever Validate
// accepts must iterate without error to the same count; whatever it rejects must be
// ErrCorrupt; memory must stay bounded.
func FuzzValidate(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		before := ms.TotalAlloc

		checkOne(t, data)
		_ = Split(data, func(_ Header, b []byte) error {
			checkOne(t, b)
			return nil
		})
		if len(data) >= HeaderSize {
			fixed := clone(data)
			SetCRC(fixed)
			checkOne(t, fixed)
		}

		runtime.ReadMemStats(&ms)
		// Each checkOne may decompress up to fuzzLimit (twice: Validate and Decoder),
		// plus decoder state (a zstd window is at most 8 MiB).
		if grew := ms.TotalAlloc - before; grew > uint64(64<<20+64*len(data)) {
			t.Fatalf("allocated %d bytes for a %d-byte input", grew, len(data))
		}
	})
}

func checkOne(t *testing.T, batch []byte) {
	t.Helper()
	in, err := ValidateWithLimit(batch, fuzzLimit)
	if err != nil {
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Validate error %v is not ErrCorrupt", err)
		}
		return
	}
	if in.Records != int(in.RecordCount) || in.Size() != len(batch) {
		t.Fatalf("accepted batch: records %d, header %+v, len %d", in.Records, in.Header, len(batch))
	}
	d := Decoder{MaxUncompressed: fuzzLimit}
	n := 0
	in2, err := d.Records(batch, func(r *Record) error {
		if int(r.OffsetDelta) != n {
			return fmt.Errorf("record %d has offset delta %d", n, r.OffsetDelta)
		}
		n++
		return nil
	})
	if err != nil || n != in.Records || in2 != in {
		t.Fatalf("Validate accepted %+v; Decoder: %d records, %+v, %v", in, n, in2, err)
	}
}

// FuzzRecords wraps an arbitrary records section (compressed per attrs' codec bits) in
// a header with a correct length and CRC, so every input exercises decompression and
// record framing. Accepted batches must survive a rebuild: Builder re-encodes the
// iterated records, and the result must validate and iterate to the same records.
func FuzzRecords(f *testing.F) {
	f.Fuzz(func(t *testing.T, section []byte, attrs int16, count int32, lastOffsetDelta int32) {
		batch := make([]byte, HeaderSize, HeaderSize+len(section))
		binary.BigEndian.PutUint32(batch[OffBatchLength:], uint32(HeaderSize-LogOverhead+len(section)))
		batch[OffMagic] = 2
		binary.BigEndian.PutUint16(batch[OffAttributes:], uint16(attrs))
		binary.BigEndian.PutUint32(batch[OffLastOffsetDelta:], uint32(lastOffsetDelta))
		binary.BigEndian.PutUint64(batch[OffBaseTimestamp:], 1000)
		binary.BigEndian.PutUint32(batch[OffRecordCount:], uint32(count))
		batch = append(batch, section...)
		SetCRC(batch)
		if h, err := ParseHeader(batch); err == nil {
			agree(t, &h, section) // the fast validation pass is scan's twin
		}

		var got []plain
		d := Decoder{MaxUncompressed: fuzzLimit}
		in, err := d.Records(batch, func(r *Record) error {
			got = append(got, toPlain(r, r.OffsetDelta))
			return nil
		})
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			if _, verr := ValidateWithLimit(batch, fuzzLimit); verr == nil {
				t.Fatalf("Decoder rejected (%v) what Validate accepts", err)
			}
			return
		}
		if in.Records != len(got) || int(count) != len(got) {
			t.Fatalf("info %+v, iterated %d", in, len(got))
		}
		if _, err := ValidateWithLimit(batch, fuzzLimit); err != nil {
			t.Fatalf("Decoder accepted what Validate rejects: %v", err)
		}
		o := OptionsFrom(in.Header)
		o.Codec = CodecNone
		b, err := NewBuilder(o)
		if err != nil {
			t.Fatal(err)
		}
		for i := range got {
			p := got[i]
			b.Add(&Record{Attributes: p.Attributes, TimestampDelta: p.TimestampDelta, Key: p.Key, Value: p.Value, Headers: p.Headers})
		}
		rebuilt, err := b.AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		if _, err := d.Records(rebuilt, func(r *Record) error {
			if !equalPlain(toPlain(r, r.OffsetDelta), got[n]) {
				return fmt.Errorf("record %d differs after rebuild", n)
			}
			n++
			return nil
		}); err != nil || n != len(got) {
			t.Fatalf("rebuilt batch: %d records, %v", n, err)
		}
	})
}

var writeSeeds = flag.Bool("write-seeds", false, "rewrite the committed fuzz seed corpus under testdata/fuzz")

// TestFuzzSeeds checks (or with -write-seeds, rewrites) the seed corpus: empty, short
// header, max length prefix, one valid batch, two valid batches back to back, and one
// batch per codec.
func TestFuzzSeeds(t *testing.T) {
	one := Build(opts(codecCases[0]), sampleRecords(3, 8)...)
	maxLen := clone(one[:HeaderSize])
	binary.BigEndian.PutUint32(maxLen[OffBatchLength:], 0x7fffffff)
	validate := map[string][]byte{
		"empty":        {},
		"short-header": one[:HeaderSize-1],
		"max-length":   maxLen,
		"one-batch":    one,
		"two-batches":  append(clone(one), Build(opts(codecCases[2]), sampleRecords(2, 5)...)...),
	}
	type recSeed struct {
		section []byte
		attrs   int16
		count   int32
		lod     int32
	}
	records := map[string]recSeed{
		"empty":         {nil, 0, 0, -1},
		"short-record":  {goodRecord(0)[:3], 0, 1, 0},
		"max-length":    {[]byte{0xfe, 0xff, 0xff, 0xff, 0x0f}, 0, 1, 0},
		"one-record":    {goodRecord(0), 0, 1, 0},
		"two-records":   {append(goodRecord(0), goodRecord(1)...), 0, 2, 1},
		"headers-nulls": {Build(opts(codecCases[0]), sampleRecords(4, 3)...)[HeaderSize:], 0, 4, 3},
	}
	for _, c := range codecCases {
		b := Build(opts(c), sampleRecords(3, 8)...)
		validate["codec-"+c.name] = b
		records["codec-"+c.name] = recSeed{b[HeaderSize:], int16(c.codec), 3, 2}
	}
	files := map[string]string{}
	for name, b := range validate {
		if name != "short-header" && name != "max-length" && name != "empty" && name != "two-batches" {
			if _, err := Validate(b); err != nil {
				t.Fatalf("seed %s: %v", name, err)
			}
		}
		files[filepath.Join("FuzzValidate", "seed-"+name)] = fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
	}
	for name, s := range records {
		files[filepath.Join("FuzzRecords", "seed-"+name)] = fmt.Sprintf("go test fuzz v1\n[]byte(%q)\nint16(%d)\nint32(%d)\nint32(%d)\n", s.section, s.attrs, s.count, s.lod)
	}
	for name, want := range files {
		path := filepath.Join("testdata", "fuzz", name)
		if *writeSeeds {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -write-seeds)", err)
		}
		if string(got) != want {
			t.Errorf("%s is stale (run with -write-seeds)", path)
		}
	}
}
