// Package interbroker resolves how this broker talks to the other brokers of its
// cluster, from the static broker configs (Kafka's names): which listener a follower
// fetches from, that listener's security protocol, the TLS material for dials and for
// the raft port, and the broker's own SASL credentials.
//
//	sec, err := interbroker.New(info, log)           // info: kernel.BrokerInfo
//	opts := kclient.Options{TLS: sec.ClientTLS(host)} // nil unless SSL or SASL_SSL
//	opts.SASL, err = sec.Mechanism()                  // nil unless SASL_*
//	srv, err := sec.RaftServerTLS()                   // nil unless TLS: mutual TLS
//
// # Which listener
//
// inter.broker.listener.name names it; else security.inter.broker.protocol, when set,
// picks the first listener of that protocol; else it is the first listener. Kafka
// refuses both set, and so does New. The listener's protocol comes from
// listener.security.protocol.map (as the kernel reads it: unset, a listener named
// after a protocol has that protocol). Every broker of a cluster must agree on the
// listener's name and protocol: a follower dials the leader's endpoint of that name
// with its own idea of the protocol.
//
// # TLS
//
// SSL and SASL_SSL: dials verify the other broker's certificate with the trust store
// (ssl.truststore.*), its host name too unless ssl.endpoint.identification.algorithm
// is empty, and present this broker's key store (ssl.keystore.*) as client
// certificate. The raft port (raft and the controller RPC) then is mutual TLS: a
// client certificate is required and verified against the trust store, whatever
// ssl.client.auth says, so a trust store is required. Broker certificates must
// therefore allow both server and client authentication (extended key usage
// serverAuth and clientAuth, or none).
//
// # SASL
//
// SASL_PLAINTEXT and SASL_SSL: the mechanism is sasl.mechanism.inter.broker.protocol
// (default SCRAM-SHA-512; PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512), the credentials
// listener.name.<listener lower-case>.<mechanism lower-case>.sasl.jaas.config
// (kconfig.ParseJAAS). Missing credentials are an error of Mechanism and
// CheckCredentials naming the config to set.
//
// # Invariants
//
//   - A Security is immutable after New; the TLS store it holds reloads changed
//     certificate files by itself, and ClientTLS takes the current material each call.
//   - Credentials are never logged nor put in an error.
//
// # Concurrency
//
// Safe for concurrent use.
package interbroker
