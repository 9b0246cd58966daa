// Package tlsconf builds TLS configurations from Kafka's ssl.* broker configs, for the
// broker's TLS listeners (and its admin listener) and, later, for its outgoing
// connections to other brokers. It also holds Kafka's mapping from a client
// certificate to a principal name: the subject in RFC 2253 form (SubjectDN) and the
// ssl.principal.mapping.rules (ParseRules).
//
//	st, err := tlsconf.New(configs, logger) // reads the key and trust stores once
//	srv, err := st.ServerConfig()           // for tls.Server / tls.NewListener
//	cli, err := st.ClientConfig("broker-2") // one per outgoing dial
//
// # Stores
//
// Only PEM is read (ssl.keystore.type and ssl.truststore.type must be PEM):
//
//   - key store: ssl.keystore.location, a file holding the private key and the
//     certificate chain (leaf first), or inline ssl.keystore.key and
//     ssl.keystore.certificate.chain. The key is PKCS#8 ("PRIVATE KEY"), PKCS#1 ("RSA
//     PRIVATE KEY"), SEC 1 ("EC PRIVATE KEY") or an encrypted PKCS#8 key ("ENCRYPTED
//     PRIVATE KEY", PBES2 with PBKDF2 and AES-CBC, as `openssl pkcs8 -topk8 -v2 aes256`
//     writes) decrypted with ssl.key.password. Legacy "Proc-Type: 4,ENCRYPTED" PEM keys
//     are refused with an error that says so.
//   - trust store: ssl.truststore.location or inline ssl.truststore.certificates, one or
//     more CERTIFICATE blocks. Without one, the system roots verify peers.
//
// Inline values may have lost their line breaks, as a server.properties value written
// with line continuations does ("-----BEGIN CERTIFICATE-----MIIB...-----END
// CERTIFICATE-----"); Kafka reads those, and so does New.
//
// ssl.client.auth none/requested/required maps to tls.NoClientCert,
// VerifyClientCertIfGiven and RequireAndVerifyClientCert. ssl.enabled.protocols takes
// TLSv1.2 and TLSv1.3 (older versions are refused); the cipher suites are Go's
// defaults. ssl.endpoint.identification.algorithm "https" (the default) makes a client
// check the server's host name; "" checks only the chain.
//
// # Reload
//
// Files named by ssl.keystore.location and ssl.truststore.location are watched from
// the handshake path, with no goroutine of their own: a server handshake
// (GetConfigForClient) or a new client config looks at the files' modification time
// and size at most once per second and reloads them when either changed. A file that
// no longer parses (half written, wrong key) leaves the previous material in use and
// logs a warning at most every ten seconds; the next check tries again.
//
// # Invariants
//
//   - Every handshake sees a complete, consistent set: a key with its own certificate
//     chain and one trust pool, swapped in with one atomic store.
//   - A Store is never without a key pair once New returned one with a key store; a
//     reload only ever replaces good material with good material.
//
// # Concurrency
//
// A Store is safe for concurrent use. The material is read through an atomic pointer;
// the once-per-second check is claimed with a compare-and-swap on its timestamp, so
// one handshake does the stat and the reload while the others use the current
// material; mu serialises reloads (and is held by nothing else).
package tlsconf
