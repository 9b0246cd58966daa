// Command route-by-key is a derived transform with two output topics: records
// whose key starts with a letter from a to m (either case) go to the first,
// all others (other first characters, empty and null keys) to the second.
//
//	sluice transform deploy --name route --input in --output a-m --output n-z --mode derived route-by-key.wasm
package main

import (
	sdk "github.com/sluicehq/sluice/sdk-wasm"
)

const (
	outLow  = 0 // keys a..m
	outHigh = 1 // everything else
)

func main() {
	sdk.OnRecord(func(r sdk.Record, w sdk.Writer) error {
		return w.WriteTo(route(r.Key), r)
	})
}

// route returns the output index for a key.
func route(key []byte) int {
	if len(key) == 0 {
		return outHigh
	}
	c := key[0] | 0x20 // ASCII lower case for letters
	if c >= 'a' && c <= 'm' {
		return outLow
	}
	return outHigh
}
