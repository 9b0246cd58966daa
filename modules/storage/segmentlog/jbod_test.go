package segmentlog

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/storage/storagetest"
)

// jbodModule starts a module over the log dirs given (log.dirs), its loops fast.
func jbodModule(t *testing.T, dirs ...string) *Module {
	t.Helper()
	m := Info().New().(*Module)
	m.FlushCheckIntervalMs = 10
	startModuleWith(t, m, &fakeContext{dataDir: t.TempDir(), configs: map[string]string{"log.dirs": strings.Join(dirs, ",")}})
	return m
}

func jtp(p int32) kernel.TopicPartition { return kernel.TopicPartition{Topic: "j", Partition: p} }

// dirOf names the log dir holding tp's partition directory.
func dirOf(t *testing.T, tp kernel.TopicPartition, dirs ...string) string {
	t.Helper()
	var found []string
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, tp.String())); err == nil {
			found = append(found, d)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%v is in %d dirs: %v", tp, len(found), found)
	}
	return found[0]
}

func TestJBODPlacementAndReopen(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	m := jbodModule(t, a, b)
	cfg := storagetest.DefaultConfig()
	for p := range int32(4) {
		l, err := m.Open(jtp(p), [16]byte{}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.AppendLeader(storagetest.Batch(0, 1, int(p)+1, 10)); err != nil {
			t.Fatal(err)
		}
	}
	// Fewest partitions first, ties to the first dir: a, b, a, b.
	for p, want := range []string{a, b, a, b} {
		if got := dirOf(t, jtp(int32(p)), a, b); got != want {
			t.Fatalf("partition %d in %s, want %s", p, got, want)
		}
	}
	dirs := m.Dirs()
	if len(dirs) != 2 || dirs[0].Path != a || dirs[1].Path != b || len(dirs[0].Partitions) != 2 || len(dirs[1].Partitions) != 2 {
		t.Fatalf("dirs %+v", dirs)
	}
	for _, d := range dirs {
		if d.Err != nil || d.TotalBytes <= 0 {
			t.Fatalf("dir %+v", d)
		}
	}
	if err := m.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}

	// A restart finds each partition where it was, with its records.
	m2 := jbodModule(t, a, b)
	for p := range int32(4) {
		l, err := m2.Open(jtp(p), [16]byte{}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if l.LogEndOffset() != int64(p)+1 {
			t.Fatalf("partition %d: log end %d after the restart", p, l.LogEndOffset())
		}
	}
	if got := dirOf(t, jtp(1), a, b); got != b {
		t.Fatalf("partition 1 moved to %s", got)
	}
	// A new one goes to the dir with fewer partitions.
	if err := m2.Remove(jtp(0)); err != nil {
		t.Fatal(err)
	}
	if _, err := m2.Open(jtp(9), [16]byte{}, cfg); err != nil {
		t.Fatal(err)
	}
	if got := dirOf(t, jtp(9), a, b); got != a {
		t.Fatalf("new partition in %s, want the emptier %s", got, a)
	}
}

func TestJBODRefusesDuplicatePartition(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	for _, d := range []string{a, b} {
		if err := os.MkdirAll(filepath.Join(d, jtp(0).String()), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	m := Info().New().(*Module)
	err := m.Provision(&fakeContext{dataDir: t.TempDir(), configs: map[string]string{"log.dirs": a + "," + b}})
	if err == nil || !strings.Contains(err.Error(), "two log dirs") {
		t.Fatalf("provision: %v, want a refusal naming the duplicate", err)
	}
	if err := m.Cleanup(); err != nil {
		t.Fatal(err)
	}
}

func TestJBODDirDownAtStart(t *testing.T) {
	a := t.TempDir()
	bad := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(bad, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := storagetest.DefaultConfig()
	// A partition in the healthy dir, from an earlier run.
	m0 := jbodModule(t, a)
	if _, err := m0.Open(jtp(0), [16]byte{}, cfg); err != nil {
		t.Fatal(err)
	}
	if err := m0.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}

	m := jbodModule(t, a, bad)
	if _, err := m.Open(jtp(0), [16]byte{}, cfg); err != nil {
		t.Fatalf("partition of the healthy dir: %v", err)
	}
	// Any other partition may be in the failed dir: offline, not created empty.
	if _, err := m.Open(jtp(1), [16]byte{}, cfg); !errors.Is(err, kernel.ErrLogOffline) {
		t.Fatalf("partition in no healthy dir: %v, want ErrLogOffline", err)
	}
	dirs := m.Dirs()
	if len(dirs) != 2 || dirs[1].Path != bad || dirs[1].Err == nil || dirs[0].Err != nil {
		t.Fatalf("dirs %+v", dirs)
	}

	// Every dir down: the module does not start.
	m2 := Info().New().(*Module)
	if err := m2.Provision(&fakeContext{dataDir: t.TempDir(), configs: map[string]string{"log.dirs": bad}}); err == nil {
		t.Fatal("provision with no usable log dir succeeded")
	}
	if err := m2.Cleanup(); err != nil {
		t.Fatal(err)
	}
}

func TestJBODDirFailsAtRuntime(t *testing.T) {
	a, b := t.TempDir(), filepath.Join(t.TempDir(), "b")
	m := jbodModule(t, a, b)
	cfg := storagetest.DefaultConfig()
	logs := make([]kernel.Log, 4)
	for p := range int32(4) {
		l, err := m.Open(jtp(p), [16]byte{}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.AppendLeader(storagetest.Batch(0, 1, 1, 10)); err != nil {
			t.Fatal(err)
		}
		logs[p] = l
	}
	// Partitions 1 and 3 are in b. Lose b as Kafka's tests do: the directory
	// replaced by a file.
	if err := os.RemoveAll(b); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b, []byte("gone"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the flush loop to fail b", func() bool {
		ds := m.Dirs()
		return len(ds) == 2 && ds[1].Err != nil
	})
	if ds := m.Dirs(); ds[0].Err != nil || len(ds[0].Partitions) != 2 || len(ds[1].Partitions) != 0 {
		t.Fatalf("dirs after the failure: %+v", ds)
	}
	for p, l := range logs {
		_, aerr := l.AppendLeader(storagetest.Batch(0, 1, 1, 10))
		rr, rerr := l.Read(0, 1<<20, l.LogEndOffset(), true)
		if rerr == nil {
			rr.Release()
		}
		terr := l.Truncate(0)
		if p%2 == 0 {
			if aerr != nil || rerr != nil {
				t.Fatalf("partition %d of the healthy dir: append %v, read %v", p, aerr, rerr)
			}
			continue
		}
		for what, err := range map[string]error{"append": aerr, "read": rerr, "truncate": terr} {
			if !errors.Is(err, kernel.ErrLogOffline) {
				t.Fatalf("partition %d of the failed dir: %s %v, want ErrLogOffline", p, what, err)
			}
		}
	}
	// Opens of its partitions fail; new partitions go to the healthy dir.
	if _, err := m.Open(jtp(1), [16]byte{}, cfg); !errors.Is(err, kernel.ErrLogOffline) {
		t.Fatalf("reopen in the failed dir: %v", err)
	}
	for p := int32(10); p < 13; p++ {
		if _, err := m.Open(jtp(p), [16]byte{}, cfg); err != nil {
			t.Fatal(err)
		}
		if got := dirOf(t, jtp(p), a); got != a {
			t.Fatal(got)
		}
	}
	if err := m.Remove(jtp(3)); err != nil {
		t.Fatalf("remove in the failed dir: %v", err)
	}
	if err := m.Stop(t.Context()); err != nil {
		t.Fatalf("stop with a failed dir: %v", err)
	}
}

func TestNoteErrClassifies(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		fail bool
	}{
		{"EIO", &fs.PathError{Op: "write", Path: "x", Err: syscall.EIO}, true},
		{"EROFS", fmt.Errorf("flush: %w", &fs.PathError{Op: "open", Path: "x", Err: syscall.EROFS}), true},
		{"ENOSPC with the dir there", &fs.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}, false},
		{"not a file error", kernel.ErrInvalidProducerEpoch, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := OpenStore(t.TempDir(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			s.noteErr(c.err)
			if got := s.failed() != nil; got != c.fail {
				t.Fatalf("failed %v, want %v", got, c.fail)
			}
		})
	}
}

// moveDone waits until tp is in dir to and no move of it is left.
func moveDone(t *testing.T, m *Module, tp kernel.TopicPartition, to string) {
	t.Helper()
	waitFor(t, 20*time.Second, "the move to finish", func() bool {
		m.dirs.mu.Lock()
		defer m.dirs.mu.Unlock()
		return m.dirs.moves[tp] == nil && m.dirs.where[tp] != nil && m.dirs.where[tp].dir == to
	})
}

func TestJBODMoveUnderAppends(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	m := jbodModule(t, a, b)
	cfg := storagetest.DefaultConfig()
	cfg.SegmentBytes = 4096 // many segments
	tp := jtp(0)
	l, err := m.Open(tp, [16]byte{1}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.AssignEpoch(3, 0); err != nil {
		t.Fatal(err)
	}
	// An idempotent producer and an open transaction, whose state must move along.
	if _, err := l.AppendProducer(storagetest.ProducerBatch(7, 0, 0, 2, 1, false), kernel.SeqRange{First: 0, Last: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendProducer(storagetest.ProducerBatch(8, 0, 0, 1, 1, true), kernel.SeqRange{First: 0, Last: 0}); err != nil {
		t.Fatal(err)
	}
	for range 200 {
		if _, err := l.AppendLeader(storagetest.Batch(0, 1, 5, 50)); err != nil {
			t.Fatal(err)
		}
	}
	l.SetHighWatermark(500)
	// Appends go on during the move, through the handle the partition holds.
	stop := make(chan struct{})
	appended := make(chan int64)
	go func() {
		n := int64(0)
		for {
			select {
			case <-stop:
				appended <- n
				return
			default:
			}
			if _, err := l.AppendLeader(storagetest.Batch(0, 1, 1, 50)); err != nil {
				t.Error(err)
				appended <- n
				return
			}
			n++
		}
	}()
	if code := m.dirs.alter(tp, b); code != 0 {
		t.Fatalf("alter: code %d", code)
	}
	moveDone(t, m, tp, b)
	close(stop)
	n := <-appended
	t.Logf("%d batches appended during the move", n)
	if want := int64(3 + 1000 + n); l.LogEndOffset() != want {
		t.Fatalf("log end %d after the move, want %d", l.LogEndOffset(), want)
	}
	if got := dirOf(t, tp, a, b); got != b {
		t.Fatalf("partition in %s", got)
	}
	rr, err := l.Read(0, 1<<30, l.LogEndOffset(), true)
	if err != nil {
		t.Fatal(err)
	}
	data, err := storagetest.ReadAll(rr)
	if err != nil {
		t.Fatal(err)
	}
	infos, err := storagetest.ParseAll(data)
	if err != nil {
		t.Fatal(err)
	}
	next := int64(0)
	for _, bi := range infos {
		if bi.Base != next {
			t.Fatalf("batch at %d, want %d", bi.Base, next)
		}
		next = bi.Last + 1
	}
	if next != l.LogEndOffset() {
		t.Fatalf("read up to %d of %d", next, l.LogEndOffset())
	}
	if es := l.Epochs(); len(es) != 1 || es[0].Epoch != 3 {
		t.Fatalf("epochs after the move: %+v", es)
	}
	if l.HighWatermark() != 500 {
		t.Fatalf("high watermark %d after the move", l.HighWatermark())
	}
	if ps, ok := l.Producer(7); !ok || ps.LastSequence != 1 {
		t.Fatalf("producer 7 after the move: %+v %v", ps, ok)
	}
	if fus, ok := l.FirstUnstableOffset(); !ok || fus != 2 {
		t.Fatalf("open transaction after the move: %d %v", fus, ok)
	}
	// Duplicate detection still works: the retried batch of producer 7.
	res, err := l.AppendProducer(storagetest.ProducerBatch(7, 0, 0, 2, 1, false), kernel.SeqRange{First: 0, Last: 1})
	if err != nil || !res.Duplicate {
		t.Fatalf("retried batch after the move: %+v %v", res, err)
	}
	for _, d := range []string{a, b} {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			if isFutureDir(e.Name()) || strings.HasSuffix(e.Name(), deleteDirSuffix) {
				t.Fatalf("left over: %s", filepath.Join(d, e.Name()))
			}
		}
	}
	if _, err := os.Stat(filepath.Join(b, tp.String(), movedMarker)); !os.IsNotExist(err) {
		t.Fatalf("marker left: %v", err)
	}
	// A restart finds it in b, whole.
	end := l.LogEndOffset()
	if err := m.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	m2 := jbodModule(t, a, b)
	l2, err := m2.Open(tp, [16]byte{1}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if l2.LogEndOffset() != end {
		t.Fatalf("log end %d after a restart, want %d", l2.LogEndOffset(), end)
	}
	if ps, ok := l2.Producer(7); !ok || ps.LastSequence != 1 {
		t.Fatalf("producer 7 after a restart: %+v %v", ps, ok)
	}
}

func TestJBODMoveAnswers(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	m := jbodModule(t, a, b)
	cfg := storagetest.DefaultConfig()
	if code := m.dirs.alter(jtp(0), "/no/such/dir"); code != kerr.LogDirNotFound.Code {
		t.Fatalf("unknown dir: %d", code)
	}
	// Not here yet: remembered, and the replica is created there.
	if code := m.dirs.alter(jtp(0), b); code != kerr.ReplicaNotAvailable.Code {
		t.Fatalf("absent replica: %d", code)
	}
	if _, err := m.Open(jtp(0), [16]byte{}, cfg); err != nil {
		t.Fatal(err)
	}
	if got := dirOf(t, jtp(0), a, b); got != b {
		t.Fatalf("created in %s, want the preferred %s", got, b)
	}
	// Already there: nothing to do.
	if code := m.dirs.alter(jtp(0), b+"/"); code != 0 {
		t.Fatalf("same dir: %d", code)
	}
	if long := (kernel.TopicPartition{Topic: strings.Repeat("x", 249), Partition: 0}); m.dirs.alter(long, b) != kerr.InvalidTopicException.Code {
		t.Fatal("a name too long for the copy's directory was taken")
	}
	// A move and its reversal before it ends: the replica ends where the last ask
	// says, with nothing left over.
	l, _ := m.Open(jtp(0), [16]byte{}, cfg)
	for range 100 {
		if _, err := l.AppendLeader(storagetest.Batch(0, 1, 10, 100)); err != nil {
			t.Fatal(err)
		}
	}
	if code := m.dirs.alter(jtp(0), a); code != 0 {
		t.Fatal(code)
	}
	if code := m.dirs.alter(jtp(0), b); code != 0 {
		t.Fatal(code)
	}
	moveDone(t, m, jtp(0), b)
	if got := dirOf(t, jtp(0), a, b); got != b || l.LogEndOffset() != 1000 {
		t.Fatalf("in %s with log end %d", got, l.LogEndOffset())
	}
	// Removal during a move cancels it.
	if code := m.dirs.alter(jtp(0), a); code != 0 {
		t.Fatal(code)
	}
	if err := m.Remove(jtp(0)); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{a, b} {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), "j-0") {
				t.Fatalf("left over after the removal: %s", filepath.Join(d, e.Name()))
			}
		}
	}
}

// TestJBODMoveCrashRecovery: the states a crash can leave a move in, at the next
// start.
func TestJBODMoveCrashRecovery(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	cfg := storagetest.DefaultConfig()
	m := jbodModule(t, a, b)
	l, err := m.Open(jtp(0), [16]byte{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if _, err := l.AppendLeader(storagetest.Batch(0, 1, 1, 10)); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(a, jtp(0).String())
	// A copy interrupted before its swap: deleted.
	future := filepath.Join(b, jtp(0).String()+".00112233445566778899aabbccddeeff"+futureDirSuffix)
	copyDir(t, src, future)
	m2 := jbodModule(t, a, b)
	if _, err := os.Stat(future); !os.IsNotExist(err) {
		t.Fatalf("future dir kept: %v", err)
	}
	if err := m2.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	// A crash after the copy was renamed into place: the marked copy wins.
	final := filepath.Join(b, jtp(0).String())
	copyDir(t, src, final)
	if err := os.WriteFile(filepath.Join(final, movedMarker), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	m3 := jbodModule(t, a, b)
	if got := dirOf(t, jtp(0), a, b); got != b {
		t.Fatalf("kept %s", got)
	}
	if _, err := os.Stat(filepath.Join(final, movedMarker)); !os.IsNotExist(err) {
		t.Fatal("marker kept")
	}
	l3, err := m3.Open(jtp(0), [16]byte{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if l3.LogEndOffset() != 10 {
		t.Fatalf("log end %d", l3.LogEndOffset())
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestJBODSwapHoldsOnlyItsStripe: a replica move's swap (which fsyncs) holds up the
// opens and removals of the partitions sharing its lock stripe only; a partition in
// another stripe opens and is removed meanwhile.
func TestJBODSwapHoldsOnlyItsStripe(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	m := jbodModule(t, a, b)
	moving := jtp(0)
	other := jtp(1)
	for m.dirs.swapMu(other) == m.dirs.swapMu(moving) {
		other.Partition++
	}
	mu := m.dirs.swapMu(moving)
	mu.Lock() // as swap holds it
	done := make(chan error, 1)
	go func() {
		_, err := m.Open(other, [16]byte{}, storagetest.DefaultConfig())
		if err == nil {
			err = m.Remove(other)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("an open in another stripe waited for the swap")
	}
	mu.Unlock()
}

// TestJBODDirReserve: each log dir is held to the free-space reserve on its own: a
// log in a dir below it refuses writes (kernel.SpaceLog, wrapping ErrDiskFull and
// naming the dir), a log in the other dir does not, and the refusal ends with the
// space back.
func TestJBODDirReserve(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	m := Info().New().(*Module)
	m.FlushCheckIntervalMs = 10
	fc := &fakeContext{dataDir: t.TempDir(), configs: map[string]string{
		"log.dirs": a + "," + b, "sluice.data.dir.reserve.bytes": "1000"}}
	startModuleWith(t, m, fc)
	writable := func() string {
		var buf bytes.Buffer
		if err := fc.metrics.WriteText(&buf); err != nil {
			t.Fatal(err)
		}
		var lines []string
		for _, l := range strings.Split(buf.String(), "\n") {
			if strings.HasPrefix(l, "sluice_log_dir_writable{") {
				lines = append(lines, strings.ReplaceAll(strings.ReplaceAll(l, a, "a"), b, "b"))
			}
		}
		slices.Sort(lines)
		return strings.Join(lines, "; ")
	}
	free := map[string]*atomic.Int64{a: new(atomic.Int64), b: new(atomic.Int64)}
	for _, s := range m.dirs.stores {
		f := free[s.dir]
		f.Store(1 << 40)
		s.guard.SetStatfs(func(string) (int64, error) { return f.Load(), nil })
	}
	cfg := storagetest.DefaultConfig()
	logs := map[string]kernel.Log{}
	for p := range int32(2) {
		l, err := m.Open(jtp(p), [16]byte{}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		logs[dirOf(t, jtp(p), a, b)] = l
	}
	sample := func() {
		for _, s := range m.dirs.stores {
			if _, err := s.guard.Sample(); err != nil {
				t.Fatal(err)
			}
		}
	}
	free[a].Store(10)
	sample()
	if got, want := writable(), `sluice_log_dir_writable{dir="a"} 0; sluice_log_dir_writable{dir="b"} 1`; got != want {
		t.Errorf("metric: %s, want %s", got, want)
	}
	err := logs[a].(kernel.SpaceLog).AdmitWrite(1)
	if !errors.Is(err, kernel.ErrDiskFull) || !strings.Contains(err.Error(), a) {
		t.Fatalf("log in the low dir: %v, want ErrDiskFull naming %s", err, a)
	}
	if err := logs[b].(kernel.SpaceLog).AdmitWrite(1); err != nil {
		t.Fatalf("log in the other dir: %v", err)
	}
	free[a].Store(1 << 40)
	sample()
	if err := logs[a].(kernel.SpaceLog).AdmitWrite(1); err != nil {
		t.Fatalf("with the space back: %v", err)
	}
}
