// Package sdk is the Go SDK for sluice record transforms: Go programs,
// compiled to WebAssembly, that the broker runs on the records produced to a
// topic (ABI.md in this directory is the contract with the broker).
//
// A transform is a main package whose main function calls OnRecord (or
// OnBatch) with the transform's function. This one upper-cases values:
//
//	package main
//
//	import (
//		"bytes"
//
//		sdk "github.com/sluicehq/sluice/sdk-wasm"
//	)
//
//	func main() {
//		sdk.OnRecord(func(r sdk.Record, w sdk.Writer) error {
//			r.Value = bytes.ToUpper(r.Value)
//			return w.Write(r)
//		})
//	}
//
// Build it with standard Go and deploy it with the sluice CLI:
//
//	GOOS=wasip1 GOARCH=wasm go build -o upper.wasm .
//	sluice transform deploy --name upper --input events upper.wasm
//
// # Records and writes
//
// The callback gets records whose Key, Value and header Values are slices of
// the SDK's input buffer, reused for the next batch: they are valid only
// until the callback returns (bytes.Clone what you keep). Writing a record
// copies it into the batch's output buffer, so the record passed to Write
// may be an input record, a modified one, or a new one; records not written
// are dropped. A written record keeps its Timestamp (the zero Timestamp
// means the input record's timestamp); its Offset is ignored.
//
// In inline mode (the default) the output replaces the input records in the
// input topic: Write writes there. In derived mode the input records are
// appended unchanged, and the output goes to the transform's output topics:
// WriteTo(i, r) writes to output i (OutputTopic(i) names it), Write to
// output 0.
//
// The output of a batch is sent to the broker in one call when the callback
// returns nil. If it returns an error, the output is discarded and the batch
// fails: the transform's error policy (reject, drop or dlq) applies to all
// its records. A panic traps the module, which fails the batch too and ends
// the instance.
//
// # Who produced
//
// Record.Source and Batch.Source tell an inline transform who produced the
// batch: the producer's principal and the client id of its Produce request.
// This one stamps them into a header, so consumers can trust where a record
// came from (examples/transforms/stamp-producer does the same, and replaces
// headers of that name the client set):
//
//	sdk.OnRecord(func(r sdk.Record, w sdk.Writer) error {
//		src := r.Source() // e.g. User:alice, or User:ANONYMOUS
//		r.Headers = append(r.Headers, sdk.Header{Key: "producer", Value: []byte(src.Principal())})
//		return w.Write(r)
//	})
//
// Derived transforms read stored records, whose producer is not known: they
// get the zero Source. Test such a function natively with Record.WithSource.
//
// # Sandbox
//
// A transform has no filesystem or network, and its clock and random numbers
// are deterministic, not real: use the record's Timestamp. Environment
// variables set at deployment are available through os.Getenv; stdout and
// stderr go to the broker's log.
package sdk
