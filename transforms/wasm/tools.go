//go:build tools

package wasm

// The test guests under testdata/guests (built for wasip1 by the tests) use
// Redpanda's transform SDK; this import keeps it in go.mod (go mod tidy does
// not look into testdata).
import _ "github.com/redpanda-data/redpanda/src/transform-sdk/go/transform"
