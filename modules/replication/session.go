package replication

import (
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// Fetch sessions (KIP-227). A client opens a session with a full fetch (epoch 0); the
// broker remembers the session's partitions and what it last told the client about
// each, so later (incremental) fetches carry only changed partitions and get back only
// partitions with news: records, a new HW, LSO or log start offset, or an error.
//
// Session epochs: 0 opens, -1 closes (sessionless full fetch), N > 0 must equal the
// session's next epoch, which each accepted request advances by one.

const (
	sessionEpochInitial = 0
	sessionEpochFinal   = -1
)

// sessionKey names a partition inside a session: by topic name before Fetch v13, by
// topic ID from v13 on (the other field is zero).
type sessionKey struct {
	topic     string
	topicID   [16]byte
	partition int32
}

// sessionPart is one partition of a session: the fetch parameters the client last sent
// and the partition state the broker last sent back.
type sessionPart struct {
	key              sessionKey
	fetchOffset      int64
	maxBytes         int32
	currentEpoch     int32
	lastFetchedEpoch int32
	// last sent; -1 before the first response so a new partition is always sent
	hw, lso, logStart int64
	// The quiet mark (nil qPart: none): the last read of this partition, by a consumer
	// at isolation qCommitted, found nothing to send and nothing unread below its
	// bound, at generation qGen of qPart, under the topic name qTopic; it stands until
	// qUntil (unix ns) unless the client changes its fetch parameters (upsert).
	qPart      *Partition
	qGen       uint64
	qUntil     int64
	qCommitted bool
	qTopic     string
}

// Quiet partitions. A consumer's session names every partition it consumes, and an
// incremental fetch must look at all of them, though most have nothing new: at 1,000
// partitions that look (leadership, offsets, producer state of each) was a third of the
// broker's CPU. A partition whose last read found nothing is left out of the read while
// its generation (Partition.gen, bumped after every change to what a fetch answer
// depends on) is unchanged: with the same fetch parameters the answer would be the same
// empty one. A delayed fetch checks the generations again after each wake and reads
// the partitions that changed. Limits, for what gen does not cover:
//   - consumers only, without a rack (a follower's answer depends on its own fetch
//     state; a preferred read replica on the followers' progress);
//   - the isolation level of the mark (read_committed reads to the LSO, else the HW);
//   - a mark stands for quietMaxAge after the read that made it: a log start moved by
//     retention (which wakes nothing) reaches the client within that time;
//   - READ on the topic is checked on every fetch.
const quietMaxAge = time.Second

// quietPart is a session partition left out of one fetch's read, with what the
// request needs to read it should it change (copied under the session lock).
type quietPart struct {
	sp    *sessionPart
	part  *Partition
	gen   uint64
	topic string

	fetchOffset               int64
	maxBytes                  int32
	currentEpoch, lastFetched int32
}

// fetchSession is one cached session. mu guards everything below it; the session is
// used by one client connection at a time, so contention is nil in practice.
type fetchSession struct {
	id int32

	mu        sync.Mutex
	nextEpoch int32
	parts     []*sessionPart // fetch order; partitions that returned data rotate to the end
	index     map[sessionKey]*sessionPart
	lastUsed  time.Time
	closed    bool
}

// upsert adds or updates a partition from a request.
func (s *fetchSession) upsert(k sessionKey, fetchOffset int64, maxBytes, currentEpoch, lastFetchedEpoch int32) {
	sp := s.index[k]
	if sp == nil {
		sp = &sessionPart{key: k, hw: -1, lso: -1, logStart: -1}
		s.index[k] = sp
		s.parts = append(s.parts, sp)
	}
	if sp.fetchOffset != fetchOffset || sp.maxBytes != maxBytes || sp.currentEpoch != currentEpoch || sp.lastFetchedEpoch != lastFetchedEpoch {
		sp.qPart = nil
	}
	sp.fetchOffset = fetchOffset
	sp.maxBytes = maxBytes
	sp.currentEpoch = currentEpoch
	sp.lastFetchedEpoch = lastFetchedEpoch
}

// forget removes a partition.
func (s *fetchSession) forget(k sessionKey) {
	sp := s.index[k]
	if sp == nil {
		return
	}
	delete(s.index, k)
	for i, q := range s.parts {
		if q == sp {
			s.parts = append(s.parts[:i], s.parts[i+1:]...)
			break
		}
	}
}

// rotate moves the partitions that returned data to the end of the fetch order, so
// that under max_bytes pressure every partition gets its turn (as Kafka does).
func (s *fetchSession) rotate(gotData map[*sessionPart]bool) {
	if len(gotData) == 0 || len(gotData) == len(s.parts) {
		return
	}
	out := make([]*sessionPart, 0, len(s.parts))
	for _, sp := range s.parts {
		if !gotData[sp] {
			out = append(out, sp)
		}
	}
	for _, sp := range s.parts {
		if gotData[sp] {
			out = append(out, sp)
		}
	}
	s.parts = out
}

// sessionCache is the bounded set of fetch sessions.
type sessionCache struct {
	slots    int
	eviction time.Duration
	now      func() time.Time

	mu   sync.Mutex
	byID map[int32]*fetchSession
}

func newSessionCache(slots int, eviction time.Duration, now func() time.Time) *sessionCache {
	return &sessionCache{slots: slots, eviction: eviction, now: now, byID: map[int32]*fetchSession{}}
}

func (c *sessionCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byID)
}

// get returns the session id, or nil.
func (c *sessionCache) get(id int32) *fetchSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byID[id]
}

// remove drops session id.
func (c *sessionCache) remove(id int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.byID[id]; s != nil {
		delete(c.byID, id)
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
	}
}

// create makes a new session for size partitions, evicting one if the cache is full.
// It returns nil when the cache is disabled or nothing may be evicted: the client then
// gets a sessionless full response (session id 0), as Kafka does.
//
// Eviction: the least recently used session if it was unused for the eviction time;
// otherwise the smallest session if it is smaller than the new one.
func (c *sessionCache) create(size int) *fetchSession {
	if c.slots <= 0 {
		return nil
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.byID) >= c.slots {
		var lru, smallest *fetchSession
		var lruUsed time.Time
		smallestN := 0
		for _, s := range c.byID {
			s.mu.Lock()
			used, n := s.lastUsed, len(s.parts)
			s.mu.Unlock()
			if lru == nil || used.Before(lruUsed) {
				lru, lruUsed = s, used
			}
			if smallest == nil || n < smallestN {
				smallest, smallestN = s, n
			}
		}
		victim := (*fetchSession)(nil)
		switch {
		case now.Sub(lruUsed) >= c.eviction:
			victim = lru
		case smallestN < size:
			victim = smallest
		default:
			return nil
		}
		delete(c.byID, victim.id)
		victim.mu.Lock()
		victim.closed = true
		victim.mu.Unlock()
	}
	id := c.newIDLocked()
	s := &fetchSession{id: id, nextEpoch: 1, index: map[sessionKey]*sessionPart{}, lastUsed: now}
	c.byID[id] = s
	return s
}

// newIDLocked returns an unused positive session id, chosen at random so that one
// client cannot guess another's session.
func (c *sessionCache) newIDLocked() int32 {
	for {
		id := rand.Int32N(math.MaxInt32) + 1
		if _, used := c.byID[id]; !used {
			return id
		}
	}
}
