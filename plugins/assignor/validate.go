package assignor

import (
	"errors"
	"fmt"
	"maps"
	"slices"
)

// ErrInvalidInput is what an assignor's error wraps when its Input breaks the
// rules listed under Input (duplicate member ids, inconsistent topics, ...).
// The host treats such an error as its own bug, not the plugin's.
var ErrInvalidInput = errors.New("assignor: invalid input")

// ErrInvalidAssignment is what Check's error wraps when an assignment breaks
// the rules; the host rejects such an answer and uses its fallback.
var ErrInvalidAssignment = errors.New("assignor: invalid assignment")

// Validate returns an error wrapping ErrInvalidInput if in breaks the rules
// listed under Input, and nil otherwise. Assignors call it first. When
// several rules are broken, the error names the same one every time.
func Validate(in Input) error {
	seen := make(map[string]bool, len(in.Members))
	for _, m := range in.Members {
		switch {
		case m.ID == "":
			return fmt.Errorf("%w: empty member id", ErrInvalidInput)
		case seen[m.ID]:
			return fmt.Errorf("%w: duplicate member id %q", ErrInvalidInput, m.ID)
		}
		seen[m.ID] = true
	}
	names := make(map[string]bool, len(in.Topics))
	for _, key := range sortedIDs(in.Topics) {
		t := in.Topics[key]
		if err := validTopic(key, t, names); err != nil {
			return fmt.Errorf("%w: topic %q: %s", ErrInvalidInput, t.Name, err)
		}
		names[t.Name] = true
	}
	return nil
}

// validTopic says what is wrong with t, listed under key, given the names of
// the topics before it; nil when nothing is.
func validTopic(key TopicID, t Topic, names map[string]bool) error {
	perPartition := func(n int) bool { return n == 0 || n == int(t.Partitions) }
	switch {
	case key != t.ID:
		return fmt.Errorf("key %v differs from its id %v", key, t.ID)
	case t.Partitions < 0:
		return fmt.Errorf("%d partitions", t.Partitions)
	case !perPartition(len(t.PartitionRacks)):
		return fmt.Errorf("%d partition rack lists for %d partitions", len(t.PartitionRacks), t.Partitions)
	case !perPartition(len(t.PartitionEndOffsets)):
		return fmt.Errorf("%d end offsets for %d partitions", len(t.PartitionEndOffsets), t.Partitions)
	case !perPartition(len(t.PartitionLag)):
		return fmt.Errorf("%d lags for %d partitions", len(t.PartitionLag), t.Partitions)
	case names[t.Name]:
		return errors.New("two topics of that name")
	}
	return nil
}

// Check reports whether out is a valid assignment for in, with the rules the
// broker applies to every plugin answer: every member and topic out names
// exists; each member's partitions of a topic are in range and strictly
// ascending; every partition of a topic someone subscribes to belongs to
// exactly one member, who subscribes to it; partitions of topics nobody
// subscribes to stay unassigned. Members may be missing from out (they get
// nothing), and a member may list a topic it does not subscribe to with no
// partitions. The error wraps ErrInvalidInput when in itself is invalid, and
// ErrInvalidAssignment otherwise.
func Check(in Input, out Assignment) error {
	if err := Validate(in); err != nil {
		return err
	}
	// subscribers[name] holds the ids of the members subscribing to name.
	subscribers := make(map[string]map[string]bool)
	members := make(map[string]bool, len(in.Members))
	for _, m := range in.Members {
		members[m.ID] = true
		for _, name := range m.Topics {
			if subscribers[name] == nil {
				subscribers[name] = make(map[string]bool)
			}
			subscribers[name][m.ID] = true
		}
	}
	owners := make(map[TopicID][]string, len(in.Topics)) // partition → member id, "" for none
	for _, member := range slices.Sorted(maps.Keys(out)) {
		if !members[member] {
			return fmt.Errorf("%w: unknown member %q", ErrInvalidAssignment, member)
		}
		for _, id := range sortedIDs(out[member]) {
			t, ok := in.Topics[id]
			if !ok {
				return fmt.Errorf("%w: member %q: unknown topic %v", ErrInvalidAssignment, member, id)
			}
			ps := out[member][id]
			if len(ps) > 0 && !subscribers[t.Name][member] {
				return fmt.Errorf("%w: member %q is assigned topic %q it does not subscribe to", ErrInvalidAssignment, member, t.Name)
			}
			if owners[id] == nil {
				owners[id] = make([]string, t.Partitions)
			}
			for i, p := range ps {
				switch {
				case p < 0 || p >= t.Partitions:
					return fmt.Errorf("%w: member %q: topic %q has no partition %d", ErrInvalidAssignment, member, t.Name, p)
				case i > 0 && ps[i-1] >= p:
					return fmt.Errorf("%w: member %q: topic %q: partitions not strictly ascending at %d", ErrInvalidAssignment, member, t.Name, p)
				case owners[id][p] != "":
					return fmt.Errorf("%w: topic %q partition %d assigned to both %q and %q", ErrInvalidAssignment, t.Name, p, owners[id][p], member)
				}
				owners[id][p] = member
			}
		}
	}
	for _, id := range sortedIDs(in.Topics) {
		t := in.Topics[id]
		if len(subscribers[t.Name]) == 0 {
			continue
		}
		for p := range t.Partitions {
			if owners[id] == nil || owners[id][p] == "" {
				return fmt.Errorf("%w: topic %q partition %d is unassigned", ErrInvalidAssignment, t.Name, p)
			}
		}
	}
	return nil
}
