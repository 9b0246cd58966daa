package producers

import "testing"

// BenchmarkCheckCommit is the producer-state cost of one idempotent append (duplicate
// scan, sequence check, window update), without the log write.
func BenchmarkCheckCommit(b *testing.B) {
	s := New()
	for pid := range int64(1000) { // a realistic map size
		p := s.Begin()
		_, _, _ = p.Check(data(pid, 0, 0, 1, pid, false), Client)
		p.Commit()
	}
	b.ReportAllocs()
	seq, off := int32(1), int64(1000)
	for b.Loop() {
		p := s.Begin()
		if _, _, err := p.Check(data(7, 0, seq, 1, off, false), Client); err != nil {
			b.Fatal(err)
		}
		p.Commit()
		seq++
		off++
	}
}
