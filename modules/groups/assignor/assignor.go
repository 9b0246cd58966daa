package assignor

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
)

// ErrInvalidInput is returned by an assignor when its Input breaks the rules
// listed under Input (duplicate member ids, inconsistent topics, ...).
var ErrInvalidInput = errors.New("assignor: invalid input")

// ErrInvalidAssignment is returned by Check when an assignment breaks one of
// the package invariants.
var ErrInvalidAssignment = errors.New("assignor: invalid assignment")

// Assignor computes a group's target assignment from its members and the
// metadata of the topics they subscribe to. See the package documentation for
// the contract.
type Assignor interface {
	// Name is the name clients use to request this assignor
	// (ConsumerGroupHeartbeat's ServerAssignor), e.g. "uniform".
	Name() string
	// Assign returns the target assignment for in. It must not modify in.
	Assign(ctx context.Context, in Input) (Assignment, error)
}

// TopicID is a Kafka topic id (a UUID). Its text form, used as a JSON map key,
// is Kafka's: unpadded URL-safe base64 of the 16 bytes.
type TopicID [16]byte

// String returns the text form of id.
func (id TopicID) String() string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// MarshalText implements encoding.TextMarshaler.
func (id TopicID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (id *TopicID) UnmarshalText(b []byte) error {
	var raw [16]byte
	n, err := base64.RawURLEncoding.Decode(raw[:], b)
	if err != nil || n != 16 || base64.RawURLEncoding.EncodedLen(16) != len(b) {
		return fmt.Errorf("topic id %q: not 22 characters of url-safe base64", b)
	}
	*id = raw
	return nil
}

// Compare orders topic ids bytewise: -1, 0 or +1 as id is before, equal to or
// after o.
func (id TopicID) Compare(o TopicID) int { return bytes.Compare(id[:], o[:]) }

// Input is everything an assignor sees about one group.
//
// Rules (violations make Assign return ErrInvalidInput): member ids are
// non-empty and unique; every Topics key equals its Topic's ID; topic names
// are unique; Partitions >= 0; PartitionRacks, PartitionEndOffsets and
// PartitionLag are each empty or have exactly Partitions entries.
//
// Tolerated and ignored: subscriptions to topic names not in Topics (the topic
// may not exist yet), duplicate subscriptions, and Current entries naming
// unknown topics, out-of-range partitions, topics the member no longer
// subscribes to, or partitions another member also claims.
type Input struct {
	Members []Member          `json:"members"`
	Topics  map[TopicID]Topic `json:"topics"`
}

// Member is one group member.
type Member struct {
	ID         string `json:"id"`
	InstanceID string `json:"instance_id,omitempty"` // static membership (group.instance.id), "" if none
	Rack       string `json:"rack,omitempty"`        // client.rack, "" if unknown
	// Topics are the names of the topics the member subscribes to; regular
	// expression subscriptions are resolved by the caller.
	Topics []string `json:"topics"`
	// Current is the member's current assignment (partitions per topic).
	Current map[TopicID][]int32 `json:"current,omitempty"`
}

// Topic is the metadata of one topic.
type Topic struct {
	ID         TopicID `json:"id"`
	Name       string  `json:"name"`
	Partitions int32   `json:"partitions"`
	// PartitionRacks optionally lists, per partition, the racks of its
	// replicas. Empty means unknown.
	PartitionRacks [][]string `json:"partition_racks,omitempty"`
	// PartitionEndOffsets optionally lists each partition's end offset (its high
	// watermark when the assignment was asked for). Empty means unknown.
	PartitionEndOffsets []int64 `json:"partition_end_offsets,omitempty"`
	// PartitionLag optionally lists the group's lag on each partition: end offset
	// minus the group's committed offset (the whole partition, from its start,
	// when nothing is committed); -1 for a partition whose lag is unknown. Empty
	// means unknown. A member's current lag is the sum over its Current
	// partitions, so lag- or load-aware assignors need nothing else.
	PartitionLag []int64 `json:"partition_lag,omitempty"`
}

// Assignment maps member id → topic id → sorted partitions.
type Assignment map[string]map[TopicID][]int32

// group is an Input digested for the algorithms: members sorted by id, topics
// sorted by id, partitions numbered globally, and who subscribes to what.
type group struct {
	members []Member // sorted by ID
	topics  []Topic  // every topic of Input, sorted by ID
	index   map[TopicID]int
	base    []int    // base[t] = global number of partition 0 of topics[t]; base[len] = total
	subs    [][]int  // subs[t] = indices of members subscribed to topics[t], ascending
	subOf   [][]bool // subOf[m][t]
	topicOf []int    // global partition → topic index
}

func newGroup(in Input) (*group, error) {
	g := &group{members: slices.Clone(in.Members), index: make(map[TopicID]int, len(in.Topics))}
	slices.SortFunc(g.members, func(a, b Member) int {
		if a.ID < b.ID {
			return -1
		} else if a.ID > b.ID {
			return 1
		}
		return 0
	})
	for i, m := range g.members {
		if m.ID == "" {
			return nil, fmt.Errorf("%w: empty member id", ErrInvalidInput)
		}
		if i > 0 && g.members[i-1].ID == m.ID {
			return nil, fmt.Errorf("%w: duplicate member id %q", ErrInvalidInput, m.ID)
		}
	}
	byName := make(map[string]int, len(in.Topics))
	for id, t := range in.Topics {
		if id != t.ID {
			return nil, fmt.Errorf("%w: topic %q: key %v differs from its id %v", ErrInvalidInput, t.Name, id, t.ID)
		}
		if t.Partitions < 0 {
			return nil, fmt.Errorf("%w: topic %q: %d partitions", ErrInvalidInput, t.Name, t.Partitions)
		}
		if len(t.PartitionRacks) != 0 && len(t.PartitionRacks) != int(t.Partitions) {
			return nil, fmt.Errorf("%w: topic %q: %d partition rack lists for %d partitions", ErrInvalidInput, t.Name, len(t.PartitionRacks), t.Partitions)
		}
		if len(t.PartitionEndOffsets) != 0 && len(t.PartitionEndOffsets) != int(t.Partitions) {
			return nil, fmt.Errorf("%w: topic %q: %d end offsets for %d partitions", ErrInvalidInput, t.Name, len(t.PartitionEndOffsets), t.Partitions)
		}
		if len(t.PartitionLag) != 0 && len(t.PartitionLag) != int(t.Partitions) {
			return nil, fmt.Errorf("%w: topic %q: %d lags for %d partitions", ErrInvalidInput, t.Name, len(t.PartitionLag), t.Partitions)
		}
		if _, dup := byName[t.Name]; dup {
			return nil, fmt.Errorf("%w: two topics named %q", ErrInvalidInput, t.Name)
		}
		byName[t.Name] = 0
		g.topics = append(g.topics, t)
	}
	slices.SortFunc(g.topics, func(a, b Topic) int { return a.ID.Compare(b.ID) })
	g.base = make([]int, len(g.topics)+1)
	for i, t := range g.topics {
		g.index[t.ID] = i
		byName[t.Name] = i
		g.base[i+1] = g.base[i] + int(t.Partitions)
	}
	g.topicOf = make([]int, g.base[len(g.topics)])
	for t := range g.topics {
		for p := g.base[t]; p < g.base[t+1]; p++ {
			g.topicOf[p] = t
		}
	}
	g.subs = make([][]int, len(g.topics))
	g.subOf = make([][]bool, len(g.members))
	for m, mem := range g.members {
		g.subOf[m] = make([]bool, len(g.topics))
		for _, name := range mem.Topics {
			if t, ok := byName[name]; ok && !g.subOf[m][t] {
				g.subOf[m][t] = true
			}
		}
		for t, ok := range g.subOf[m] {
			if ok {
				g.subs[t] = append(g.subs[t], m)
			}
		}
	}
	return g, nil
}

// total is the number of partitions over all topics.
func (g *group) total() int { return g.base[len(g.topics)] }

// current returns member m's valid current partitions of topic t, ascending
// and deduplicated, as global partition numbers.
func (g *group) current(m, t int) []int {
	if !g.subOf[m][t] {
		return nil
	}
	ps := g.members[m].Current[g.topics[t].ID]
	out := make([]int, 0, len(ps))
	for _, p := range ps {
		if p >= 0 && p < g.topics[t].Partitions {
			out = append(out, g.base[t]+int(p))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// assignment turns owner (global partition → member index, -1 for none) into
// an Assignment holding every member, partitions ascending.
func (g *group) assignment(owner []int) Assignment {
	out := make(Assignment, len(g.members))
	for m, mem := range g.members {
		n := 0
		for _, ok := range g.subOf[m] {
			if ok {
				n++
			}
		}
		out[mem.ID] = make(map[TopicID][]int32, n)
	}
	for p, m := range owner { // ascending p, so each list comes out sorted
		if m < 0 {
			continue
		}
		t := g.topicOf[p]
		a := out[g.members[m].ID]
		a[g.topics[t].ID] = append(a[g.topics[t].ID], int32(p-g.base[t]))
	}
	return out
}

// Builtin returns the built-in assignor called name ("uniform" or "range"),
// or nil if there is none.
func Builtin(name string) Assignor {
	switch name {
	case Uniform{}.Name():
		return Uniform{}
	case Range{}.Name():
		return Range{}
	}
	return nil
}
