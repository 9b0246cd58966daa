//go:build linux

package segmentlog

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// fsSync is the file system of a store's directory, synced whole (syncfs(2)) at an
// orderly stop instead of fsyncing each written file of each log: at 100,000 written
// partitions that is one call instead of half a million.
//
// Its descriptor is opened with the store: syncfs reports every writeback error the
// file system recorded since then (Linux 5.8 and later), including one that an
// unsynced append met in the background before the stop, so a clean stop never vouches
// for data that failed to reach the disk.
type fsSync struct {
	f   *os.File
	dev uint64
}

func openFSSync(dir string) (*fsSync, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("stat %s: %w", dir, err)
	}
	// Dev is not a uint64 on every architecture.
	return &fsSync{f: f, dev: uint64(st.Dev)}, nil
}

// sameFS reports whether fi (of a partition directory) is on this file system.
func (x *fsSync) sameFS(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && uint64(st.Dev) == x.dev
}

// sync flushes every dirty page and inode of the file system to stable storage.
func (x *fsSync) sync() error {
	if err := unix.Syncfs(int(x.f.Fd())); err != nil {
		return fmt.Errorf("syncfs %s: %w", x.f.Name(), err)
	}
	return nil
}

func (x *fsSync) close() error { return x.f.Close() }
