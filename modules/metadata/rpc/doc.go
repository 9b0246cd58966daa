// Package rpc is the transport of the metadata module's controller RPC: the wire codec
// (wire.go: Kafka-framed requests and responses after a 4-byte Magic, and Sluice's own
// Forward and AddObserver messages), a pooling Client (client.go), the connection loop
// of the server side (server.go: ServeConn, which hands each decoded request to the
// metadata module), and Mux (mux.go), the raft.StreamLayer that shares the raft port
// between raft's NetworkTransport and the controller RPC by the first byte of each
// connection. Given a *TLS (NewMux, NewClient), the port is mutual TLS: Mux completes
// each accepted connection's handshake before the sniff, and Mux.Dial and the Client
// dial with the broker's certificate; nil is plaintext.
//
// What the messages mean (which controller answers, forwarding, retries) is the
// metadata package's; the message layouts are drawn next to their types in wire.go and
// the protocol in the metadata package's doc.go ("Controller RPC").
//
// Frames are read by one function, readFrame, on both sides.
//
// # Invariants
//
//   - A connection accepted by Mux is raft's or the RPC server's, never both, and is
//     closed by its owner (raft, ServeConn, or Mux.Close while it is sniffed or queued).
//   - With TLS, no byte of a connection is sniffed or served before its handshake
//     verified the peer's certificate; a handshake takes at most handshakeTimeout.
//   - A Client call that fails with ErrNotSent wrote nothing whole: the caller may
//     retry it elsewhere. Any other failure may follow a request that was executed.
//   - Key numbers, versions and Magic are frozen.
//
// # Concurrency
//
// Client is safe for concurrent use; each call owns one connection at a time
// (Client.mu guards only the idle pool and is never held during a call's I/O).
// Mux.mu guards the set of tracked connections and is never held while taking another
// lock. A server connection answers one request at a time, in order.
package rpc
