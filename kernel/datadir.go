// The data dir: its lock (one broker per directory) and its free-space guard
// (kernel/diskguard), set up first in Start and released last in teardown.

package kernel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/kernel/diskguard"
)

// ErrDiskFull: the data dir's free space is below the reserve
// (sluice.data.dir.reserve.bytes); the write was refused (KAFKA_STORAGE_ERROR for
// produce). It is diskguard.ErrLow.
var ErrDiskFull = diskguard.ErrLow

// DiskSpace is the data dir's free-space guard, as modules see it
// (BrokerInfo.Disk). Both methods are one or two atomic operations.
type DiskSpace interface {
	// Admit counts n bytes a client write (produce, offset commit) is about to write
	// and returns nil, or an error wrapping ErrDiskFull when free space is below the
	// reserve: the write must not happen.
	Admit(n int64) error
	// Critical returns nil, or an error wrapping ErrDiskFull when free space is below
	// half the reserve: the broker's own writes (the offsets store, whose files are
	// written through mmap) must stop rather than write into space that is not there.
	Critical() error
}

// DiskWatcher is DiskSpace's optional side: Watch adds a directory outside the data
// dir that the broker writes too (the offsets store's dir: option, maybe another file
// system); the guard samples it as well, the reserve applies to it as to the data dir,
// and Admit and Critical refuse when either is low.
type DiskWatcher interface {
	Watch(dir string) error
}

// WatchDisk is b.Disk's Watch(dir), nil without a guard or without Watch.
func (b BrokerInfo) WatchDisk(dir string) error {
	if w, ok := b.Disk.(DiskWatcher); ok {
		return w.Watch(dir)
	}
	return nil
}

// AdmitWrite is b.Disk.Admit(n), nil without a guard (modules built by hand in tests).
func (b BrokerInfo) AdmitWrite(n int64) error {
	if b.Disk == nil {
		return nil
	}
	return b.Disk.Admit(n)
}

// DiskCritical is b.Disk.Critical(), nil without a guard.
func (b BrokerInfo) DiskCritical() error {
	if b.Disk == nil {
		return nil
	}
	return b.Disk.Critical()
}

const (
	// lockFile holds the pid of the broker using the data dir (Kafka's name).
	lockFile = ".lock"
	// defaultDiskReserve is sluice.data.dir.reserve.bytes's default (kconfig's
	// catalogue has the same).
	defaultDiskReserve = 1 << 30
	diskSampleEvery    = time.Second
)

// dataDir is the open data dir: the locked file and the guard's monitor.
type dataDir struct {
	lock  *os.File
	guard *diskguard.Guard
	stop  context.CancelFunc
	wg    sync.WaitGroup
}

// openDataDir creates the data dir, locks it (a second broker on it fails at once,
// naming the first one's pid), samples its free space (refusing to start below half
// the reserve: raft and the offsets store could not be opened safely) and starts the
// monitor.
func (k *Kernel) openDataDir() error {
	dir := k.cfg.DataDir
	reserve, err := k.cfg.brokerInt("sluice.data.dir.reserve.bytes", defaultDiskReserve)
	if err != nil {
		return err
	}
	if reserve < 0 {
		return fmt.Errorf("config: sluice.data.dir.reserve.bytes %d: must be at least 0", reserve)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	lock, err := lockDataDir(dir)
	if err != nil {
		return err
	}
	d := &dataDir{lock: lock, guard: diskguard.New(dir, reserve, k.log.With("component", "diskguard"))}
	k.dataDir = d
	free, err := d.guard.Sample()
	if err != nil {
		return fmt.Errorf("data dir %s: %w", dir, err)
	}
	switch d.guard.State() {
	case diskguard.Critical:
		return fmt.Errorf("data dir %s has %d bytes free, below half the reserve of %d bytes (sluice.data.dir.reserve.bytes): "+
			"the metadata log and the offsets store need that room to open safely; free space on that file system "+
			"(delete unneeded files or grow the volume) and start again: %w", dir, free, reserve, ErrDiskFull)
	case diskguard.Low:
		k.log.Warn("starting read-only: data dir below its free-space reserve; produce and offset commits are refused until space is freed (DeleteTopics and DeleteRecords work)",
			"data_dir", dir, "free_bytes", free, "reserve_bytes", reserve)
	}
	var ctx context.Context
	ctx, d.stop = context.WithCancel(context.Background())
	d.wg.Add(1)
	go func() { defer d.wg.Done(); d.guard.Run(ctx, diskSampleEvery) }()
	k.metric.Gauge("sluice_data_dir_free_bytes", "Free bytes on the data dir's file system (as of the last sample, less what was written since).",
		func() float64 { return float64(d.guard.Free()) })
	k.metric.Gauge("sluice_data_dir_writable", "1 while the data dir's free space is at or above sluice.data.dir.reserve.bytes; 0 while client writes are refused.",
		func() float64 {
			if d.guard.State() == diskguard.Writable {
				return 1
			}
			return 0
		})
	return nil
}

// closeDataDir stops the monitor and releases the lock (the file stays: removing it
// would let a third broker lock a new file while a second still holds the old one).
func (k *Kernel) closeDataDir() {
	d := k.dataDir
	if d == nil {
		return
	}
	if d.stop != nil {
		d.stop()
		d.wg.Wait()
	}
	_ = d.lock.Close() // closing the descriptor releases the flock
}

// diskSpace is the guard for BrokerInfo.Disk (nil before openDataDir).
func (k *Kernel) diskSpace() DiskSpace {
	if k.dataDir == nil {
		return nil
	}
	return k.dataDir.guard
}

// lockDataDir takes an exclusive flock on dir/.lock and writes this process's pid in
// it. Held by another process (or another kernel in this one): an error naming that
// pid.
func lockDataDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("data dir %s: lock: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			b, _ := os.ReadFile(path)
			if pid, perr := strconv.Atoi(string(bytes.TrimSpace(b))); perr == nil {
				return nil, fmt.Errorf("data dir %s is in use by pid %d (%s is locked): stop that broker or use another data_dir", dir, pid, path)
			}
			return nil, fmt.Errorf("data dir %s is in use by another broker (%s is locked): stop it or use another data_dir", dir, path)
		}
		return nil, fmt.Errorf("data dir %s: lock %s: %w", dir, path, err)
	}
	// A pid that cannot be written (disk full) does not stop the broker: the lock is
	// the flock, the pid only names its holder.
	if f.Truncate(0) == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// LockDataDir takes the data dir lock a running broker holds (dir/.lock, created
// when missing), for offline tools that must not run beside a broker: held by a
// broker, it fails naming that broker's pid. unlock releases it.
func LockDataDir(dir string) (unlock func() error, err error) {
	f, err := lockDataDir(dir)
	if err != nil {
		return nil, err
	}
	return f.Close, nil
}
