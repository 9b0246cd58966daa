//go:build race

package replication

// raceEnabled: the race detector makes sync.Pool drop items, so allocation counts are off.
const raceEnabled = true
