package recordbatch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"runtime"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

func TestRoundTrip(t *testing.T) {
	sets := []struct {
		name string
		recs []Record
	}{
		{"empty", nil},
		{"one", sampleRecords(1, 10)},
		{"mixed", sampleRecords(37, 100)},
		{"large", sampleRecords(300, 1024)}, // > 32 KiB: several xerial chunks
	}
	for _, c := range codecCases {
		for _, s := range sets {
			t.Run(c.name+"/"+s.name, func(t *testing.T) {
				o := opts(c)
				batch := Build(o, s.recs...)
				in, err := Validate(batch)
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				if in.Records != len(s.recs) || int(in.RecordCount) != len(s.recs) {
					t.Fatalf("records = %d, header %d, want %d", in.Records, in.RecordCount, len(s.recs))
				}
				if in.Codec() != c.codec || in.BaseOffset != o.BaseOffset || in.PartitionLeaderEpoch != 7 || in.ProducerID != -1 {
					t.Fatalf("header fields: %+v", in.Header)
				}
				if c.xerial && !bytes.HasPrefix(batch[HeaderSize:], xerialMagic[:]) {
					t.Fatalf("xerial batch lacks the xerial magic")
				}
				got, in2 := collect(t, batch)
				if in2 != in {
					t.Fatalf("Decoder info %+v != Validate info %+v", in2, in)
				}
				if len(got) != len(s.recs) {
					t.Fatalf("iterated %d records, want %d", len(got), len(s.recs))
				}
				minTS, maxTS := int64(0), int64(0)
				nullKeys := 0
				for i := range s.recs {
					if s.recs[i].Key == nil {
						nullKeys++
					}
				}
				if in.NullKeys != nullKeys {
					t.Fatalf("NullKeys %d, want %d", in.NullKeys, nullKeys)
				}
				for i := range got {
					want := toPlain(&s.recs[i], int32(i))
					if g := toPlain(&got[i], got[i].OffsetDelta); !equalPlain(g, want) {
						t.Fatalf("record %d: got %+v, want %+v", i, g, want)
					}
					if got[i].Offset != o.BaseOffset+int64(i) || got[i].Timestamp != o.BaseTimestamp+s.recs[i].TimestampDelta {
						t.Fatalf("record %d: offset %d timestamp %d", i, got[i].Offset, got[i].Timestamp)
					}
					ts := got[i].Timestamp
					if i == 0 || ts < minTS {
						minTS = ts
					}
					if i == 0 || ts > maxTS {
						maxTS = ts
					}
				}
				if len(got) > 0 && (in.MinTimestamp != minTS || in.MaxTimestamp != maxTS || in.Header.MaxTimestamp != maxTS) {
					t.Fatalf("timestamps: info %d..%d header max %d, want %d..%d", in.MinTimestamp, in.MaxTimestamp, in.Header.MaxTimestamp, minTS, maxTS)
				}
				// The package-level iterator sees the same records and hands back its buffer.
				n := 0
				buf, err := Records(batch, make([]byte, 0, 64), func(r *Record) error {
					if !equalPlain(toPlain(r, r.OffsetDelta), toPlain(&got[n], got[n].OffsetDelta)) {
						t.Errorf("Records: record %d differs", n)
					}
					n++
					return nil
				})
				if err != nil || n != len(got) {
					t.Fatalf("Records: %d records, %v", n, err)
				}
				if c.codec != CodecNone && len(got) > 0 && cap(buf) < in.UncompressedBytes {
					t.Fatalf("Records returned a buffer of cap %d for %d bytes", cap(buf), in.UncompressedBytes)
				}
			})
		}
	}
}

func TestBuilderReuseAndFlags(t *testing.T) {
	b, err := NewBuilder(Options{Codec: CodecZstd, Transactional: true, ProducerID: 5, ProducerEpoch: 2, BaseSequence: 10})
	if err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 3; round++ {
		if err := b.Reset(Options{Codec: round + 1, Transactional: true, Control: round == 2, ProducerID: 5, ProducerEpoch: 2, BaseSequence: 10}); err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			b.Add(&Record{OffsetDelta: 99, Value: []byte{byte(i)}})
		}
		batch, err := b.AppendTo([]byte("prefix"))
		if err != nil {
			t.Fatal(err)
		}
		if string(batch[:6]) != "prefix" {
			t.Fatal("AppendTo clobbered dst")
		}
		in, err := Validate(batch[6:])
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if !in.IsTransactional() || in.IsControl() != (round == 2) || in.ProducerID != 5 || in.BaseSequence != 10 || in.Records != 5 || in.Codec() != round+1 {
			t.Fatalf("round %d: %+v", round, in)
		}
		if OptionsFrom(in.Header).Codec != round+1 {
			t.Fatal("OptionsFrom lost the codec")
		}
	}
	if err := b.Reset(Options{Codec: 5}); err == nil {
		t.Fatal("Reset accepted codec 5")
	}
}

func TestSetLogAppendTime(t *testing.T) {
	batch := Build(opts(codecCases[1]), sampleRecords(4, 10)...)
	if err := SetLogAppendTime(batch, 42); err != nil {
		t.Fatal(err)
	}
	in, err := Validate(batch)
	if err != nil {
		t.Fatalf("after SetLogAppendTime: %v", err)
	}
	if in.Attributes&AttrLogAppendTime == 0 || in.Header.MaxTimestamp != 42 || in.Codec() != CodecGzip {
		t.Fatalf("header %+v", in.Header)
	}
	recs, _ := collect(t, batch)
	for _, r := range recs {
		if r.Timestamp != 42 {
			t.Fatalf("record timestamp %d, want 42", r.Timestamp)
		}
	}
	if err := SetLogAppendTime(batch[:len(batch)-1], 1); !errors.Is(err, ErrLength) {
		t.Fatalf("short batch: %v", err)
	}
	if err := SetLogAppendTime(batch[:10], 1); !errors.Is(err, ErrShort) {
		t.Fatalf("header only: %v", err)
	}
}

func TestIteratorStopsOnCallbackError(t *testing.T) {
	batch := Build(opts(codecCases[0]), sampleRecords(10, 10)...)
	stop := errors.New("stop")
	n := 0
	var d Decoder
	_, err := d.Records(batch, func(*Record) error {
		n++
		if n == 3 {
			return stop
		}
		return nil
	})
	if err != stop || n != 3 {
		t.Fatalf("err %v after %d records", err, n)
	}
}

// compressWith compresses data with a codec using the libraries directly (not Builder).
func compressWith(t testing.TB, c codecCase, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	switch c.codec {
	case CodecNone:
		return data
	case CodecGzip:
		w := gzip.NewWriter(&buf)
		w.Write(data)
		w.Close()
	case CodecSnappy:
		if !c.xerial {
			return snappy.Encode(nil, data)
		}
		buf.Write(xerialMagic[:])
		buf.Write([]byte{0, 0, 0, 1, 0, 0, 0, 1})
		for len(data) > 0 {
			n := min(len(data), 1000)
			enc := snappy.Encode(nil, data[:n])
			buf.Write(binary.BigEndian.AppendUint32(nil, uint32(len(enc))))
			buf.Write(enc)
			data = data[n:]
		}
	case CodecLZ4:
		w := lz4.NewWriter(&buf)
		w.Write(data)
		w.Close()
	case CodecZstd:
		e, err := zstd.NewWriter(nil)
		if err != nil {
			t.Fatal(err)
		}
		return e.EncodeAll(data, nil)
	}
	return buf.Bytes()
}

func TestCorrupt(t *testing.T) {
	good := Build(opts(codecCases[0]), sampleRecords(3, 20)...)
	sec := good[HeaderSize:]
	patch := func(off int, v uint32) []byte {
		b := clone(good)
		binary.BigEndian.PutUint32(b[off:], v)
		SetCRC(b)
		return b
	}
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	cases := []struct {
		name  string
		batch []byte
		want  error
	}{
		{"empty", nil, ErrShort},
		{"short header", good[:HeaderSize-1], ErrShort},
		{"truncated", good[:len(good)-1], ErrShort},
		{"max length prefix", patch(OffBatchLength, 0x7fffffff), ErrShort},
		{"negative length", patch(OffBatchLength, 0xffffffff), ErrLength},
		{"length below header", patch(OffBatchLength, 48), ErrLength},
		{"extra bytes after batch", append(clone(good), 0), ErrLength},
		{"magic 1", func() []byte { b := clone(good); b[OffMagic] = 1; return b }(), ErrMagic},
		{"bad crc", func() []byte { b := clone(good); b[len(b)-1] ^= 1; return b }(), ErrCRC},
		{"crc field", func() []byte { b := clone(good); b[OffCRC] ^= 0x80; return b }(), ErrCRC},
		{"count larger than actual", patch(OffRecordCount, 4), ErrRecords},
		{"count smaller than actual", withSection(good, sec, 2, 1), ErrRecords},
		{"negative count", patch(OffRecordCount, 0xffffffff), ErrRecords},
		{"last offset delta wrong", patch(OffLastOffsetDelta, 5), ErrRecords},
		{"offset deltas swapped", withSection(good, cat(goodRecord(1), goodRecord(0)), 2, 1), ErrRecords},
		{"offset delta gap", withSection(good, cat(goodRecord(0), goodRecord(2)), 2, 1), ErrRecords},
		{"offset delta starts at 1", withSection(good, goodRecord(1), 1, 0), ErrRecords},
		{"trailing garbage", withSection(good, cat(sec, []byte{0}), 3, 2), ErrRecords},
		{"trailing partial record", withSection(good, cat(sec, goodRecord(3)[:4]), 3, 2), ErrRecords},
		{"records with count 0", withSection(good, goodRecord(0), 0, -1), ErrRecords},
		{"varint too long", withSection(good, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, 1, 0), ErrRecords},
		{"varint overflow 5th byte", withSection(good, []byte{0xff, 0xff, 0xff, 0xff, 0x7f}, 1, 0), ErrRecords},
		{"varint cut", withSection(good, []byte{0x80}, 1, 0), ErrRecords},
		{"varlong too long", withSection(good, rawRecord(int8(0), bytes.Repeat([]byte{0xff}, 10), 0, "k", "v", 0), 1, 0), ErrRecords},
		{"record length negative", withSection(good, cat(appendVarlong(nil, -3), goodRecord(0)), 1, 0), ErrRecords},
		{"record length past end", withSection(good, goodRecord(0)[:6], 1, 0), ErrRecords},
		{"record longer than fields", withSection(good, rawRecord(int8(0), 0, 0, "k", "v", 0, []byte{9}), 1, 0), ErrRecords},
		{"fields longer than record", withSection(good, cat(appendVarlong(nil, 3), []byte{0, 0, 0, 2, 'k'}), 1, 0), ErrRecords},
		{"key length -2", withSection(good, rawRecord(int8(0), 0, 0, -2, "v", 0), 1, 0), ErrRecords},
		{"key past record", withSection(good, rawRecord(int8(0), 0, 0, 50, "v", 0), 1, 0), ErrRecords},
		{"value length -5", withSection(good, rawRecord(int8(0), 0, 0, "k", -5, 0), 1, 0), ErrRecords},
		{"header count -1", withSection(good, rawRecord(int8(0), 0, 0, "k", "v", -1), 1, 0), ErrRecords},
		{"header count huge", withSection(good, rawRecord(int8(0), 0, 0, "k", "v", 1<<30, "a", "b"), 1, 0), ErrRecords},
		{"header key null", withSection(good, rawRecord(int8(0), 0, 0, "k", "v", 1, -1, "b"), 1, 0), ErrRecords},
		{"header value -2", withSection(good, rawRecord(int8(0), 0, 0, "k", "v", 1, "a", -2), 1, 0), ErrRecords},
		{"missing attributes", withSection(good, []byte{0}, 1, 0), ErrRecords},
		{"control batch bad framing", func() []byte {
			b := withSection(good, rawRecord(int8(0), 0, 0, "k"), 1, 0)
			binary.BigEndian.PutUint16(b[OffAttributes:], AttrControl|AttrTransactional)
			SetCRC(b)
			return b
		}(), ErrRecords},
	}
	for codec := 5; codec <= 7; codec++ {
		b := clone(good)
		binary.BigEndian.PutUint16(b[OffAttributes:], uint16(codec))
		SetCRC(b)
		cases = append(cases, struct {
			name  string
			batch []byte
			want  error
		}{"codec " + string(rune('0'+codec)), b, ErrCodec})
	}
	// Truncated or garbled compressed data, per codec.
	for _, c := range codecCases[1:] {
		full := Build(opts(c), sampleRecords(50, 100)...)
		body := full[HeaderSize:]
		cut := withSection(full, body[:len(body)*2/3], 50, 49)
		cases = append(cases, struct {
			name  string
			batch []byte
			want  error
		}{"truncated " + c.name, cut, ErrCodec})
		junk := clone(body)
		for i := len(junk) / 2; i < len(junk)/2+8; i++ {
			junk[i] ^= 0x5a
		}
		cases = append(cases, struct {
			name  string
			batch []byte
			want  error
		}{"garbled " + c.name, withSection(full, junk, 50, 49), ErrCorrupt})
		cases = append(cases, struct {
			name  string
			batch []byte
			want  error
		}{"empty section " + c.name, withSection(full, nil, 50, 49), ErrCorrupt})
		cases = append(cases, struct {
			name  string
			batch []byte
			want  error
		}{"garbage after stream " + c.name, withSection(full, cat(body, []byte{1, 2, 3, 4, 5}), 50, 49), ErrCodec})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Validate(tc.batch)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Validate = %v, want %v", err, tc.want)
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%v is not ErrCorrupt", err)
			}
			var d Decoder
			called := false
			if _, err := d.Records(tc.batch, func(*Record) error { called = true; return nil }); !errors.Is(err, tc.want) || called {
				t.Fatalf("Decoder.Records = %v (fn called %v), want %v", err, called, tc.want)
			}
		})
	}
}

func TestErrorClasses(t *testing.T) {
	all := []error{ErrShort, ErrMagic, ErrCRC, ErrLength, ErrRecords, ErrCodec, ErrTooLarge}
	for i, a := range all {
		if !errors.Is(a, ErrCorrupt) {
			t.Errorf("%v is not ErrCorrupt", a)
		}
		for j, b := range all {
			if i != j && errors.Is(a, b) {
				t.Errorf("%v matches %v", a, b)
			}
		}
	}
	if errors.Is(ErrCorrupt, ErrCRC) {
		t.Error("ErrCorrupt matches ErrCRC")
	}
}

func TestDecompressionBomb(t *testing.T) {
	// One record whose 4 MiB value is all zeros: compresses to a few KiB.
	big := []Record{{Value: make([]byte, 4<<20)}}
	const limit = 1 << 20
	for _, c := range codecCases[1:] {
		t.Run(c.name, func(t *testing.T) {
			batch := Build(opts(c), big...)
			if len(batch) > 512<<10 {
				t.Fatalf("bomb is %d bytes", len(batch))
			}
			if _, err := Validate(batch); err != nil {
				t.Fatalf("default limit: %v", err)
			}
			_, err := ValidateWithLimit(batch, limit)
			if !errors.Is(err, ErrTooLarge) || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("ValidateWithLimit = %v, want ErrTooLarge", err)
			}
			d := Decoder{MaxUncompressed: limit}
			if _, err := d.Records(batch, func(*Record) error { return nil }); !errors.Is(err, ErrTooLarge) {
				t.Fatalf("Decoder = %v, want ErrTooLarge", err)
			}
			if cap(d.dec.buf) > limit+1 {
				t.Fatalf("decoder buffer grew to %d, limit %d", cap(d.dec.buf), limit)
			}
			if _, err := ValidateWithLimit(batch, math.MaxInt); err != nil {
				t.Fatalf("MaxInt limit: %v", err)
			}
			// Exactly at the limit passes.
			in, err := Validate(batch)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ValidateWithLimit(batch, in.UncompressedBytes); err != nil {
				t.Fatalf("at limit: %v", err)
			}
			if _, err := ValidateWithLimit(batch, in.UncompressedBytes-1); !errors.Is(err, ErrTooLarge) {
				t.Fatalf("one under: %v", err)
			}
		})
	}
}

func TestBombHeadersRejectedBeforeDecoding(t *testing.T) {
	good := Build(opts(codecCases[0]), sampleRecords(1, 1)...)
	set := func(codec int, section []byte) []byte {
		b := withSection(good, section, 1, 0)
		binary.BigEndian.PutUint16(b[OffAttributes:], uint16(codec))
		SetCRC(b)
		return b
	}
	// zstd single-segment frame declaring a 1 GiB content size, with nothing behind it.
	zs := []byte{0x28, 0xb5, 0x2f, 0xfd, 0xe0}
	zs = binary.LittleEndian.AppendUint64(zs, 1<<30)
	// A small valid frame, then a single-segment frame declaring 200 MiB.
	zs2 := append(compressWith(t, codecCases[5], []byte("x")), 0x28, 0xb5, 0x2f, 0xfd, 0xa0)
	zs2 = binary.LittleEndian.AppendUint32(zs2, 200<<20)
	zs2 = append(zs2, 1, 0, 0) // last raw block of 0 bytes
	// A frame with a 1 GiB window (descriptor exponent 20) and one empty raw block.
	zs3 := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 20 << 3, 1, 0, 0}
	// Raw snappy block claiming 1 GiB of output from a few bytes.
	sn := binary.AppendUvarint(nil, 1<<30)
	sn = append(sn, 0, 0, 0)
	// Xerial chunk length past the end.
	xe := append(append(xerialMagic[:], 0, 0, 0, 1, 0, 0, 0, 1), 0x7f, 0xff, 0xff, 0xff, 1)
	for _, tc := range []struct {
		name  string
		batch []byte
		want  error
	}{
		{"zstd content size", set(CodecZstd, zs), ErrTooLarge},
		{"zstd second frame content size", set(CodecZstd, zs2), ErrTooLarge},
		{"zstd window", set(CodecZstd, zs3), ErrCodec},
		{"snappy declared length", set(CodecSnappy, sn), ErrCodec},
		{"xerial chunk length", set(CodecSnappy, xe), ErrCodec},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decoder{MaxUncompressed: 1 << 20}
			fn := func(*Record) error { return nil }
			d.Records(tc.batch, fn) // create the decoders first
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			before := ms.TotalAlloc
			_, err := d.Records(tc.batch, fn)
			runtime.ReadMemStats(&ms)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Records = %v, want %v", err, tc.want)
			}
			if grew := ms.TotalAlloc - before; grew > 64<<10 {
				t.Fatalf("allocated %d bytes rejecting a %d-byte batch", grew, len(tc.batch))
			}
			if _, err := Validate(tc.batch); !errors.Is(err, tc.want) {
				t.Fatalf("Validate = %v, want %v", err, tc.want)
			}
		})
	}
}

// TestNoPerRecordAllocs checks that allocations do not grow with the number of records.
func TestNoPerRecordAllocs(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("allocation counts (not meaningful under -race, where sync.Pool drops items)")
	}
	for _, c := range codecCases {
		t.Run(c.name, func(t *testing.T) {
			small := Build(opts(c), sampleRecords(4, 50)...)
			large := Build(opts(c), sampleRecords(400, 50)...)
			measure := func(b []byte) float64 {
				Validate(b) // warm the pool
				return testing.AllocsPerRun(50, func() {
					if _, err := Validate(b); err != nil {
						t.Fatal(err)
					}
				})
			}
			as, al := measure(small), measure(large)
			if al > as+2 {
				t.Fatalf("Validate allocs: %v for 4 records, %v for 400", as, al)
			}
			var d Decoder
			fn := func(*Record) error { return nil }
			d.Records(large, fn)
			if a := testing.AllocsPerRun(50, func() { d.Records(large, fn) }); a > 2 {
				t.Fatalf("Decoder.Records allocs per batch: %v", a)
			}
			t.Logf("allocs per Validate: %v (4 records), %v (400 records)", as, al)
		})
	}
}

func TestConcurrentValidate(t *testing.T) {
	var batches [][]byte
	for _, c := range codecCases {
		batches = append(batches, Build(opts(c), sampleRecords(20, 200)...))
	}
	done := make(chan error)
	const P, N = 8, 50
	for p := 0; p < P; p++ {
		go func() {
			var d Decoder
			for i := 0; i < N; i++ {
				b := batches[(p+i)%len(batches)]
				if _, err := Validate(b); err != nil {
					done <- err
					return
				}
				n := 0
				if _, err := d.Records(b, func(*Record) error { n++; return nil }); err != nil || n != 20 {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for p := 0; p < P; p++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// TestConcatenatedStreams: gzip members, lz4 frames and zstd frames may be concatenated;
// the records section is their concatenated output.
func TestConcatenatedStreams(t *testing.T) {
	plainBatch := Build(opts(codecCases[0]), sampleRecords(10, 30)...)
	sec := plainBatch[HeaderSize:]
	for _, c := range []codecCase{codecCases[1], codecCases[4], codecCases[5]} {
		t.Run(c.name, func(t *testing.T) {
			half := len(sec) / 2
			section := append(clone(compressWith(t, c, sec[:half])), compressWith(t, c, sec[half:])...)
			b := withSection(plainBatch, section, 10, 9)
			binary.BigEndian.PutUint16(b[OffAttributes:], uint16(c.codec))
			SetCRC(b)
			in, err := Validate(b)
			if err != nil || in.Records != 10 || in.UncompressedBytes != len(sec) {
				t.Fatalf("Validate = %+v, %v", in, err)
			}
		})
	}
}

// TestNoGoroutines: decoders run synchronously; validating starts no goroutines.
func TestNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	var d Decoder
	for _, c := range codecCases {
		b := Build(opts(c), sampleRecords(50, 100)...)
		for range 5 {
			if _, err := Validate(b); err != nil {
				t.Fatal(err)
			}
			if _, err := d.Records(b, func(*Record) error { return nil }); err != nil {
				t.Fatal(err)
			}
		}
	}
	if after := runtime.NumGoroutine(); after > before {
		t.Fatalf("goroutines: %d before, %d after", before, after)
	}
}
