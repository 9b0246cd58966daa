package groups

import (
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/kernel"
)

// shareSessionKey names a share session: one member of one share group, on this
// broker (a member has a session with each leader it fetches from).
type shareSessionKey struct{ group, member string }

// shareSession is the set of share-partitions one member fetches from this broker
// (KIP-932's share session), and the epoch its next ShareFetch or ShareAcknowledge
// must carry.
type shareSession struct {
	epoch    int32 // the epoch the next request must carry (1 after creation)
	parts    map[kernel.TopicPartition]struct{}
	lastUsed time.Time
}

// shareSessions is the broker's share session cache.
//
// Rules (KIP-932): epoch 0 opens a session (replacing the member's previous one,
// whose partitions are returned so the caller releases what the member held); -1
// closes it after the request; any other epoch must be the session's next one
// (INVALID_SHARE_SESSION_EPOCH), and a member without a session gets
// SHARE_SESSION_NOT_FOUND. Each accepted request moves the epoch on by one (wrapping
// to 1). At most max sessions exist (SHARE_SESSION_LIMIT_REACHED for a new one once
// none is idle longer than idle), and Expire drops sessions idle longer than idle.
//
// Invariant: a session's epoch is never 0 or negative.
type shareSessions struct {
	mu       sync.Mutex
	sessions map[shareSessionKey]*shareSession
	max      int
	idle     time.Duration
}

func newShareSessions(max int, idle time.Duration) *shareSessions {
	return &shareSessions{sessions: map[shareSessionKey]*shareSession{}, max: max, idle: idle}
}

// use admits a request with epoch for k at now. It returns the session's partitions
// before the request (for epoch 0: those of the replaced session, which the caller
// releases; nil if none), and whether the session is closed by this request (epoch
// -1). The caller then adds and forgets partitions with update.
func (c *shareSessions) use(k shareSessionKey, epoch int32, now time.Time) (old map[kernel.TopicPartition]struct{}, closing bool, e *kerr.Error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sessions[k]
	switch {
	case epoch == 0:
		if s != nil {
			old = s.parts
		} else if len(c.sessions) >= c.max && !c.evictIdleLocked(now) {
			return nil, false, kerr.ShareSessionLimitReached
		}
		c.sessions[k] = &shareSession{epoch: 1, parts: map[kernel.TopicPartition]struct{}{}, lastUsed: now}
		return old, false, nil
	case s == nil:
		return nil, false, kerr.ShareSessionNotFound
	case epoch == -1:
		delete(c.sessions, k)
		return s.parts, true, nil
	case epoch != s.epoch:
		return nil, false, kerr.InvalidShareSessionEpoch
	}
	s.epoch++
	if s.epoch <= 0 {
		s.epoch = 1
	}
	s.lastUsed = now
	return s.parts, false, nil
}

// update adds and removes partitions of k's session (no-op once it is closed) and
// returns the partitions it holds after.
func (c *shareSessions) update(k shareSessionKey, add, forget []kernel.TopicPartition) []kernel.TopicPartition {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sessions[k]
	if s == nil {
		return nil
	}
	for _, tp := range add {
		s.parts[tp] = struct{}{}
	}
	for _, tp := range forget {
		delete(s.parts, tp)
	}
	out := make([]kernel.TopicPartition, 0, len(s.parts))
	for tp := range s.parts {
		out = append(out, tp)
	}
	return out
}

// evictIdleLocked drops the longest-idle session if it is idle longer than c.idle.
func (c *shareSessions) evictIdleLocked(now time.Time) bool {
	var oldest shareSessionKey
	var at time.Time
	found := false
	for k, s := range c.sessions {
		if !found || s.lastUsed.Before(at) {
			oldest, at, found = k, s.lastUsed, true
		}
	}
	if !found || now.Sub(at) <= c.idle {
		return false
	}
	delete(c.sessions, oldest)
	return true
}

// expire drops the sessions idle longer than c.idle at now and returns them with
// their partitions, so the caller releases what their members held.
func (c *shareSessions) expire(now time.Time) map[shareSessionKey][]kernel.TopicPartition {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out map[shareSessionKey][]kernel.TopicPartition
	for k, s := range c.sessions {
		if now.Sub(s.lastUsed) <= c.idle {
			continue
		}
		if out == nil {
			out = map[shareSessionKey][]kernel.TopicPartition{}
		}
		for tp := range s.parts {
			out[k] = append(out[k], tp)
		}
		if out[k] == nil {
			out[k] = []kernel.TopicPartition{}
		}
		delete(c.sessions, k)
	}
	return out
}

// count returns the number of open sessions.
func (c *shareSessions) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.sessions)
}
