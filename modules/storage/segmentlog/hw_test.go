package segmentlog

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/kernel"
)

func readHWFile(t *testing.T, dir string) string {
	t.Helper()
	return string(mustReadFile(t, filepath.Join(dir, hwCheckpointFile)))
}

func wantHW(t *testing.T, l kernel.Log, want int64) {
	t.Helper()
	if got := l.HighWatermark(); got != want {
		t.Fatalf("HighWatermark %d, want %d", got, want)
	}
}

// TestHighWatermarkCheckpoint: replication-offset-checkpoint holds every partition's
// high watermark in Kafka's checkpoint format, is rewritten only when one changed,
// and is read back at open (clamped to what recovery kept).
func TestHighWatermarkCheckpoint(t *testing.T) {
	dir := t.TempDir()
	s, l, lo := openPair(t, dir, 5, 2) // LEO 10 and 4
	l.SetHighWatermark(6)
	if err := s.writeHWCheckpoint(); err != nil {
		t.Fatal(err)
	}
	if got, want := readHWFile(t, dir), "0\n2\nother 0 0\nrecover 3 6\n"; got != want {
		t.Fatalf("checkpoint %q, want %q", got, want)
	}
	ino := inode(t, filepath.Join(dir, hwCheckpointFile))
	l.SetHighWatermark(6)
	if err := s.writeHWCheckpoint(); err != nil {
		t.Fatal(err)
	}
	if inode(t, filepath.Join(dir, hwCheckpointFile)) != ino {
		t.Fatal("an unchanged checkpoint was rewritten")
	}
	lo.SetHighWatermark(3)
	if err := lo.Close(); err != nil { // a closed log's HW is remembered
		t.Fatal(err)
	}
	l.SetHighWatermark(8)
	if err := s.writeHWCheckpoint(); err != nil {
		t.Fatal(err)
	}
	if got, want := readHWFile(t, dir), "0\n2\nother 0 3\nrecover 3 8\n"; got != want {
		t.Fatalf("checkpoint %q, want %q", got, want)
	}
	lo = mustOpen(t, s, otherTP, [16]byte{}, recoveryConfig())
	wantHW(t, lo, 3)
	if err := s.Remove(otherTP); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := readHWFile(t, dir), "0\n1\nrecover 3 8\n"; got != want {
		t.Fatalf("checkpoint after Remove and Close %q, want %q", got, want)
	}

	s = openRaw(t, dir)
	l = mustOpen(t, s, rtp, [16]byte{}, recoveryConfig())
	wantHW(t, l, 8)
	// A checkpointed HW past what a crash kept is clamped to the recovered log end.
	l.SetHighWatermark(10)
	if err := s.writeHWCheckpoint(); err != nil {
		t.Fatal(err)
	}
	crash(t, s)
	garble(t, filepath.Join(dir, rtp.String(), segmentName(8)+logSuffix), 20) // its only batch, 8-9
	s = openRaw(t, dir)
	l = mustOpen(t, s, rtp, [16]byte{}, recoveryConfig())
	if l.LogEndOffset() != 8 {
		t.Fatalf("LEO %d after recovery, want 8", l.LogEndOffset())
	}
	wantHW(t, l, 8)
	crash(t, s)

	// An unreadable checkpoint is ignored (the HWs are derived state), and replaced at
	// the next write.
	if err := os.WriteFile(filepath.Join(dir, hwCheckpointFile), []byte("0\n3\nrecover x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s = openTestStore(t, dir)
	l = mustOpen(t, s, rtp, [16]byte{}, recoveryConfig())
	wantHW(t, l, 0)
	l.SetHighWatermark(2)
	if err := s.writeHWCheckpoint(); err != nil {
		t.Fatal(err)
	}
	if got, want := readHWFile(t, dir), "0\n1\nrecover 3 2\n"; got != want {
		t.Fatalf("checkpoint %q, want %q", got, want)
	}
	// A partition directory that is gone does not take the remembered HW of the
	// removed incarnation.
	if err := s.Remove(rtp); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, s, rtp, [16]byte{}, recoveryConfig())
	fill(t, l, 2)
	wantHW(t, l, 0)
}
