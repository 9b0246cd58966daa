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
package auth
