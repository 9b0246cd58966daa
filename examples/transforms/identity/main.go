// Command identity is the smallest transform: every record is written back unchanged.
// It is the baseline the transform benchmarks measure (what the host/guest boundary
// and the SDK cost), and a starting point for new transforms.
package main

import sdk "github.com/sluicehq/sluice/sdk-wasm"

func main() {
	sdk.OnRecord(func(r sdk.Record, w sdk.Writer) error { return w.Write(r) })
}
