package quota

// Group names the sensor a quota is measured on: the clients that resolve to the same
// Group share one rate. It is comparable and may be a map key.
type Group struct {
	User, ClientID string
}

// level is one step of Kafka's precedence: the user and client-id parts of the
// entity it looks up (partNone, partName or partDefault).
type level struct{ user, client uint8 }

// Resolve returns the quota of key that applies to a connection of user (the
// principal's name; "" is not special: callers pass Kafka's "ANONYMOUS" for
// unauthenticated connections) and clientID, by Kafka's precedence, looking only at
// entities that set key:
//
//  1. user=U, client-id=C
//  2. user=U, client-id=<default>
//  3. user=U
//  4. user=<default>, client-id=C
//  5. user=<default>, client-id=<default>
//  6. user=<default>
//  7. client-id=C
//  8. client-id=<default>
//
// ok is false when no entity applies. group is the matched entity with the
// connection's names put in place of defaults: User is user if the entity has a user
// component (named or default), else ""; ClientID likewise. Resolve does not allocate.
func (s *Set) Resolve(key, user, clientID string) (limit float64, group Group, ok bool) {
	if s == nil || s.root == nil {
		return 0, Group{}, false
	}
	k := keyIndex(key)
	levels := [...]level{
		{partName, partName},
		{partName, partDefault},
		{partName, partNone},
		{partDefault, partName},
		{partDefault, partDefault},
		{partDefault, partNone},
		{partNone, partName},
		{partNone, partDefault},
	}
	var hu, hc uint64
	var haveHU, haveHC bool
	for _, l := range levels {
		if k >= 0 && s.count[k][int(l.user)*3+int(l.client)] == 0 {
			continue
		}
		var e Entity
		var xu, xc uint64
		switch l.user {
		case partName:
			if !haveHU {
				hu, haveHU = nameHash(s.seed, user), true
			}
			e.user, e.has, xu = user, hasUser, hu
		case partDefault:
			e.has = hasUser | userDefault
		}
		switch l.client {
		case partName:
			if !haveHC {
				hc, haveHC = nameHash(s.seed, clientID), true
			}
			e.client, e.has, xc = clientID, e.has|hasClient, hc
		case partDefault:
			e.has |= hasClient | clientDefault
		}
		v, found := get(s.root, combine(xu, xc, 0, e.has), e)
		if !found {
			continue
		}
		lim, set := v[key]
		if !set {
			continue
		}
		if l.user != partNone {
			group.User = user
		}
		if l.client != partNone {
			group.ClientID = clientID
		}
		return lim, group, true
	}
	return 0, Group{}, false
}

// ResolveIP returns the connection_creation_rate that applies to connections from ip
// (an address without port, e.g. "10.0.0.1" or "::1", compared in canonical form as
// NewEntity stores it): that of ip=A if set, else that of ip=<default>. An ip that is
// not an address can match only the default. ok is false when neither is set.
func (s *Set) ResolveIP(ip string) (limit float64, ok bool) {
	if s == nil || s.root == nil {
		return 0, false
	}
	if s.count[kConnection][shapeIPName] > 0 {
		if a, parsed := parseIP(ip); parsed {
			e := Entity{ip: a, has: hasIP}
			if v, found := get(s.root, hashEntity(s.seed, e), e); found {
				if lim, set := v[ConnectionCreationRate]; set {
					return lim, true
				}
			}
		}
	}
	if s.count[kConnection][shapeIPDefault] > 0 {
		e := Entity{has: hasIP | ipDefault}
		if v, found := get(s.root, hashEntity(s.seed, e), e); found {
			if lim, set := v[ConnectionCreationRate]; set {
				return lim, true
			}
		}
	}
	return 0, false
}
