// Package assignor is the SDK for KIP-848 consumer group assignor plugins:
// server-side partition assignors that run as separate processes, launched
// and supervised by the broker with hashicorp/go-plugin over gRPC (mutual TLS
// with AutoMTLS).
//
// A plugin is a main package that implements Assignor and calls Serve:
//
//	type sticky struct{}
//
//	func (sticky) Name() string { return "sticky" }
//	func (sticky) Assign(ctx context.Context, in assignor.Input) (assignor.Assignment, error) {
//		if err := assignor.Validate(in); err != nil {
//			return nil, err
//		}
//		...
//	}
//
//	func main() { assignor.Serve(sticky{}) }
//
// The package owns the contract: Assignor, Input, Assignment and the rules
// Validate and Check apply (the broker converts its own types to these and
// runs the same rules on every answer, falling back to a built-in assignor
// when an answer fails them). Assign must not modify its Input, and it is
// called concurrently for different groups. Test an assignor in process with
// the assignortest package before building the binary. Log with Logger
// (stderr; stdout belongs to go-plugin): the broker merges plugin logs into
// its own.
//
// The SDK is its own Go module (github.com/sluicehq/sluice/plugins/assignor)
// and imports nothing from the broker, so a plugin's go get pulls go-plugin,
// gRPC and protobuf, not the broker's dependencies.
//
// The host side (the broker) uses Plugin and Client: Plugin is the
// go-plugin plugin for both sides, Client the dispensed Assignor. The wire
// protocol is sluice.assignor.v1 (proto/assignor.proto), ProtocolVersion 1 in
// the handshake; see plugins/README.md.
package assignor
