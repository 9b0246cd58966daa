package metadata

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/metadata/image"
)

func putExt(t *testing.T, m *Module, ns, key string, value []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.PutExtension(ctx, ns, key, value); err != nil {
		t.Fatalf("put %s/%s: %v", ns, key, err)
	}
}

func TestExtensionPutGetDelete(t *testing.T) {
	m, _ := startModule(t, t.TempDir())
	var es kernel.ExtensionStore = m // found by type assertion, as the transforms module does
	_ = es

	v1 := []byte("deployment-1")
	putExt(t, m, "transforms", "a", v1)
	v1[0] = 'X' // the caller may reuse its buffer: the image holds a copy
	im1 := m.Image()
	if got := im1.Extension("transforms", "a"); string(got) != "deployment-1" {
		t.Fatalf("after put: %q", got)
	}
	putExt(t, m, "other", "k", []byte("o"))
	putExt(t, m, "transforms", "a", []byte("deployment-2"))
	im2 := m.Image()
	if got := im2.Extension("transforms", "a"); string(got) != "deployment-2" {
		t.Fatalf("after overwrite: %q", got)
	}
	// An old image keeps its old value.
	if got := im1.Extension("transforms", "a"); string(got) != "deployment-1" || im1.Extension("other", "k") != nil {
		t.Fatalf("old image changed: %q %q", got, im1.Extension("other", "k"))
	}
	// Empty value: stored, distinct from absent.
	putExt(t, m, "transforms", "empty", []byte{})
	if got := m.Image().Extension("transforms", "empty"); got == nil || len(got) != 0 {
		t.Fatalf("empty value: %#v", got)
	}
	// nil deletes; deleting again (an absent key) is fine.
	putExt(t, m, "transforms", "a", nil)
	putExt(t, m, "transforms", "a", nil)
	putExt(t, m, "transforms", "never", nil)
	im3 := m.Image()
	if im3.Extension("transforms", "a") != nil || im3.Extension("transforms", "empty") == nil {
		t.Fatalf("after delete: %v", im3.Extensions)
	}
	if string(im2.Extension("transforms", "a")) != "deployment-2" {
		t.Fatal("delete changed an old image")
	}
	// Deleting a namespace's last key removes the namespace.
	putExt(t, m, "other", "k", nil)
	if _, ok := m.Image().Extensions["other"]; ok {
		t.Fatalf("empty namespace kept: %v", m.Image().Extensions)
	}
	if _, ok := im3.Extensions["other"]; !ok {
		t.Fatal("old image lost a namespace")
	}
}

func TestExtensionInvalid(t *testing.T) {
	m, _ := startModule(t, t.TempDir())
	ctx := context.Background()
	long := strings.Repeat("n", image.MaxExtensionNameLen+1)
	for name, tc := range map[string]struct {
		ns, key string
		value   []byte
	}{
		"empty namespace": {"", "k", []byte("v")},
		"empty key":       {"ns", "", []byte("v")},
		"long namespace":  {long, "k", []byte("v")},
		"long key":        {"ns", long, nil},
		"large value":     {"ns", "k", make([]byte, kernel.MaxExtensionValueBytes+1)},
	} {
		before := m.Image().Version
		err := m.PutExtension(ctx, tc.ns, tc.key, tc.value)
		if !errors.Is(err, image.ErrInvalidExtension) {
			t.Errorf("%s: err %v", name, err)
		}
		if v := m.Image().Version; v != before {
			t.Errorf("%s: proposed an entry (version %d -> %d)", name, before, v)
		}
	}
	// The limits themselves are fine.
	putExt(t, m, strings.Repeat("n", image.MaxExtensionNameLen), strings.Repeat("k", image.MaxExtensionNameLen), []byte("v"))

	// A canceled context, as for every metadata write.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := m.PutExtension(cctx, "ns", "k", []byte("v")); err == nil {
		t.Error("put with a canceled context succeeded")
	}
	// A stopped module is no longer the leader.
	stopModule(t, m)
	if err := m.PutExtension(ctx, "ns", "k", []byte("v")); !errors.Is(err, ErrNotController) && !errors.Is(err, ErrNotRunning) {
		t.Errorf("put on a stopped module: %v", err)
	}
}

func TestExtensionSubscribers(t *testing.T) {
	m, _ := startModule(t, t.TempDir())
	got := make(chan *kernel.Image, 100)
	cancel := m.Subscribe(func(im *kernel.Image) { got <- im })
	defer cancel()
	putExt(t, m, "transforms", "t1", []byte("wasm"))
	timeout := time.After(5 * time.Second)
	for {
		select {
		case im := <-got:
			if string(im.Extension("transforms", "t1")) == "wasm" {
				return
			}
		case <-timeout:
			t.Fatal("subscriber never saw the extension")
		}
	}
}

// snapshotExtensions reads the newest snapshot of m's store and returns its state.
func latestSnapshot(t *testing.T, m *Module) *image.State {
	t.Helper()
	metas, err := m.snaps.List()
	if err != nil || len(metas) == 0 {
		t.Fatalf("list snapshots: %d, %v", len(metas), err)
	}
	_, rc, err := m.snaps.Open(metas[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	s, err := image.DecodeSnapshot(rc)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// takeSnapshot has m's raft take a snapshot now.
func takeSnapshot(t *testing.T, m *Module) {
	t.Helper()
	if err := m.node.raft.Load().Snapshot().Error(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
}

// logAndSnapshot runs fn as two subtests of a restart test, "log" and "snapshot"
// (snapshot true: fn takes one), each on a fresh dir with a module started there that
// snapshots at its first chance (SnapshotThreshold 1).
func logAndSnapshot(t *testing.T, fn func(t *testing.T, dir string, m *Module, snapshot bool)) {
	for _, snapshot := range []bool{false, true} {
		name := "log"
		if snapshot {
			name = "snapshot"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			m, _ := startModule(t, dir, func(m *Module, _ *fakeContext) { m.SnapshotThreshold = 1 })
			fn(t, dir, m, snapshot)
		})
	}
}

func TestExtensionRestart(t *testing.T) {
	logAndSnapshot(t, func(t *testing.T, dir string, m *Module, snapshot bool) {
		putExt(t, m, "transforms", "a", []byte("A"))
		putExt(t, m, "transforms", "b", []byte("B"))
		putExt(t, m, "transforms", "gone", []byte("G"))
		putExt(t, m, "transforms", "gone", nil)
		putExt(t, m, "x", "empty", []byte{})
		if snapshot {
			takeSnapshot(t, m)
			if s := latestSnapshot(t, m); !reflect.DeepEqual(s.Image.Extensions, m.Image().Extensions) {
				t.Fatalf("snapshot holds %v, image %v", s.Image.Extensions, m.Image().Extensions)
			}
			putExt(t, m, "transforms", "b", []byte("B2")) // after the snapshot: from the log
		}
		want := m.Image().Extensions
		stopModule(t, m)

		m2, _ := startModule(t, dir)
		if got := m2.Image().Extensions; !reflect.DeepEqual(got, want) {
			t.Fatalf("after restart %v, want %v", got, want)
		}
	})
}

// TestExtensionLargeValue puts a 20 MB value through raft apply, the bbolt log store,
// a snapshot and a restart.
func TestExtensionLargeValue(t *testing.T) {
	if testing.Short() {
		t.Skip("20 MB value")
	}
	dir := t.TempDir()
	m, _ := startModule(t, dir, func(m *Module, _ *fakeContext) { m.SnapshotThreshold = 1 })
	// 20 MB normally; 8 MB under the race detector, where replaying a 20 MB entry on
	// a loaded 2-core machine outlasts the harness's 10 s start deadline.
	big := make([]byte, largeValueBytes)
	if _, err := io.ReadFull(rand.Reader, big); err != nil {
		t.Fatal(err)
	}
	putExt(t, m, "transforms", "big", big)
	if got := m.Image().Extension("transforms", "big"); !bytes.Equal(got, big) {
		t.Fatalf("image holds %d bytes", len(got))
	}
	// From the log.
	stopModule(t, m)
	m, _ = startModule(t, dir, func(m *Module, _ *fakeContext) { m.SnapshotThreshold = 1 })
	if got := m.Image().Extension("transforms", "big"); !bytes.Equal(got, big) {
		t.Fatalf("after restart from the log: %d bytes", len(got))
	}
	// From a snapshot.
	takeSnapshot(t, m)
	if got := latestSnapshot(t, m).Image.Extension("transforms", "big"); !bytes.Equal(got, big) {
		t.Fatalf("snapshot holds %d bytes", len(got))
	}
	stopModule(t, m)
	m, _ = startModule(t, dir)
	if got := m.Image().Extension("transforms", "big"); !bytes.Equal(got, big) {
		t.Fatalf("after restart from a snapshot: %d bytes", len(got))
	}
}
