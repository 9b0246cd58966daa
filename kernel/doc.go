// Package kernel is the small core of a Sluice broker: it owns the listeners, the
// connections, Kafka's framing and request headers, the dispatch of decoded requests to
// the modules that claimed their API keys, ApiVersions, the admin HTTP listener, and the
// lifecycle of the modules composed from config. It implements no Kafka semantics of its
// own: storage, metadata, replication, groups, transactions, auth and transforms are
// modules, found by role, that reach each other only through the interfaces declared
// here (the seam_*.go files). The kernel imports no module and no internal package but
// internal/tlsconf, which imports nothing of the repository (internal/archtest keeps
// that true).
//
// # Composition
//
// main fills a Registry (modules/standard.Register) and hands it, with a Config, to New:
//
//	reg := kernel.NewRegistry()
//	standard.Register(reg)
//	k, err := kernel.New(cfg, reg, logger) // config checked, module sections decoded strictly
//	err = k.Start(ctx)                     // listeners bound, modules provisioned and started
//	defer k.Shutdown(ctx)
//
// A module is a value made by ModuleInfo.New under a dotted ID ("storage.segmentlog": the
// role, then the name config's `use:` picks). Its lifecycle, each step optional and found
// by type assertion (module.go):
//
//	New → strict decode of its section → Provision(Context) → Validate → Start → Stop → Cleanup
//
// Provision looks up the modules it depends on (Context.Lookup or LookupAs, which
// provisions them first; a cycle is an error) and claims API keys (ClaimAll with one
// Claim literal per key, written in the key's NN_name.go file). The kernel records the
// order in which modules finished provisioning, starts them in that order and stops them
// in reverse; Cleanup runs for every module, provisioned or not, so it must cope with a
// failed Provision. Where two modules need each other, the later one registers itself through a
// hook the earlier one offers (TransformHook, TxnVerifierHook, TxnMarkerHook), so the
// provision graph stays acyclic.
//
// # Request path
//
//  1. The connection's reader reads a size-prefixed frame with ReadFrame (bounded by
//     socket.request.max.bytes) and parses the request header (wire.go draws the
//     layouts).
//  2. The key must be claimed and its version inside the claimed range. An unknown key
//     closes the connection (as Kafka does); an unclaimed version of a known key is
//     answered UNSUPPORTED_VERSION; ApiVersions at an unknown version is answered at v0
//     (KIP-511).
//  3. The body is decoded with kmsg (a decoder panic becomes a closed connection) and
//     the claimed Handler runs with a Request carrying the connection's principal and
//     the Authorizer, which every handler asks before it touches a resource.
//  4. The handler returns a kmsg response (encoded by the kernel at the request's
//     version), a Body of bytes and file ranges (written with writev and sendfile at
//     explicit offsets, never the file's seek position), or NoResponse (acks=0).
//
// ApiVersions is built from the claims, so what the broker advertises is exactly what
// some module implements.
//
// # Connection security
//
// Each listener has a security protocol: listener.security.protocol.map (NAME:PROTOCOL
// pairs) names it, or the listener is named after one (PLAINTEXT, SSL, SASL_PLAINTEXT,
// SASL_SSL); any other name is a config error. Listeners of different protocols run
// side by side. security.go holds the protocol logic; internal/tlsconf the TLS stores,
// the subject formatting and ssl.principal.mapping.rules.
//
// A connection goes through these states, all on its own goroutines (never the accept
// loop, which only wraps the socket):
//
//	accepted ──(SSL, SASL_SSL)── TLS handshake ──┐   10 s deadline; failure closes
//	   │                                         │   SSL + verified client cert:
//	   └──(PLAINTEXT, SASL_PLAINTEXT)────────────┤   Principal = User:<mapped subject>
//	                                             │   (no rule applies: closed)
//	           PLAINTEXT, SSL ◀──────────────────┼──────────▶ SASL_PLAINTEXT, SASL_SSL
//	           serving; Principal fixed          │            SASL states (sasl.go):
//	                                                          needHandshake → needAuthenticate
//	                                                          (or rawTokens after v0) →
//	                                                          authenticated ⇄ re-authentication
//
// The TLS store (one per broker, shared by every TLS listener and, with admin_tls, the
// admin listener) is read at Start; a TLS listener without a key store is a start
// error. Handshakes pick up changed key and trust store files by themselves (tlsconf
// checks them at most once per second).
//
// Zero-copy is lost under TLS (as in Kafka): a chunked response on a TLS connection is
// gathered into 64 KiB writes, file ranges read straight into a pooled buffer, so a
// fetch of many partitions costs a few TLS records, not one per chunk.
//
// SASL is split: the kernel owns each connection's SASL state (sasl.go draws the
// machine) and serves SaslHandshake and SaslAuthenticate itself (17_sasl_handshake.go,
// 36_sasl_authenticate.go, claimed only when the auth module is an Authenticator; a
// SASL listener without one is a start error); the auth module owns the mechanisms and
// credentials (Authenticator, SASLExchange). Until a SASL connection authenticated,
// only ApiVersions, SaslHandshake and, after a handshake, SaslAuthenticate are served
// (anything else closes it) and frames are bounded by sasl.server.max.receive.size. A
// failed exchange is answered SASL_AUTHENTICATION_FAILED after
// connection.failed.authentication.delay.ms and closed. The session ends at the earlier
// of connections.max.reauth.ms and the credential's expiry (KIP-368, announced as
// session_lifetime_ms); after it only a new SaslHandshake is served, and
// re-authentication must keep the principal.
//
// Who writes what: the accept loop sets ConnInfo's ID, Listener, Protocol and Remote;
// the connection's processor goroutine sets TLS (after the handshake, before the
// reader starts), Principal (after the handshake or an exchange, between requests) and
// the SASL state; the reader only frames bytes and reads preAuth, an atomic the
// processor clears before it answers the last authentication step. After SaslHandshake
// v0 the reader still only frames: the processor, knowing the state, treats the frames
// as raw tokens and answers them raw.
//
// # Admin HTTP API
//
// admin.go serves the probes, /metrics and pprof, and the routes modules add with
// Context.HandleHTTP, all behind one gate (admin_auth.go; the rule, for users, in
// docs/admin-api.md): with an auth module that is an Authenticator, every request but
// /healthz and /readyz authenticates (HTTP Basic or a verified client certificate; 401
// otherwise) and is authorized on the cluster resource, Describe for GET and HEAD and
// Alter for every other method (403 otherwise). Handlers read the principal with
// AdminPrincipal. Without an Authenticator, New refuses a non-loopback admin_listen.
//
// # Invariants
//
//   - Responses on one connection go out in request order, and requests on one
//     connection are applied in order: a producer's pipelined batches to a partition
//     keep their order, which idempotence relies on.
//   - One connection holds at most pipelineDepth unanswered requests and, unless a
//     single request is larger, no more unanswered request bytes than
//     socket.request.max.bytes; a frame's buffer grows as its bytes arrive, so a peer
//     that announces a large frame and sends nothing costs nothing.
//   - All connections together hold at most queued.max.request.bytes of requests read
//     and not answered (reqbudget.go): a frame reserves its size when its prefix is
//     read and gives it back when answered or dropped; at the limit readers stop
//     reading (back-pressure), and large frames never take the part of the budget kept
//     for small ones, so stalled big uploads cannot stop ordinary traffic.
//   - max.connections (broker and per listener) and max.connection.creation.rate hold
//     the accept loop back; max.connections.per.ip closes the new connection at once
//     (connlimit.go).
//   - A Go error from a handler, a malformed frame or header, and a handler panic close
//     that connection only; per-resource failures are Kafka error codes inside the
//     response. Nothing a client sends may take the broker down.
//   - Only Produce frames go back to the frame pool (framepool.go says why: kmsg aliases
//     request bytes, and only the Produce path copies them before it answers).
//   - An API key has at most one owner; a claim past what kmsg can decode is refused at
//     startup.
//   - On a SASL listener no handler but ApiVersions, SaslHandshake and SaslAuthenticate
//     ever runs for an unauthenticated or expired session, and no frame larger than
//     sasl.server.max.receive.size is read before authentication; pre-auth frames never
//     go back to the frame pool.
//   - A handshake (TLS or SASL) never runs on the accept loop, and every failure of one
//     closes only its connection; failures are counted in metrics and logged at most a
//     few per second. Credentials are never logged.
//
// # Concurrency
//
// Each accepted connection runs two goroutines: a reader (frames, read-ahead budget)
// and a processor that runs handlers one at a time and writes each answer before taking
// the next; clients that want parallelism open more connections, as with Kafka. Handlers
// of different connections run concurrently, so module state reached from a handler must
// be safe for concurrent use. Module goroutines are owned by the module that started
// them and end in its Stop. Shutdown stops accepting, lets every connection finish the
// requests it has read (bounded by ctx), then stops the modules in reverse provision
// order. There is no package-level mutable state: several brokers share a test process.
package kernel
