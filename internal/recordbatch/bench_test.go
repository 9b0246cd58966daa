package recordbatch

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// benchBatch builds a batch of about 16 KiB of records (before compression) with
// valueSize-byte values of word-like text, which compresses roughly like log lines.
func benchBatch(c codecCase, valueSize int) []byte {
	words := []string{"broker", "partition", "offset", "leader", "replica", "fetch", "produce",
		"commit", "segment", "index", "topic", "group", "epoch", "isr", "ack", "timeout"}
	rng := rand.New(rand.NewPCG(1, 2))
	n := (16 << 10) / (valueSize + 20)
	recs := make([]Record, n)
	for i := range recs {
		v := make([]byte, 0, valueSize+16)
		for len(v) < valueSize {
			v = append(v, words[rng.IntN(len(words))]...)
			v = append(v, ' ')
			v = fmt.Appendf(v, "%d ", rng.IntN(100000))
		}
		recs[i] = Record{TimestampDelta: int64(i), Key: fmt.Appendf(nil, "user-%d", rng.IntN(1000)), Value: v[:valueSize]}
	}
	return Build(opts(c), recs...)
}

func BenchmarkValidate(b *testing.B) {
	for _, c := range codecCases {
		for _, size := range []int{100, 1024} {
			batch := benchBatch(c, size)
			in, err := Validate(batch)
			if err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("%s/%dB", c.name, size), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(in.UncompressedBytes))
				for b.Loop() {
					if _, err := Validate(batch); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(batch)), "batch-bytes")
				b.ReportMetric(float64(in.Records), "records")
			})
		}
	}
}

func BenchmarkDecoderRecords(b *testing.B) {
	for _, c := range codecCases {
		batch := benchBatch(c, 100)
		b.Run(c.name+"/100B", func(b *testing.B) {
			b.ReportAllocs()
			var d Decoder
			var sum int
			fn := func(r *Record) error { sum += len(r.Value); return nil }
			for b.Loop() {
				if _, err := d.Records(batch, fn); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkBuilder(b *testing.B) {
	recs := sampleRecords(150, 100)
	for _, c := range codecCases {
		b.Run(c.name+"/100B", func(b *testing.B) {
			b.ReportAllocs()
			bld, err := NewBuilder(opts(c))
			if err != nil {
				b.Fatal(err)
			}
			var out []byte
			for b.Loop() {
				bld.Reset(opts(c))
				for i := range recs {
					bld.Add(&recs[i])
				}
				if out, err = bld.AppendTo(out[:0]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
