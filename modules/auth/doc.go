// Package auth holds the authentication and authorization modules.
//
// "auth.none" lets every principal do everything; "auth.acl" (module.go) adds SASL
// authentication and Kafka's ACLs. The seam they fill is kernel.Authorizer: every
// handler asks the authorizer before touching a resource, so TLS, SASL and ACLs plug
// in here without touching handlers.
//
// # ACLs
//
// auth.acl is Kafka's StandardAuthorizer. A binding (Kafka's AclBinding) is a resource
// pattern (resource type, pattern type LITERAL or PREFIXED, name) and an entry
// (principal "User:alice" or the wildcard "User:*", host "*" or an IP address,
// operation, permission ALLOW or DENY); wire values are kernel's Operation and
// ResourceType and this package's pattern and permission constants.
//
// Authorize(principal, host, op, resource) decides, in this order:
//  1. a principal listed in super.users ("User:admin;User:bob") is allowed;
//  2. the bindings that apply to the resource are those of its type whose pattern is
//     LITERAL with its name, LITERAL "*", or PREFIXED with a prefix of its name;
//  3. of those, a binding matches when its principal is the principal or User:*
//     (which, as in Kafka, matches principals of every type), its host is "*" or the
//     client's IP, and its operation is op or ALL, or, for ALLOW only, implies op
//     (Read, Write, Delete and Alter imply Describe; AlterConfigs implies
//     DescribeConfigs);
//  4. a matching DENY denies; else a matching ALLOW allows;
//  5. else, if no binding applies to the resource at all (whatever its principal,
//     host or operation), allow.everyone.if.no.acl.found decides (default false);
//  6. else deny.
//
// The ACL APIs (29_describe_acls.go, 30_create_acls.go, 31_delete_acls.go, the work in
// acl_apis.go) need Describe on the cluster (DescribeAcls) or Alter on the cluster
// (CreateAcls, DeleteAcls), else CLUSTER_AUTHORIZATION_FAILED. A creation with an
// unknown or ANY resource type, a pattern type other than LITERAL or PREFIXED, an ANY
// or unknown operation or permission, an empty name, a cluster resource not named
// kafka-cluster, a principal that is not Type:Name or an empty host gets
// INVALID_REQUEST with a message; the others in the request are still created. A
// filter (Kafka's AclBindingFilter: null strings and ANY values match everything;
// pattern MATCH matches the LITERAL name, LITERAL "*" and every PREFIXED pattern that
// prefixes the name) with an UNKNOWN element is INVALID_REQUEST. DeleteAcls answers,
// per filter, the bindings it matched and deleted. Without an authorizer (auth.none)
// the same APIs answer SECURITY_DISABLED, as Kafka does.
//
// # ACL storage
//
// Each binding is one extension record in the metadata log: namespace "auth.acl", key
// the lower-case hex SHA-256 of the binding's encoding (64 bytes), value the encoding:
//
//	| version u8 = 1 | resource type i8 | pattern type i8 | operation i8 | permission i8 |
//	| name length uvarint | name | principal length uvarint | principal |
//	| host length uvarint | host |
//
// Each string is at most 32767 bytes, so a value (under 100 KiB) is well within
// kernel.MaxExtensionValueBytes and a key within the metadata log's 255-byte bound on
// extension keys. The encoding is canonical (minimal varints, no
// trailing bytes), so equal bindings have equal keys and creating one twice stores it
// once. Format 1 is frozen; a new format gets a new version byte, and a broker keeps
// reading version N-1. A value that does not decode (decodeACL never panics; fuzzed by
// FuzzDecodeACL) is left out of the index and logged, once at Warn.
//
// CreateAcls and DeleteAcls write through kernel.ExtensionStore (which forwards to
// the controller), at most 64 writes in flight per request so that raft commits them
// in batches, and return once the index holds what they wrote.
//
// # Invariants
//   - Handlers never skip the authorizer; a denied operation becomes the API's
//     *_AUTHORIZATION_FAILED code, never a closed connection.
//   - The ACL index (aclIndex) is immutable once published; its version never goes
//     back (refresh only swaps in an index built from a newer image).
//   - The index holds exactly the bindings of the image it was built from that decode:
//     base minus removed plus delta. TestIndexLayersModel checks this, and that its
//     decisions equal those of an index built from scratch.
//   - Authorize never scans all bindings: per layer it does one lookup for the
//     literal name, one list for "*", and one lookup per distinct prefix length not
//     longer than the name.
//
// # Concurrency
// Authorize is called concurrently from every connection; implementations are safe for
// concurrent use. auth.none has no state. In auth.acl, Authorize loads the index from
// an atomic.Pointer and takes no lock (only before the first index exists does it
// build one). Builds are serialized by aclState.buildMu, taken by the image
// subscriber and by the ACL APIs (which build up to the current image to read their
// own writes); no other lock is held while it is. The subscriber skips the build of
// an image when a newer one is already published (it is queued for the subscriber),
// so a burst of writes costs one build per burst; a build reuses the decoded entries
// of unchanged values and adds a delta layer unless the delta outgrows an eighth of
// the base.
package auth
