// Package auth holds the authentication and authorization modules.
//
// Today there is one: "auth.none", which lets every principal do everything. The seam it
// fills is kernel.Authorizer: every handler asks the authorizer before touching a
// resource, so TLS, SASL and ACLs (a later issue) plug in here without touching handlers.
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
