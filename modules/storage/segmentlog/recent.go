package segmentlog

// recentBatches remembers where the batches last appended to a segment sit, so a reader
// at the tail (a consumer or a follower asking for what was just written) finds its
// starting batch and the batches after it without a pread of each 12-byte prefix: at a
// thousand partitions those preads were a fifth of the broker's CPU.
//
// Invariants, kept by the segment that owns it (all under the Log's mu: appends hold it
// exclusively, readers shared):
//   - the entries are whole batches that the segment holds, in file order and
//     contiguous, the newest ending at the segment's size;
//   - anything that moves the segment's size other than an append (an undone append,
//     recovery, truncation) or seals the segment empties it first, so an entry never
//     names bytes the file no longer has.
//
// It is a ring that grows by doubling up to recentCap entries, so a partition that
// holds a batch or two (100,000 partitions of one record each) keeps a few bytes, not
// recentCap's 2 KiB; the oldest entry is dropped when a new one does not fit.
type recentBatches struct {
	e       []recentBatch // len(e) is the ring's size
	head, n int           // the oldest entry is e[head]; n entries in all
}

// recentCap is how many batches a segment remembers at most (32 bytes each).
const recentCap = 64

type recentBatch struct{ base, last, pos, size int64 }

func (r *recentBatches) reset() { r.head, r.n = 0, 0 }

// add remembers a batch appended at pos (right after the newest entry).
func (r *recentBatches) add(b recentBatch) {
	if r.n == len(r.e) && len(r.e) < recentCap {
		// Full below the cap: unroll into a ring twice the size.
		e := make([]recentBatch, max(2*len(r.e), 2))
		for i := range r.n {
			e[i] = *r.get(i)
		}
		r.e, r.head = e, 0
	}
	i := (r.head + r.n) % len(r.e)
	r.e[i] = b
	if r.n == len(r.e) {
		r.head = (r.head + 1) % len(r.e)
	} else {
		r.n++
	}
}

func (r *recentBatches) get(i int) *recentBatch { return &r.e[(r.head+i)%len(r.e)] }

// at returns the entry of the batch starting at pos, if remembered.
func (r *recentBatches) at(pos int64) (*recentBatch, bool) {
	if r.n == 0 || pos < r.get(0).pos || pos > r.get(r.n-1).pos {
		return nil, false
	}
	lo, hi := 0, r.n-1
	for lo <= hi {
		mid := (lo + hi) / 2
		switch e := r.get(mid); {
		case e.pos == pos:
			return e, true
		case e.pos < pos:
			lo = mid + 1
		default:
			hi = mid - 1
		}
	}
	return nil, false
}

// startFor returns the position of the newest remembered batch whose base is <= offset,
// if the oldest one's is: a scan for offset may start there instead of at the offset
// index's entry, since the batch holding offset (or the first after it) is at or after
// it.
func (r *recentBatches) startFor(offset int64) (int64, bool) {
	if r.n == 0 || r.get(0).base > offset {
		return 0, false
	}
	lo, hi := 0, r.n-1 // the answer is in [lo, hi]
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if r.get(mid).base <= offset {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return r.get(lo).pos, true
}
