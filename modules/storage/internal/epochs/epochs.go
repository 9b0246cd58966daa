package epochs

import (
	"fmt"
	"sort"

	"github.com/sluicehq/sluice/kernel"
)

// Cache is the leader-epoch cache of one partition. The zero value is empty and ready.
type Cache struct {
	entries []kernel.EpochEntry // ascending; see the package invariants
}

// Len is the number of entries.
func (c *Cache) Len() int { return len(c.entries) }

// Latest returns the newest entry; ok is false when the cache is empty.
func (c *Cache) Latest() (e kernel.EpochEntry, ok bool) {
	if len(c.entries) == 0 {
		return e, false
	}
	return c.entries[len(c.entries)-1], true
}

// LatestEpoch is the newest epoch, -1 when the cache is empty (an appended batch's
// epoch is compared with it on every append, so it is one load).
func (c *Cache) LatestEpoch() int32 {
	if len(c.entries) == 0 {
		return -1
	}
	return c.entries[len(c.entries)-1].Epoch
}

// Entries returns a copy of the entries, oldest first (nil when empty).
func (c *Cache) Entries() []kernel.EpochEntry {
	if len(c.entries) == 0 {
		return nil
	}
	return append([]kernel.EpochEntry(nil), c.entries...)
}

// Load replaces the entries with es, which must keep the invariants (Decode's output
// does). es is copied.
func (c *Cache) Load(es []kernel.EpochEntry) {
	c.entries = append(c.entries[:0], es...)
}

// Assign records that epoch starts at start. An epoch not newer than the latest (or
// negative: a batch without a leader epoch) changes nothing and is not an error; a
// start below the latest entry's start, or negative, is kernel.ErrInvalidOffset.
// added reports whether an entry was added.
func (c *Cache) Assign(epoch int32, start int64) (added bool, err error) {
	if epoch < 0 || epoch <= c.LatestEpoch() {
		return false, nil
	}
	if start < 0 {
		return false, fmt.Errorf("%w: epoch %d at negative offset %d", kernel.ErrInvalidOffset, epoch, start)
	}
	if l, ok := c.Latest(); ok && start < l.StartOffset {
		return false, fmt.Errorf("%w: epoch %d at %d, before epoch %d's start %d", kernel.ErrInvalidOffset, epoch, start, l.Epoch, l.StartOffset)
	}
	c.entries = append(c.entries, kernel.EpochEntry{Epoch: epoch, StartOffset: start})
	return true, nil
}

// TruncateFromEnd drops the entries that start at or after end (the new log end after
// a truncation). It reports whether anything changed.
func (c *Cache) TruncateFromEnd(end int64) bool {
	n := len(c.entries)
	for n > 0 && c.entries[n-1].StartOffset >= end {
		n--
	}
	if n == len(c.entries) {
		return false
	}
	clear(c.entries[n:])
	c.entries = c.entries[:n]
	return true
}

// TruncateFromStart applies a new log start offset: the entries wholly below it go and
// the one holding it starts there (Kafka's truncateFromStart: every entry starting at
// or below start is removed and the last of them comes back at start). It reports
// whether anything changed.
func (c *Cache) TruncateFromStart(start int64) bool {
	// i: the entries starting at or below start.
	i := sort.Search(len(c.entries), func(i int) bool { return c.entries[i].StartOffset > start })
	if i == 0 || (i == 1 && c.entries[0].StartOffset == start) {
		return false
	}
	holding := c.entries[i-1]
	holding.StartOffset = start
	n := copy(c.entries[1:], c.entries[i:])
	c.entries[0] = holding
	clear(c.entries[1+n:])
	c.entries = c.entries[:1+n]
	return true
}

// Clear drops every entry. It reports whether anything changed.
func (c *Cache) Clear() bool {
	if len(c.entries) == 0 {
		return false
	}
	c.entries = c.entries[:0]
	return true
}

// EndOffsetFor answers OffsetForLeaderEpoch for a log whose end offset is logEnd, as
// Kafka's LeaderEpochFileCache.endOffsetFor does:
//   - requested is the latest epoch: (latest, logEnd): that epoch is still being
//     written to;
//   - requested is below every entry: (requested, the first entry's start): the log
//     holds nothing older, and a follower should start from there;
//   - otherwise the largest epoch <= requested, and the start offset of the first entry
//     after it (where that epoch ended);
//   - requested negative, newer than every entry, or no entries: (-1, -1).
func (c *Cache) EndOffsetFor(requested int32, logEnd int64) (epoch int32, endOffset int64) {
	n := len(c.entries)
	if requested < 0 || n == 0 || requested > c.entries[n-1].Epoch {
		return -1, -1
	}
	if requested == c.entries[n-1].Epoch {
		return requested, logEnd
	}
	// higher: the first entry with an epoch above requested (exists: requested < latest).
	higher := sort.Search(n, func(i int) bool { return c.entries[i].Epoch > requested })
	if higher == 0 {
		return requested, c.entries[0].StartOffset
	}
	return c.entries[higher-1].Epoch, c.entries[higher].StartOffset
}
