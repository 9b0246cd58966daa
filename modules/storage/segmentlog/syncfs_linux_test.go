//go:build linux

package segmentlog

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/storage/storagetest"
)

// A partition directory on another file system (here a symlink into /dev/shm) turns
// the store's one syncfs at Close off: its logs fsync their own files again, and the
// data reads back after a clean stop.
func TestMixedFileSystemsSyncEachLog(t *testing.T) {
	shm, err := os.MkdirTemp("/dev/shm", "sluice-mixedfs-")
	if err != nil {
		t.Skipf("no /dev/shm: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(shm) })
	dir := t.TempDir()
	s, err := OpenStore(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.fs == nil {
		t.Fatal("no file system sync on linux")
	}
	if fi, err := os.Stat(shm); err != nil || s.fs.sameFS(fi) {
		t.Skipf("/dev/shm is on the data dir's file system (%v)", err)
	}
	cfg := storagetest.DefaultConfig()
	local := mustOpen(t, s, kernel.TopicPartition{Topic: "local", Partition: 0}, [16]byte{1}, cfg)
	if s.mixedFS.Load() {
		t.Fatal("a partition on the data dir's file system counts as elsewhere")
	}
	b := storagetest.Batch(0, 1, 2, 10)
	if _, err := local.AppendLeader(b); err != nil {
		t.Fatal(err)
	}
	far := kernel.TopicPartition{Topic: "far", Partition: 0}
	if err := os.Symlink(shm, filepath.Join(dir, far.String())); err != nil {
		t.Fatal(err)
	}
	l := mustOpen(t, s, far, [16]byte{2}, cfg)
	if !s.mixedFS.Load() {
		t.Fatal("a partition directory on another file system went unnoticed")
	}
	if _, err := l.AppendLeader(b); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, cleanShutdownFile)); err != nil {
		t.Fatalf("no clean shutdown marker: %v", err)
	}
	s = openTestStore(t, dir)
	for _, tp := range []kernel.TopicPartition{{Topic: "local"}, far} {
		l := mustOpen(t, s, tp, [16]byte{}, cfg)
		if got := readAll(t, l); !bytes.Equal(got, b) {
			t.Fatalf("%v reads %d bytes after the stop, want %d", tp, len(got), len(b))
		}
	}
}

// A clean stop (with its one file system sync) moves every written log's recovery
// point to its end, so the next open recovers nothing.
func TestCleanStopMovesRecoveryPoints(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir)
	cfg := storagetest.DefaultConfig()
	const parts = 20
	for i := range parts {
		l := mustOpen(t, s, kernel.TopicPartition{Topic: "once", Partition: int32(i)}, [16]byte{3}, cfg)
		if _, err := l.AppendLeader(storagetest.Batch(0, 1, 1+i, 10)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	rps, err := readCheckpoint(filepath.Join(dir, recoveryCheckpointFile))
	if err != nil {
		t.Fatal(err)
	}
	for i := range parts {
		if got := rps[kernel.TopicPartition{Topic: "once", Partition: int32(i)}]; got != int64(1+i) {
			t.Fatalf("partition %d recovery point %d after a clean stop, want its end %d", i, got, 1+i)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, cleanShutdownFile)); err != nil {
		t.Fatalf("no clean shutdown marker: %v", err)
	}
}
