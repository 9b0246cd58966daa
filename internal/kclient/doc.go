// Package kclient is a minimal Kafka-protocol client connection for broker-to-broker
// requests (a follower's Fetch and ListOffsets to its leader): dial with a timeout,
// send one kmsg.Request at a time with the right request header, read its response
// with a correlation-id check and a bounded frame size, and honour context deadlines.
// It has no retries, no connection pooling and no pipelining: one request is in flight
// per Conn, which is all a fetcher needs.
//
// Options.TLS runs a TLS handshake and Options.SASL a SASL login (KIP-152) as part of
// Dial, both within the dial's deadline (DialTimeout and ctx): ApiVersions, then
// SaslHandshake v1 naming the mechanism, then SaslAuthenticate (the highest version
// both sides have) carrying the franz-go sasl.Mechanism's messages until its session is
// done, at most eight steps. A refused login is an error wrapping ErrSASL (and the
// broker's *kerr.Error when it answered one); nothing is retried, so a caller that
// dials in a loop must back off. When the broker announces a session lifetime
// (connections.max.reauth.ms), ReauthAfter says when to replace the Conn.
//
// Usage:
//
//	c, err := kclient.Dial(ctx, "127.0.0.1:9092", kclient.Options{ClientID: "broker-2-fetcher",
//		TLS:  store.ClientConfig("broker-1.example"),                             // optional
//		SASL: scram.Auth{User: "broker", Pass: "secret"}.AsSha512Mechanism()}) // optional
//	if err != nil { ... }
//	defer c.Close()
//	vers, err := c.APIVersions(ctx)       // negotiate: min(ours, theirs)
//	req := kmsg.NewPtrFetchRequest()
//	req.SetVersion(min(req.MaxVersion(), vers[kmsg.Fetch.Int16()]))
//	resp, err := c.Request(ctx, req)      // *kmsg.FetchResponse
//
// # Wire format
//
// Every frame is | size int32 | payload |. A request payload is a header and the
// kmsg-encoded body; the header version follows from the request (kmsg tells whether
// its version is flexible, KIP-482):
//
//	v1 (not flexible): | api_key int16 | api_version int16 | correlation_id int32 | client_id nullable_string |
//	v2 (flexible):     v1 + | tagged_fields (uvarint 0: none) |
//
// A response payload is | correlation_id int32 | (+ tagged fields when the response is
// flexible, except ApiVersions, whose response header is always v0) and the body.
//
// # Invariants
//
//   - Correlation ids increase by one per request; a response with another id fails
//     the request with ErrCorrelation and breaks the Conn (its stream is out of step).
//   - A response frame larger than Options.MaxResponseBytes (or <= 0) fails with
//     ErrFrameSize before its payload is read; the read buffer grows as bytes arrive,
//     so a peer claiming a large frame costs memory only for what it sends.
//   - Any I/O, framing or decoding error, and a context that ends mid-request, break
//     the Conn: later requests fail at once with ErrBroken; the caller closes it and
//     dials again.
//   - A response's byte slices (a Fetch's record batches) alias the Conn's read buffer
//     and are valid only until the next Request on the Conn.
//
// # Concurrency
//
// A Conn is safe for concurrent use, but serialises requests (one in flight); Close may
// be called at any time and makes a running Request fail. A context's cancellation is
// applied as a past deadline on the socket (context.AfterFunc), so no goroutine is
// started per request.
package kclient
