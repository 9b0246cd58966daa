//go:build !race

package metadata

const largeValueBytes = 20 << 20
