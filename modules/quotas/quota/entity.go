package quota

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Entity component types, as Kafka's client quota APIs spell them.
const (
	TypeUser     = "user"
	TypeClientID = "client-id"
	TypeIP       = "ip"
)

// MaxNameBytes is the longest name, in bytes, an entity component may have.
const MaxNameBytes = 1024

// defaultName is how Kafka's tools and String show the default entity of a type.
const defaultName = "<default>"

// ErrInvalidEntity is wrapped by every error about an entity that cannot exist: no
// components, an unknown or repeated type, ip combined with another type, a bad name.
var ErrInvalidEntity = errors.New("quota: invalid entity")

// ErrInvalidQuota is wrapped by every error about a quota key or value: a key the
// entity kind does not take, a value out of range, a key given twice in one Apply.
var ErrInvalidQuota = errors.New("quota: invalid quota")

// ErrInvalidRequest is wrapped by every error about a DescribeClientQuotas filter.
var ErrInvalidRequest = errors.New("quota: invalid request")

// Component is one part of an entity: a type and either a name or the default (Kafka's
// "<default>", a null name on the wire).
type Component struct {
	Type    string
	Name    string // ignored when Default
	Default bool
}

// Bits of Entity.has.
const (
	hasUser uint8 = 1 << iota
	userDefault
	hasClient
	clientDefault
	hasIP
	ipDefault
)

// Entity is a canonical entity: at most one component per type, sorted by type
// (client-id, ip, user in byte order), never empty. Build it with NewEntity.
//
// Entities are comparable: two entities are == exactly when they have the same
// components, so an Entity may be a map key. The zero Entity has no components and is
// not valid: Set refuses or ignores it.
type Entity struct {
	user   string     // "" when absent or default
	client string     // "" when absent or default
	ip     netip.Addr // canonical (unmapped, no zone); zero when absent or default
	has    uint8      // hasUser|userDefault|hasClient|clientDefault|hasIP|ipDefault
}

// NewEntity validates and canonicalizes components. It refuses (with errors wrapping
// ErrInvalidEntity): no components; an unknown type; a type given twice; ip combined
// with another type; a non-default name that is empty or longer than MaxNameBytes; an
// ip name that is not an IP address.
//
// An ip name is canonicalized: an IPv4-mapped IPv6 address becomes the IPv4 address, an
// IPv6 zone is dropped, and IPv6 is written as RFC 5952 says ("2001:db8::1"), so
// "0:0:0:0:0:0:0:1" and "::1" are one entity. User and client-id names are kept byte
// for byte.
func NewEntity(cs ...Component) (Entity, error) {
	var e Entity
	if len(cs) == 0 {
		return Entity{}, fmt.Errorf("%w: no components", ErrInvalidEntity)
	}
	for _, c := range cs {
		var bit, def uint8
		switch c.Type {
		case TypeUser:
			bit, def = hasUser, userDefault
		case TypeClientID:
			bit, def = hasClient, clientDefault
		case TypeIP:
			bit, def = hasIP, ipDefault
		default:
			return Entity{}, fmt.Errorf("%w: unknown type %q", ErrInvalidEntity, c.Type)
		}
		if e.has&bit != 0 {
			return Entity{}, fmt.Errorf("%w: type %s given twice", ErrInvalidEntity, c.Type)
		}
		e.has |= bit
		if c.Default {
			e.has |= def
			continue
		}
		if c.Name == "" {
			return Entity{}, fmt.Errorf("%w: empty %s name", ErrInvalidEntity, c.Type)
		}
		if len(c.Name) > MaxNameBytes {
			return Entity{}, fmt.Errorf("%w: %s name of %d bytes (at most %d)", ErrInvalidEntity, c.Type, len(c.Name), MaxNameBytes)
		}
		switch c.Type {
		case TypeUser:
			e.user = c.Name
		case TypeClientID:
			e.client = c.Name
		case TypeIP:
			a, ok := parseIP(c.Name)
			if !ok {
				return Entity{}, fmt.Errorf("%w: ip name %q is not an IP address", ErrInvalidEntity, c.Name)
			}
			e.ip = a
		}
	}
	if e.has&hasIP != 0 && e.has&(hasUser|hasClient) != 0 {
		return Entity{}, fmt.Errorf("%w: ip combined with user or client-id", ErrInvalidEntity)
	}
	return e, nil
}

// parseIP parses an IP address literal into its canonical form: IPv4-mapped IPv6
// addresses unmapped, zone dropped.
func parseIP(s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.WithZone("").Unmap(), true
}

// valid reports whether e was built by NewEntity (is not the zero Entity).
func (e Entity) valid() bool { return e.has != 0 }

// count is the number of components of e.
func (e Entity) count() int {
	n := 0
	for _, b := range [...]uint8{hasUser, hasClient, hasIP} {
		if e.has&b != 0 {
			n++
		}
	}
	return n
}

// Components returns e's components, a new slice in canonical order (client-id, ip,
// user). Default components have an empty Name.
func (e Entity) Components() []Component {
	if !e.valid() {
		return nil
	}
	cs := make([]Component, 0, e.count())
	for _, t := range [...]string{TypeClientID, TypeIP, TypeUser} {
		if c, ok := e.Component(t); ok {
			cs = append(cs, c)
		}
	}
	return cs
}

// Has reports whether e has a component of type typ.
func (e Entity) Has(typ string) bool {
	_, ok := e.Component(typ)
	return ok
}

// Component returns e's component of type typ.
func (e Entity) Component(typ string) (Component, bool) {
	switch typ {
	case TypeUser:
		if e.has&hasUser != 0 {
			return Component{Type: TypeUser, Name: e.user, Default: e.has&userDefault != 0}, true
		}
	case TypeClientID:
		if e.has&hasClient != 0 {
			return Component{Type: TypeClientID, Name: e.client, Default: e.has&clientDefault != 0}, true
		}
	case TypeIP:
		if e.has&hasIP != 0 {
			if e.has&ipDefault != 0 {
				return Component{Type: TypeIP, Default: true}, true
			}
			return Component{Type: TypeIP, Name: e.ip.String()}, true
		}
	}
	return Component{}, false
}

// IsIP reports whether e is an ip entity (which takes only connection_creation_rate).
func (e Entity) IsIP() bool { return e.has&hasIP != 0 }

// Key is a stable, unambiguous string for e: equal for equal entities, different for
// different ones whatever bytes the names hold. Its format is frozen (callers hash it
// into storage keys): the components in canonical order (client-id, ip, user), joined
// by ';', each "<type>=*" for the default or "<type>=<len>:<name>" with len the name's
// length in bytes, in decimal:
//
//	client-id=*;user=5:alice
//	ip=8:10.0.0.1
//
// The zero Entity's Key is "".
func (e Entity) Key() string {
	var b strings.Builder
	for i, c := range e.Components() {
		if i > 0 {
			b.WriteByte(';')
		}
		b.WriteString(c.Type)
		b.WriteByte('=')
		if c.Default {
			b.WriteByte('*')
			continue
		}
		b.WriteString(strconv.Itoa(len(c.Name)))
		b.WriteByte(':')
		b.WriteString(c.Name)
	}
	return b.String()
}

// String is a readable form of e, in the order of Kafka's tools (user, then client-id;
// ip alone): "user=alice,client-id=<default>". The default is written <default>. A
// name is written as is unless it is literally "<default>", contains ',', '=' or '"',
// or holds invalid UTF-8 or a non-printable character: then it is written Go-quoted
// (strconv.Quote), e.g. user="a,b". So the form is unambiguous: an unquoted name never
// starts with '"'. The zero Entity's String is "".
func (e Entity) String() string {
	var b strings.Builder
	for _, t := range [...]string{TypeUser, TypeClientID, TypeIP} {
		c, ok := e.Component(t)
		if !ok {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(t)
		b.WriteByte('=')
		switch {
		case c.Default:
			b.WriteString(defaultName)
		case needsQuote(c.Name):
			b.WriteString(strconv.Quote(c.Name))
		default:
			b.WriteString(c.Name)
		}
	}
	return b.String()
}

// needsQuote reports whether String must quote name.
func needsQuote(name string) bool {
	if name == defaultName || name == "" || strings.ContainsAny(name, `,="`) {
		return true
	}
	for _, r := range name {
		if r == utf8.RuneError || !strconv.IsPrint(r) {
			return true
		}
	}
	return false
}
