package quota

import (
	"fmt"
	"net/netip"
)

// Match types of a FilterComponent, as DescribeClientQuotas numbers them.
const (
	MatchExact   int8 = 0 // the entity's component of Type is named Match
	MatchDefault int8 = 1 // the entity's component of Type is the default
	MatchAny     int8 = 2 // the entity has a component of Type, named or default
)

// FilterComponent is one component of DescribeClientQuotas' filter.
type FilterComponent struct {
	Type      string
	MatchType int8
	Match     string // for MatchExact only: a null match on the wire is ""
}

// cond is a checked FilterComponent.
type cond struct {
	bit, def uint8 // the type's has and default bits
	match    int8
	name     string     // MatchExact on user or client-id
	ip       netip.Addr // MatchExact on ip
	never    bool       // MatchExact on ip with a name that is no address
}

// Describe returns the entries (copies, ordered by Entity.Key) whose entity matches
// every filter component. With strict, an entity must also have no component of a type
// the filter does not name; without, it may have more. So an empty filter matches
// every entity without strict and none with it, as in Kafka.
//
// Like Kafka, it refuses (errors wrapping ErrInvalidRequest): an unknown type; a type
// given twice; an unknown match type; MatchExact with an empty Match (a null one on the
// wire); MatchDefault or MatchAny with a non-empty Match; ip together with user or
// client-id. An exact ip match is compared in canonical form (see NewEntity); one that
// is not an IP address matches nothing.
func (s *Set) Describe(filter []FilterComponent, strict bool) ([]Entry, error) {
	conds := make([]cond, 0, len(filter))
	var seen uint8
	for _, f := range filter {
		var c cond
		switch f.Type {
		case TypeUser:
			c.bit, c.def = hasUser, userDefault
		case TypeClientID:
			c.bit, c.def = hasClient, clientDefault
		case TypeIP:
			c.bit, c.def = hasIP, ipDefault
		default:
			return nil, fmt.Errorf("%w: unknown entity type %q in the filter", ErrInvalidRequest, f.Type)
		}
		if seen&c.bit != 0 {
			return nil, fmt.Errorf("%w: entity type %s given twice in the filter", ErrInvalidRequest, f.Type)
		}
		seen |= c.bit
		c.match = f.MatchType
		switch f.MatchType {
		case MatchExact:
			if f.Match == "" {
				return nil, fmt.Errorf("%w: exact match of %s without a name", ErrInvalidRequest, f.Type)
			}
			if c.bit == hasIP {
				a, ok := parseIP(f.Match)
				c.ip, c.never = a, !ok
			} else {
				c.name = f.Match
			}
		case MatchDefault, MatchAny:
			if f.Match != "" {
				return nil, fmt.Errorf("%w: match type %d of %s with a name", ErrInvalidRequest, f.MatchType, f.Type)
			}
		default:
			return nil, fmt.Errorf("%w: unknown match type %d", ErrInvalidRequest, f.MatchType)
		}
		conds = append(conds, c)
	}
	if seen&hasIP != 0 && seen&(hasUser|hasClient) != 0 {
		return nil, fmt.Errorf("%w: ip filtered together with user or client-id", ErrInvalidRequest)
	}
	if strict && len(conds) == 0 {
		return nil, nil
	}
	return s.collect(func(e Entity) bool {
		if strict && e.count() != len(conds) {
			return false
		}
		for _, c := range conds {
			if !c.matches(e) {
				return false
			}
		}
		return true
	}), nil
}

// matches reports whether e satisfies c.
func (c *cond) matches(e Entity) bool {
	if e.has&c.bit == 0 {
		return false
	}
	isDefault := e.has&c.def != 0
	switch c.match {
	case MatchDefault:
		return isDefault
	case MatchAny:
		return true
	}
	if isDefault || c.never {
		return false
	}
	switch c.bit {
	case hasUser:
		return e.user == c.name
	case hasClient:
		return e.client == c.name
	}
	return e.ip == c.ip
}
