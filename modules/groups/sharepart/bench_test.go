package sharepart

import "testing"

// BenchmarkAcquireAck: one share fetch of 500 records in 5 batches, accepted in
// one acknowledgement batch (one type, or one type per record).
func BenchmarkAcquireAck(b *testing.B) {
	for _, perRecord := range []bool{false, true} {
		name := "one type"
		if perRecord {
			name = "type per record"
		}
		b.Run(name, func(b *testing.B) {
			p := New(Config{}, 0)
			bs := make([]Batch, 5)
			acks := []AckBatch{{Types: []AckType{Accept}}}
			if perRecord {
				acks[0].Types = make([]AckType, 500)
				for i := range acks[0].Types {
					acks[0].Types[i] = Accept
				}
			}
			var off int64
			b.ReportAllocs()
			for b.Loop() {
				for i := range bs {
					bs[i] = Batch{First: off + int64(i)*100, Last: off + int64(i)*100 + 99}
				}
				got := p.Acquire("member-1", off, bs, 500, true, t0)
				if len(got) != 1 || got[0].Last != off+499 {
					b.Fatalf("acquired %v", got)
				}
				acks[0].First, acks[0].Last = off, off+499
				if err := p.Acknowledge("member-1", acks, t0); err != nil {
					b.Fatal(err)
				}
				off += 500
			}
			if p.StartOffset() != off {
				b.Fatalf("SPSO %d, want %d", p.StartOffset(), off)
			}
		})
	}
}

// BenchmarkAcquireAckFragmented: the same with a window of about a thousand runs
// behind SPSO's stuck record, so lookups cost their binary search and splits
// their copy.
func BenchmarkAcquireAckFragmented(b *testing.B) {
	p := New(Config{MaxLocks: 1 << 20, MaxInFlight: 1 << 40}, 0)
	// Offset 0 is held for the whole benchmark, so SPSO stays there; behind it,
	// 1000 pieces of 10 records alternately accepted and released make 1000 runs.
	p.Acquire("stuck", 0, []Batch{{0, 0, false}}, 1, true, t0)
	for i := int64(0); i < 1000; i++ {
		first := 1 + i*10
		p.Acquire("setup", first, []Batch{{first, first + 9, false}}, 10, true, t0)
		typ := Accept
		if i%2 == 1 {
			typ = Release
		}
		if err := p.Acknowledge("setup", []AckBatch{{First: first, Last: first + 9, Types: []AckType{typ}}}, t0); err != nil {
			b.Fatal(err)
		}
	}
	off := p.EndOffset()
	bs := make([]Batch, 5)
	acks := []AckBatch{{Types: []AckType{Accept}}}
	b.ReportAllocs()
	for b.Loop() {
		for i := range bs {
			bs[i] = Batch{First: off + int64(i)*100, Last: off + int64(i)*100 + 99}
		}
		got := p.Acquire("member-1", off, bs, 500, true, t0)
		if len(got) != 1 {
			b.Fatalf("acquired %v", got)
		}
		acks[0].First, acks[0].Last = off, off+499
		if err := p.Acknowledge("member-1", acks, t0); err != nil {
			b.Fatal(err)
		}
		off += 500
	}
}
