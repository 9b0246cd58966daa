package segmentlog

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/storage/storagetest"
)

// flipByte XORs one byte of a file at pos.
func flipByte(t testing.TB, path string, pos int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := []byte{0}
	if _, err := f.ReadAt(b, pos); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x5a
	if _, err := f.WriteAt(b, pos); err != nil {
		t.Fatal(err)
	}
}

// batchSize is the size of one fill batch (2 records of 30 bytes).
var batchSize = int64(len(storagetest.Batch(0, 0, 2, 30)))

// cleanLog fills a log of recoveryConfig with n batches (4 per segment), closes the
// store cleanly and returns its dir.
func cleanLog(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	s := openRaw(t, dir)
	l := mustOpen(t, s, rtp, [16]byte{}, recoveryConfig())
	fill(t, l, n)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func segPath(dir string, base int64) string {
	return filepath.Join(dir, rtp.String(), segmentName(base)+logSuffix)
}

func TestVerifyCorruptSealedSegment(t *testing.T) {
	for _, tc := range []struct {
		name string
		at   int64 // offset inside the second batch of segment 8 (offsets 10-11)
	}{
		{"record bytes", batchSize + 70},
		{"crc field", batchSize + 18},
		{"batch length", batchSize + 10},
		{"magic", batchSize + 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := cleanLog(t, 10) // segments 0 (0-7), 8 (8-15), 16 (16-19)
			flipByte(t, segPath(dir, 8), tc.at)
			s := openTestStore(t, dir)
			l := mustOpen(t, s, rtp, [16]byte{}, recoveryConfig())
			if got := l.LogEndOffset(); got != 20 {
				t.Fatalf("log end %d after a clean open, want 20 (the damage is found lazily)", got)
			}
			// Reads below the damage are fine.
			rr, err := l.Read(0, 4*batchSize, 20, true)
			if err != nil || rr.Size != 4*batchSize {
				t.Fatalf("read below the damage: size %d, err %v", rr.Size, err)
			}
			rr.Release()
			// A read over it takes the log offline.
			_, err = l.Read(8, 1<<20, 20, true)
			if !errors.Is(err, kernel.ErrLogOffline) {
				t.Fatalf("read over the damage: err %v, want ErrLogOffline", err)
			}
			var d *Damage
			if !errors.As(err, &d) || d.Position != batchSize || !strings.HasSuffix(d.Path, segmentName(8)+logSuffix) {
				t.Fatalf("damage %+v, want position %d of segment 8", d, batchSize)
			}
			// Now everything is refused, reads and appends alike.
			if _, err := l.Read(0, 1<<20, 20, true); !errors.Is(err, kernel.ErrLogOffline) {
				t.Fatalf("read after going offline: %v", err)
			}
			if _, err := l.AppendLeader(storagetest.Batch(0, 5000, 1, 10)); !errors.Is(err, kernel.ErrLogOffline) {
				t.Fatalf("append after going offline: %v", err)
			}
			// Truncate cuts the damage off (whatever offset it is asked for above it).
			if err := l.Truncate(l.LogEndOffset()); err != nil {
				t.Fatal(err)
			}
			if got := l.LogEndOffset(); got != 10 {
				t.Fatalf("log end %d after cutting the damage, want 10", got)
			}
			if _, err := os.Stat(segPath(dir, 16)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("segment after the damage still there: %v", err)
			}
			rr, err = l.Read(0, 1<<20, 10, true)
			if err != nil || rr.Size != 5*batchSize {
				t.Fatalf("read after the cut: size %d, err %v", rr.Size, err)
			}
			rr.Release()
			if res, err := l.AppendLeader(storagetest.Batch(0, 5000, 1, 10)); err != nil || res.BaseOffset != 10 {
				t.Fatalf("append after the cut: %+v, %v", res, err)
			}
		})
	}
}

// A read pinning the damaged segment keeps its bytes while Truncate copies the prefix.
func TestVerifyTruncateWhilePinned(t *testing.T) {
	dir := cleanLog(t, 10)
	flipByte(t, segPath(dir, 8), 2*batchSize+70) // batch 12-13
	s := openTestStore(t, dir)
	l := mustOpen(t, s, rtp, [16]byte{}, recoveryConfig())
	pinned, err := l.Read(8, 2*batchSize, 20, true) // 8-11: before the damage
	if err != nil {
		t.Fatal(err)
	}
	defer pinned.Release()
	before, err := storagetest.ReadAll(pinned)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Read(8, 1<<20, 20, true); !errors.Is(err, kernel.ErrLogOffline) {
		t.Fatalf("read over the damage: %v", err)
	}
	if err := l.Truncate(16); err != nil {
		t.Fatal(err)
	}
	if got := l.LogEndOffset(); got != 12 {
		t.Fatalf("log end %d, want 12", got)
	}
	after, err := storagetest.ReadAll(pinned)
	if err != nil || !bytes.Equal(before, after) {
		t.Fatalf("pinned bytes changed under a truncation (err %v)", err)
	}
}

// Each batch is checked once per process: a byte flipped on disk after a read checked
// it is not noticed by later reads (the cost is paid once), while damage in unread
// bytes is.
func TestVerifyOncePerBatch(t *testing.T) {
	dir := cleanLog(t, 10)
	s := openTestStore(t, dir)
	l := mustOpen(t, s, rtp, [16]byte{}, recoveryConfig())
	rr, err := l.Read(0, 8*batchSize, 20, true) // segments 0 and 8 whole
	if err != nil {
		t.Fatal(err)
	}
	rr.Release()
	lg := l.(*Log)
	for _, sg := range lg.segs[:2] {
		if !sg.ver.checked(0, sg.size) {
			t.Fatalf("segment %d not marked checked after a read of all of it", sg.base)
		}
	}
	if lg.segs[2].ver.checked(0, lg.segs[2].size) {
		t.Fatal("unread segment 16 marked checked")
	}
	flipByte(t, segPath(dir, 8), 70)
	if rr, err = l.Read(0, 8*batchSize, 20, true); err != nil {
		t.Fatalf("re-read of checked bytes: %v", err)
	}
	rr.Release()
	flipByte(t, segPath(dir, 16), batchSize+70)
	if _, err := l.Read(16, 1<<20, 20, true); !errors.Is(err, kernel.ErrLogOffline) {
		t.Fatalf("read of unchecked damaged bytes: %v", err)
	}
}

// Appended and recovered bytes are trusted; bytes loaded at a clean open are not.
func TestVerifyTrust(t *testing.T) {
	dir := cleanLog(t, 6) // segments 0 (0-7), 8 (8-11, active)
	s := openRaw(t, dir)
	l := mustOpen(t, s, rtp, [16]byte{}, recoveryConfig())
	lg := l.(*Log)
	act := lg.active()
	if act.ver.checked(0, act.size) {
		t.Fatal("loaded active segment marked checked")
	}
	from := act.size
	fill(t, l, 1)
	if !act.ver.checked(from, act.size) {
		t.Fatal("appended bytes not trusted")
	}
	crash(t, s) // unclean: the next open recovers from the recovery point
	s = openTestStore(t, dir)
	lg = mustOpen(t, s, rtp, [16]byte{}, recoveryConfig()).(*Log)
	if a := lg.active(); !a.ver.checked(0, a.size) {
		t.Fatal("recovered segment not marked checked")
	}
}

func TestVerifySpans(t *testing.T) {
	type op struct{ a, b int64 }
	for _, tc := range []struct {
		name   string
		add    []op
		want   string // spans after
		prefix int64
		gapsOf op
		gaps   string
	}{
		{"empty", nil, "[]", 0, op{0, 100}, "[0,100)"},
		{"prefix", []op{{0, 10}}, "[{0 10}]", 10, op{0, 100}, "[10,100)"},
		{"merge adjacent", []op{{0, 10}, {10, 20}}, "[{0 20}]", 20, op{5, 30}, "[20,30)"},
		{"island", []op{{50, 60}}, "[{50 60}]", 0, op{0, 100}, "[0,50)[60,100)"},
		{"bridge", []op{{0, 10}, {20, 30}, {40, 50}, {5, 45}}, "[{0 50}]", 50, op{0, 50}, ""},
		{"unordered", []op{{40, 50}, {20, 30}, {0, 10}}, "[{0 10} {20 30} {40 50}]", 10, op{15, 45}, "[15,20)[30,40)"},
		{"inside", []op{{0, 100}}, "[{0 100}]", 100, op{20, 30}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v verifyState
			v.trust(1000)
			for _, o := range tc.add {
				v.add(o.a, o.b)
			}
			if got := fmt.Sprint(v.spans); got != tc.want {
				t.Fatalf("spans %s, want %s", got, tc.want)
			}
			if v.prefix.Load() != tc.prefix {
				t.Fatalf("prefix %d, want %d", v.prefix.Load(), tc.prefix)
			}
			var got strings.Builder
			_ = v.gaps(tc.gapsOf.a, tc.gapsOf.b, func(a, b int64) error {
				fmt.Fprintf(&got, "[%d,%d)", a, b)
				return nil
			})
			if got.String() != tc.gaps {
				t.Fatalf("gaps %s, want %s", got.String(), tc.gaps)
			}
		})
	}
}

// Readers racing over cold ranges of the same segments, an appender and a truncation
// of the damage: run under -race.
func TestVerifyHammer(t *testing.T) {
	dir := cleanLog(t, 40)
	flipByte(t, segPath(dir, 64), 70) // offsets 64-65
	s := openTestStore(t, dir)
	l := mustOpen(t, s, rtp, [16]byte{}, recoveryConfig())
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				off := int64((g*7+i*3)%32) * 2
				rr, err := l.Read(off, 3*batchSize, 64, true)
				if err != nil && !errors.Is(err, kernel.ErrLogOffline) {
					t.Errorf("read %d: %v", off, err)
					return
				}
				rr.Release()
			}
		}()
	}
	wg.Wait()
	if _, err := l.Read(60, 1<<20, 80, true); !errors.Is(err, kernel.ErrLogOffline) {
		t.Fatalf("read over the damage: %v", err)
	}
	if err := l.Truncate(80); err != nil {
		t.Fatal(err)
	}
	if got := l.LogEndOffset(); got != 64 {
		t.Fatalf("log end %d, want 64", got)
	}
	rr, err := l.Read(0, 1<<20, 64, true)
	if err != nil || rr.Size != 32*batchSize {
		t.Fatalf("read after the cut: %d bytes, %v", rr.Size, err)
	}
	rr.Release()
}

// BenchmarkReadVerify measures what the lazy CRC check adds to a fetch: each op is one
// 1 MiB Read (then Release) of a log of 1 KiB-record batches loaded at a clean open and
// page-cached. cold forgets the checks before every op (outside the timer), so each
// Read checks the CRCs of its bytes: the first fetch of a range after a restart. warm
// reads ranges already checked: every later fetch (two atomic loads per chunk).
func BenchmarkReadVerify(b *testing.B) {
	dir := b.TempDir()
	s, err := OpenStore(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	cfg := storagetest.DefaultConfig()
	cfg.SegmentBytes = 64 << 20
	l, err := s.Open(rtp, [16]byte{}, cfg)
	if err != nil {
		b.Fatal(err)
	}
	batch := storagetest.Batch(0, 1, 16, 1024)
	for n := 0; n < 128<<20/len(batch); n++ {
		if _, err := l.AppendLeader(batch); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	s, err = OpenStore(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	l, err = s.Open(rtp, [16]byte{}, cfg)
	if err != nil {
		b.Fatal(err)
	}
	lg := l.(*Log)
	leo := l.LogEndOffset()
	perMiB := int64(1<<20/len(batch)) * 16 // offsets per 1 MiB read
	read := func(b *testing.B, i int) {
		off := (int64(i) * perMiB) % (leo - perMiB)
		rr, err := l.Read(off, 1<<20, leo, true)
		if err != nil {
			b.Fatal(err)
		}
		rr.Release()
	}
	for i := 0; i < int(leo/perMiB); i++ { // page-cache everything, check everything
		read(b, i)
	}
	for _, mode := range []string{"cold", "warm"} {
		b.Run(mode, func(b *testing.B) {
			b.SetBytes(1 << 20)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if mode == "cold" {
					b.StopTimer()
					for _, sg := range lg.segs[:len(lg.segs)-1] {
						sg.ver.trust(sg.size)
					}
					b.StartTimer()
				}
				read(b, i)
			}
		})
	}
}

// BenchmarkRecoveryCRC times the open of a partition after a crash with no usable
// recovery point: every segment is scanned and its CRCs checked (256 MiB of 16 KiB
// batches in 64 MiB segments, page-cached). MB/s is the recovery rate; per GiB it
// is 1024/rate seconds.
func BenchmarkRecoveryCRC(b *testing.B) {
	dir := b.TempDir()
	s, err := OpenStore(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	cfg := storagetest.DefaultConfig()
	cfg.SegmentBytes = 64 << 20
	l, err := s.Open(rtp, [16]byte{}, cfg)
	if err != nil {
		b.Fatal(err)
	}
	batch := storagetest.Batch(0, 1, 16, 1024)
	for n := 0; n < 256<<20/len(batch); n++ {
		if _, err := l.AppendLeader(batch); err != nil {
			b.Fatal(err)
		}
	}
	size := l.Size()
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(size)
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		for _, f := range []string{cleanShutdownFile, recoveryCheckpointFile} {
			if err := os.Remove(filepath.Join(dir, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		s, err := OpenStore(dir, nil)
		if err != nil {
			b.Fatal(err)
		}
		l, err := s.Open(rtp, [16]byte{}, cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if l.Size() != size {
			b.Fatalf("recovered %d bytes of %d", l.Size(), size)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
