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
package auth
