//go:build !race

package recordbatch

const raceEnabled = false
