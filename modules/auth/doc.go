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
// # OAUTHBEARER
//
// OAUTHBEARER (RFC 7628; Kafka's KIP-255 and KIP-768 on the broker side) logs a client
// in with a JWT access token, verified against the keys of a JWKS file. Files:
// oauthbearer.go (configs, token checks, the exchange), oauth_message.go (the client
// message's parser), oauth_jwks.go (the JWKS file and its reloads). Broker configs,
// Kafka's names:
//
//	sasl.oauthbearer.jwks.endpoint.url   file:///path or a path; required. http(s) is
//	                                     refused at start (files only, for now).
//	sasl.oauthbearer.expected.audience   comma list; aud must name one. Unset: any.
//	sasl.oauthbearer.expected.issuer     iss must equal it. Unset: any.
//	sasl.oauthbearer.sub.claim.name      the claim naming the principal (sub): User:<value>.
//	sasl.oauthbearer.scope.claim.name    the scopes (scope): a space-separated string or
//	                                     a list. Kept with the session, not used by ACLs.
//	sasl.oauthbearer.clock.skew.seconds  leeway on exp, nbf and iat (30).
//
// The exchange is one client message and one empty server message. The message
// (bounded: 64 KiB, 64 key/value pairs) is
//
//	n,[a=<authzid>],\x01auth=Bearer <token>\x01[<key>=<value>\x01]...\x01
//
// and is parsed strictly (grammar next to parseOAuthMessage): no channel binding, one
// auth pair, alphabetic keys, no duplicate keys, nothing after the final \x01. An
// authzid must equal the principal. The other pairs are SASL extensions (KIP-342):
// accepted and ignored. Kafka hands them to its validator callback, whose default
// accepts the token and validates no extension; we have no such callback.
//
// A token is accepted when it is a compact JWS with one signature whose alg is RS256/384/512,
// PS256/384/512, ES256/384/512 or EdDSA ("none" and HMAC never verify: the algorithm
// is refused before any key is looked at, and the JWKS keeps no symmetric key); its key
// is the JWKS key with the token's kid that fits the algorithm (and the key's own alg
// and use=sig, when the JWKS says them), or the only key when the token has no kid and
// the JWKS holds one; the signature verifies; exp is present and not past, nbf and iat
// (when present) not ahead, all with the skew; iss and aud match as configured; the
// sub claim is a non-empty string without control characters. Kafka's validator also
// requires iat; we check it only when present. JWS and JWT parsing, signature
// verification and claim checks are go-jose's (github.com/go-jose/go-jose/v4), not ours.
//
// The session's Expiry is the token's exp, so the kernel ends it then (KIP-368).
//
// A refused login is an error from Step: the kernel answers SASL_AUTHENTICATION_FAILED
// with "OAUTHBEARER authentication failed: invalid_token: <why>" and closes the
// connection. Kafka instead answers an invalid token with an error challenge
// ({"status":"invalid_token"}), waits for the client's single \x01, then fails. Both
// franz-go (pkg/sasl/oauth) and librdkafka read a SaslAuthenticate error the same as
// that final failure, and neither needs the challenge; an error from Step also means
// one round trip fewer and a reason the client can log. The reason is one of fixed
// texts: errors and logs never quote the token or its claims.
//
// The JWKS file is read at start (an unreadable file, or one with no usable key, is a
// start error). The login path looks at its identity, mtime and size at most once a
// second and reloads it when they changed; a changed file that does not load (or
// vanished) keeps the previous keys and logs a warning at most once a minute. Keys left
// out of a file (symmetric, RSA under 2048 bits, use other than sig, unknown types) are
// logged at each load. Private keys in the file contribute their public half.
//
// Invariants and concurrency: oauthState is read-only after provision, except
// jwksFile.keys, an atomic pointer swapped whole on reload. jwksFile.mu guards the
// reload check; logins only TryLock it (one looks at the file, the others use the
// keys they have), and no other lock is taken while it is held. An oauthExchange
// belongs to one connection and is stepped by one goroutine.
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
//
// # Credentials (auth.acl: SCRAM and PLAIN)
//
// Files: credentials.go (the index, bootstrap users, password checks), cred_codec.go
// (the stored form), scram.go and plain.go (the exchanges), cred_admin.go with
// 50_describe_user_scram_credentials.go and 51_alter_user_scram_credentials.go (the
// APIs).
//
// Stored credentials are metadata-log extension records in namespace "auth.scram", one
// key per (mechanism, user): "SCRAM-SHA-256/alice", "SCRAM-SHA-512/alice". A value holds
// only RFC 5802's server-side keys, never a password or a salted password:
//
//	| version u8 = 1 | mechanism u8 (1 SHA-256, 2 SHA-512) | iterations u32 |
//	| salt_len u16 | salt | stored_key | server_key |      big endian; keys are hash-sized
//
// The mechanism byte repeats the key's. The decoder rejects, never panics on, anything
// else: another version, a mechanism other than the key's, iterations outside
// [4096, 16384], a salt empty or over 256 bytes, lengths that do not add up. A value
// that does not decode is skipped with a warning (the user then has no credential for
// that mechanism). Version rule: a new layout bumps the version byte; the decoder of
// version N reads N and N-1, so a rolling upgrade never loses a credential.
//
// Bootstrap users (the module's users: [{name, password}]) get SCRAM-SHA-256 and
// SCRAM-SHA-512 credentials at Provision, with a random 24-byte salt and 4096
// iterations, in memory only. A stored credential for the same user and mechanism
// takes precedence (a bootstrap password is rotated with AlterUserScramCredentials);
// deleting the stored one brings the bootstrap one back, and a bootstrap credential
// itself cannot be deleted (RESOURCE_NOT_FOUND). User names: 1 to 200 bytes of UTF-8
// without control characters (PLAIN separates fields with NUL). Passwords: 1 to 1024
// bytes. Names are compared byte for byte, without SASLprep, as Kafka does.
//
// AlterUserScramCredentials needs Alter on the cluster and DescribeUserScramCredentials
// Describe on the cluster, as in Kafka; the per-user codes are Kafka's
// (UNSUPPORTED_SASL_MECHANISM, UNACCEPTABLE_CREDENTIAL, RESOURCE_NOT_FOUND,
// DUPLICATE_RESOURCE for a user named twice in one request whatever the mechanisms).
// The client sends the salt and the salted password; the broker derives StoredKey and
// ServerKey and keeps nothing else. We also refuse a salted password that is not the
// hash's size (it could never log in). Unlike Kafka's controller, one request's changes
// are one log entry per user, not one atomic batch.
//
// SCRAM messages are parsed and proofs checked by github.com/xdg-go/scram's server
// conversation; scram.go adds Kafka's rules: the authzid is empty or the user name,
// tokenauth=true (delegation tokens) is refused, messages are at most 4096 bytes.
// PLAIN (RFC 4616, at most 1426 bytes) derives SaltedPassword = PBKDF2(password, salt,
// iterations) and compares H(HMAC(SaltedPassword, "Client Key")) with StoredKey in
// constant time, against one of the user's credentials: a stored one before a
// bootstrap one, SCRAM-SHA-256 before SCRAM-SHA-512. checkPassword (the admin API's
// HTTP Basic) is the same check. The principal is User:<name>. Cost to the broker: a
// SCRAM login is a few HMACs (the client runs the PBKDF2), a PLAIN check one PBKDF2 of
// the credential's iterations (about 2 ms at 4096 with SHA-256), which is why a failed
// authentication is delayed by the kernel (connection.failed.authentication.delay.ms).
//
// Invariants:
//   - An unknown user fails exactly as a wrong password does, at the same step, with the
//     same text and about the same cost: SCRAM answers with a fake credential (a salt
//     that is an HMAC of the name under a per-process key, so it is the same on every
//     attempt at one broker; 4096 iterations; keys no password derives), PLAIN runs the
//     PBKDF2 against it. Failure texts never name the user. Known limit: fake salts
//     differ between brokers and restarts while a stored credential's do not (bootstrap
//     credentials differ too), so comparing brokers can tell a stored user from an
//     unknown name.
//   - Credentials and passwords are never logged; user names are (at Info when a
//     credential changes).
//   - An exchange is stepped by one goroutine (the kernel's rule); after a failure or
//     success every further Step fails.
//
// Concurrency: the index of every credential (stored over bootstrap) is immutable and
// published through an atomic pointer; lookups take no lock. Rebuilds, from the
// Module's image subscription or from a reader that finds the metadata image newer than
// the index (so an API reads its own writes), serialize on credState.mu, never publish
// an older version, and skip decoding when the image shares the namespace's map with
// the last one. credState.mu is a leaf lock.
package auth
