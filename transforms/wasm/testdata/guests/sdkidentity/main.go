//go:build wasip1

// sdkidentity is examples/transforms/identity: the SDK's OnRecord writing
// every record back.
package main

import sdk "github.com/sluicehq/sluice/sdk-wasm"

func main() {
	sdk.OnRecord(func(r sdk.Record, w sdk.Writer) error { return w.Write(r) })
}
