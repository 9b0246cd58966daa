package groups

import (
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/modules/groups/classic"
	"github.com/sluicehq/sluice/modules/groups/consumer"
	"github.com/sluicehq/sluice/modules/groups/offsets"
	"github.com/sluicehq/sluice/modules/groups/share"
)

// group is one group of a shard: exactly one of classic, consumer and share is set.
type group struct {
	id         string
	classic    *classic.Group
	consumer   *consumer.Group
	share      *share.Group
	emptySince time.Time // zero while the group has members; the sweeper's
	// persistedRev is the classic group's Revision when its last group metadata
	// record was written (or when it was restored from one). Guarded by the
	// shard's metaMu.
	persistedRev uint64

	// KIP-848 persistence (consumer_persist.go): writeMu is held from a snapshot
	// of the group's changes to the end of their write; written maps each record
	// key written to its value's hash; full asks for a full rewrite after a failed
	// write. kindChecked: the store was checked for the other protocol's records
	// of this group id (guarded by the shard's metaMu).
	writeMu     sync.Mutex
	written     map[string]uint64
	full        bool
	kindChecked bool
	// sharePersistedEpoch is the share group's epoch at its last write
	// (share_persist.go): the sweep writes again when an expiry moved it. Atomic:
	// the sweep reads it without writeMu.
	sharePersistedEpoch atomic.Int32
}

// metadataRecord returns the group metadata record to write when a classic group is
// Stable, or Empty after generation 0, and changed since the last record written (a
// new generation, a state change, a static member's new id: its Revision moved), or
// nil. The record holds the full classic.Snapshot (members, assignments, timeouts),
// which a later load of the partition restores (shard.restoreGroups). Only Stable and
// Empty snapshots are written (see classic.Snapshot). Called with s.metaMu held.
func (g *group) metadataRecord() *kv {
	if g.classic == nil {
		return nil
	}
	rev := g.classic.Revision()
	if rev == g.persistedRev {
		return nil
	}
	snap := g.classic.Snapshot()
	switch {
	case snap.State == classic.Stable:
	case snap.State == classic.Empty && snap.Generation > 0:
	default:
		return nil // mid-rebalance or Dead: keep the last record
	}
	g.persistedRev = rev
	return &kv{key: offsets.EncodeGroupKey(g.id), value: offsets.EncodeGroupMetadataValue(toGroupMetadata(snap))}
}

// groupKind is a group's protocol: classic, consumer (KIP-848) or share (KIP-932).
type groupKind int8

const (
	kindClassic groupKind = iota
	kindConsumer
	kindShare
)

// String is the group type ListGroups shows.
func (k groupKind) String() string {
	switch k {
	case kindConsumer:
		return "consumer"
	case kindShare:
		return "share"
	}
	return "classic"
}

func (g *group) kind() groupKind {
	switch {
	case g.consumer != nil:
		return kindConsumer
	case g.share != nil:
		return kindShare
	}
	return kindClassic
}

func (g *group) isEmpty() bool {
	switch g.kind() {
	case kindConsumer:
		return g.consumer.IsEmpty()
	case kindShare:
		return g.share.IsEmpty()
	}
	return g.classic.IsEmpty()
}

func (g *group) markDead(err *kerr.Error) {
	switch g.kind() {
	case kindConsumer:
		g.consumer.MarkDead(err)
	case kindShare:
		g.share.MarkDead(err)
	default:
		g.classic.MarkDead(err)
	}
}

func (g *group) tick(now time.Time) {
	type ticker interface {
		NextDeadline() (time.Time, bool)
		Tick(time.Time)
	}
	var t ticker = g.classic
	switch g.kind() {
	case kindConsumer:
		t = g.consumer
	case kindShare:
		t = g.share
	}
	if d, ok := t.NextDeadline(); ok && !d.After(now) {
		t.Tick(now)
	}
}

// typ is the group type ListGroups shows: "classic", "consumer" or "share".
func (g *group) typ() string { return g.kind().String() }

func (g *group) state() string {
	switch g.kind() {
	case kindConsumer:
		return g.consumer.State().String()
	case kindShare:
		return g.share.State().String()
	}
	return g.classic.State().String()
}

func (g *group) protocolType() string {
	switch g.kind() {
	case kindConsumer:
		return "consumer"
	case kindShare:
		return "share"
	}
	return g.classic.ProtocolType()
}

// subscribedTo reports whether a member of the group may consume topic: from the
// members' subscriptions (KIP-848 groups; regexes as resolved by the group's
// members' assignments and names), or the members' consumer protocol metadata while
// a classic group is Stable, and conservatively true while it rebalances or uses
// another protocol type.
func (g *group) subscribedTo(topic string) bool {
	if g.share != nil {
		for _, mb := range g.share.Members() {
			if slices.Contains(mb.SubscribedTopicNames, topic) {
				return true
			}
		}
		return false
	}
	if g.consumer != nil {
		for _, mb := range g.consumer.Members() {
			if slices.Contains(mb.SubscribedTopicNames, topic) {
				return true
			}
			if mb.SubscribedTopicRegex != "" {
				if re, err := regexp.Compile("^(?:" + mb.SubscribedTopicRegex + ")$"); err != nil || re.MatchString(topic) {
					return true
				}
			}
		}
		return false
	}
	d := g.classic.Describe(time.Now())
	if d.State == "Empty" || d.State == "Dead" {
		return false
	}
	if d.ProtocolType != "consumer" || d.State != "Stable" {
		return true
	}
	for _, mb := range d.Members {
		var md kmsg.ConsumerMemberMetadata
		if err := md.ReadFrom(mb.ProtocolMetadata); err != nil {
			return true
		}
		if slices.Contains(md.Topics, topic) {
			return true
		}
	}
	return false
}
