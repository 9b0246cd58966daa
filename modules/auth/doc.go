// Package auth holds the authentication and authorization modules.
//
// Today there is one: "auth.none", which lets every principal do everything. The seam it
// fills is kernel.Authorizer: every handler asks the authorizer before touching a
// resource, so TLS, SASL and ACLs (a later issue) plug in here without touching handlers.
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
//
// # Concurrency
// Authorize is called concurrently from every connection; implementations are safe for
// concurrent use. auth.none has no state.
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
