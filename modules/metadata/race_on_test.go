//go:build race

package metadata

const largeValueBytes = 8 << 20
