package segmentlog

import "sync/atomic"

// Segment tails: the last bytes appended to the active segment, kept in memory so that
// a read of what was just written (a caught-up consumer's or follower's fetch: most
// reads) is answered from them instead of with a pread per partition per fetch. With
// 1,000 partitions taking one-record batches at 20k records/s those preads were 12% of
// the broker's CPU (docs/BENCHMARKS.md).
//
// Invariants (the owning Log's mu guards tail, tailPos and tailRes; appends hold it
// exclusively, reads shared):
//   - tail holds exactly the bytes [tailPos, tailPos+len(tail)) of the segment's .log
//     file: whole batches, validated before they were appended; only append extends
//     it, after the bytes were written.
//   - bytes in tail are never overwritten: a full tail is replaced by a new buffer, and
//     truncation (restore, recoverSegment), sealing and deletion drop it. Slices handed
//     to readers therefore stay valid without a pin (the garbage collector keeps a
//     dropped buffer alive while a response holds it).
//   - tailRes is the buffer's capacity, reserved from the store's tailBudget, so the
//     tails of all partitions together stay within defaultTailBudget; a segment that
//     finds the budget spent keeps no tail and is read from its file.

const (
	tailMin = 4 << 10  // capacity of a segment's first tail buffer
	tailMax = 64 << 10 // largest: a busy partition's buffers double up to it
	// defaultTailBudget bounds the memory of all tails of a store.
	defaultTailBudget = 32 << 20
)

// tailBudget is the store-wide allowance for tail buffers.
type tailBudget struct{ left atomic.Int64 }

func (b *tailBudget) take(n int64) bool {
	if b.left.Add(-n) >= 0 {
		return true
	}
	b.left.Add(n)
	return false
}

func (b *tailBudget) give(n int64) { b.left.Add(n) }

// keepTail records the bytes b just appended at position pos.
func (s *segment) keepTail(b []byte, pos int64) {
	n := len(b)
	if s.tailRes > 0 && s.tailPos+int64(len(s.tail)) == pos && cap(s.tail)-len(s.tail) >= n {
		s.tail = append(s.tail, b...)
		return
	}
	size := tailMin
	if s.tailRes > 0 {
		size = min(tailMax, 2*cap(s.tail))
	}
	s.dropTail()
	if n > size || !s.fc.tails.take(int64(size)) {
		return // read from the file
	}
	s.tail = append(make([]byte, 0, size), b...)
	s.tailPos, s.tailRes = pos, int64(size)
}

// dropTail forgets the tail and returns its reservation.
func (s *segment) dropTail() {
	if s.tailRes == 0 {
		return
	}
	s.fc.tails.give(s.tailRes)
	s.tail, s.tailPos, s.tailRes = nil, 0, 0
}

// tailBytes returns the file bytes [pos, pos+n) from the tail, if it holds them all.
// The slice's capacity ends with it: nothing can append into the buffer through it.
func (s *segment) tailBytes(pos, n int64) ([]byte, bool) {
	if s.tailRes == 0 || pos < s.tailPos || pos+n > s.tailPos+int64(len(s.tail)) {
		return nil, false
	}
	at := pos - s.tailPos
	return s.tail[at : at+n : at+n], true
}
