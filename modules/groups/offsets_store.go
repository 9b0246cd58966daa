package groups

import (
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/groups/offsets"
)

// OffsetsGuest is what a groups.offsets guest offers the module: the offset store,
// opened when the module starts and closed at its Cleanup. The store is a view of
// __consumer_offsets (offsets.View): whatever it lacks, the coordinator's load replays
// from the log, so any store is correct and they differ in what a restart costs.
type OffsetsGuest interface {
	OpenOffsets(broker kernel.BrokerInfo, log *slog.Logger) (offsets.View, error)
}

// badgerOffsets is groups.offsets.badger, the default: offsets.Store under
// <data_dir>/groups/offsets, kept across restarts, so a load replays only the records
// written since the store last applied.
type badgerOffsets struct {
	// Dir is the store's directory (default <data_dir>/groups/offsets).
	Dir string `yaml:"dir"`
}

func (g *badgerOffsets) OpenOffsets(b kernel.BrokerInfo, log *slog.Logger) (offsets.View, error) {
	dir := g.Dir
	if dir == "" {
		dir = filepath.Join(b.DataDir, "groups", "offsets")
	}
	// Opening badger writes through mmap (a new memtable file at once): on a full
	// file system that faults instead of failing, so below the data dir's critical
	// level (half its free-space reserve, kernel/diskguard) the store is not opened,
	// and later writes fail there too. (The kernel refuses to start below it. A
	// custom dir outside the data dir is sampled too: kernel.DiskWatcher.)
	if g.Dir != "" {
		if err := b.WatchDisk(dir); err != nil {
			return nil, fmt.Errorf("open offsets store %s: free space: %w", dir, err)
		}
	}
	if err := b.DiskCritical(); err != nil {
		return nil, fmt.Errorf("open offsets store %s: %w", dir, err)
	}
	s, err := offsets.Open(dir, logWith(log, "component", "badger"))
	if err != nil {
		return nil, err
	}
	s.SetWriteCheck(b.DiskCritical)
	return s, nil
}

// memoryOffsets is groups.offsets.memory: offsets.Memory, nothing on disk; every start
// replays each led __consumer_offsets partition from the log's start.
type memoryOffsets struct{}

func (*memoryOffsets) OpenOffsets(kernel.BrokerInfo, *slog.Logger) (offsets.View, error) {
	return offsets.NewMemory(), nil
}

var (
	_ OffsetsGuest = (*badgerOffsets)(nil)
	_ OffsetsGuest = (*memoryOffsets)(nil)
)
