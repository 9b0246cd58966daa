// Package quota is the pure model of Kafka's client quotas (KIP-55 user and client-id
// quotas, KIP-257 DescribeClientQuotas and AlterClientQuotas, KIP-546, KIP-599
// controller mutations, KIP-612 connection creation by ip): the entities, their
// configured values, the precedence that picks the entity applying to a connection,
// the DescribeClientQuotas filter, and the checks of AlterClientQuotas operations. It
// has no network, clock or goroutines; the quotas module stores each entity's values
// in the metadata log and keeps a *Set built from them.
//
// Usage:
//
//	e, err := quota.NewEntity(
//		quota.Component{Type: quota.TypeUser, Name: "alice"},
//		quota.Component{Type: quota.TypeClientID, Default: true})
//	next, vals, err := cur.Apply(e, []quota.Op{{Key: quota.ProducerByteRate, Value: 1 << 20}})
//	// store vals under a hash of e.Key(), then publish next. On a restart:
//	cur, err = quota.FromEntries(loaded) // or cur = cur.With(e, vals) per stored record
//
//	limit, group, ok := cur.Resolve(quota.ProducerByteRate, "alice", "billing-7")
//	// ok: alice's client billing-7 may produce limit bytes/s, measured on the sensor
//	// of group (here {User: "alice", ClientID: "billing-7"}: level 2 below)
//	entries, err := cur.Describe([]quota.FilterComponent{{Type: quota.TypeUser, MatchType: quota.MatchAny}}, false)
//
// # Entities and keys
//
// An entity has one to three components, one per type: user, client-id, ip. Each is
// named or the default ("<default>" in Kafka's tools, a null name on the wire). ip
// never combines with the others. user and client-id entities take producer_byte_rate,
// consumer_byte_rate, request_percentage and controller_mutation_rate; ip entities take
// only connection_creation_rate (ValidateValue lists the ranges).
//
// # Precedence
//
// For a key, Resolve looks at the entities that set that key, and picks the first of:
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
// Keys resolve independently: producer_byte_rate may come from level 7 while
// consumer_byte_rate comes from level 3. For connection_creation_rate, ResolveIP picks
// ip=A, else ip=<default>.
//
// # Groups
//
// Resolve also returns the Group, the sensor the quota is measured on (Kafka's quota
// metric tags): the matched entity with the connection's names in place of defaults,
// and "" for a type the entity does not have. A quota on user=<default> gives each
// user one group {U, ""}, shared by all of U's client ids; one on
// user=<default>,client-id=<default> gives each (user, client id) pair its own; one on
// client-id=<default> gives each client id its own, whatever the user. Kafka URL-encodes
// the user in its metric tags; Group holds the raw names.
//
// # Key format (frozen)
//
// Entity.Key is what callers hash into storage keys, so it never changes: the
// components in canonical order (client-id, ip, user) joined by ';', each "<type>=*"
// for the default or "<type>=<len>:<name>", len being the name's byte length in
// decimal. The length prefix makes any name bytes (';', '=', ':', "<default>")
// unambiguous. Examples:
//
//	user=5:alice
//	client-id=*;user=5:alice
//	client-id=9:<default>        a client id literally named "<default>"
//	ip=*
//	ip=8:10.0.0.1
//
// ip names are canonical (see NewEntity) before they go in the key.
//
// # Errors
//
// The errors wrap ErrInvalidEntity, ErrInvalidQuota or ErrInvalidRequest. A broker
// answers each with INVALID_REQUEST (kerr.InvalidRequest, 42), as Kafka does for bad
// entities, unknown keys, bad values and duplicate keys in AlterClientQuotas, and for
// bad DescribeClientQuotas filters. (Kafka answers UNSUPPORTED_VERSION for an unknown
// entity type in a DescribeClientQuotas filter; INVALID_REQUEST is as good an answer.)
//
// # Invariants
//
//   - Entities are canonical: built only by NewEntity, at most one component per type,
//     ip alone, names non-empty and at most MaxNameBytes, ip names canonical. Equal
//     entities are == and have equal Keys; different ones differ in both.
//   - A Set never changes once built. Apply and With return a new Set that shares the
//     unchanged parts (a persistent hash trie: a change copies one root-to-leaf path).
//     Values handed in are copied and Values handed out are copies.
//   - A Set holds no entity with empty Values: removing the last key removes the entity.
//   - FromEntries and Apply admit only values that pass ValidateValue; With does not
//     check (it replays what was stored), and Resolve returns what it was given.
//
// # Concurrency
//
// A *Set is safe for any number of concurrent readers and needs no lock. To change it,
// Apply (or With) and publish the returned Set, e.g. in an atomic.Pointer; readers of
// the old one are unaffected. Serializing the writers is the caller's business.
package quota
