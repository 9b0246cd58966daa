package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/brokerproc"
)

// runLog runs `sluice log ARGS` in process and returns its exit status and output.
func runLog(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	rc := run(append([]string{"log"}, args...), &out, &errb)
	return rc, out.String(), errb.String()
}

// binLog runs `sluice log ARGS` with the built binary and returns its exit status.
func binLog(t *testing.T, args ...string) (int, string) {
	t.Helper()
	out, err := exec.Command(brokerproc.Binary(t), append([]string{"log"}, args...)...).CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &ee):
		return ee.ExitCode(), string(out)
	}
	t.Fatalf("run sluice log: %v", err)
	return 0, ""
}

func TestLogVerifyUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		rc   int
	}{
		{"no dir", []string{"verify"}, 2},
		{"two dirs", []string{"verify", "a", "b"}, 2},
		{"missing dir", []string{"verify", filepath.Join(t.TempDir(), "nope")}, 2},
		{"bad flag", []string{"verify", "--bogus", t.TempDir()}, 2},
		{"empty dir", []string{"verify", t.TempDir()}, 0},
		{"help", []string{"help"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if rc, out, errs := runLog(tc.args...); rc != tc.rc {
				t.Fatalf("rc %d, want %d\n%s%s", rc, tc.rc, out, errs)
			}
		})
	}
}

// TestLogVerifyRepair writes a topic of many small segments through a real broker,
// flips a byte in a sealed segment, and checks the command end to end: the damage is
// reported (exit 1, in process and through the binary), --repair is refused while the
// broker holds the data dir, works once it is stopped, the dir then verifies clean,
// and the restarted broker serves the records before the damage and takes new ones.
func TestLogVerifyRepair(t *testing.T) {
	p := brokerproc.Start(t, brokerproc.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	const topic, n = "verify-me", 60
	adm := p.Admin(t)
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"segment.bytes": kadm.StringPtr("1024")}, topic); err != nil {
		t.Fatal(err)
	}
	cl := p.Client(t, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
	for i := range n {
		if err := cl.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("record-%03d-%s", i, strings.Repeat("x", 200)))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	pdir := filepath.Join(p.DataDir, topic+"-0")
	segs, err := filepath.Glob(filepath.Join(pdir, "*.log"))
	if err != nil || len(segs) < 4 {
		t.Fatalf("want at least 4 segments, got %v (%v)", segs, err)
	}
	sort.Strings(segs)
	if rc, out, _ := runLog("verify", p.DataDir); rc != 0 || !strings.Contains(out, "0 damaged segments") {
		t.Fatalf("clean dir while running: rc %d\n%s", rc, out)
	}
	// Damage the second segment's first batch's records (one record per batch, about
	// 280 bytes: byte 100 is in its record).
	victim := segs[1]
	b, err := os.ReadFile(victim)
	if err != nil {
		t.Fatal(err)
	}
	b[100] ^= 0x5a
	if err := os.WriteFile(victim, b, 0o644); err != nil {
		t.Fatal(err)
	}
	rc, out, errs := runLog("verify", "--repair", p.DataDir)
	if rc != 2 || !strings.Contains(errs, fmt.Sprintf("pid %d", p.PID())) || out != "" {
		t.Fatalf("--repair beside a running broker: rc %d, stdout %q, stderr %q", rc, out, errs)
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{p.DataDir, pdir} {
		rc, out := binLog(t, "verify", dir)
		if rc != 1 || !strings.Contains(out, "damaged: "+victim+": position 0") || !strings.Contains(out, "1 damaged segments") {
			t.Fatalf("binary verify %s: rc %d\n%s", dir, rc, out)
		}
	}
	rc, out, errs = runLog("verify", "--repair", p.DataDir)
	if rc != 1 || !strings.Contains(out, "repaired: "+victim) {
		t.Fatalf("--repair: rc %d\n%s%s", rc, out, errs)
	}
	if rc, out, errs := runLog("verify", p.DataDir); rc != 0 {
		t.Fatalf("after repair: rc %d\n%s%s", rc, out, errs)
	}
	if dm, _ := filepath.Glob(filepath.Join(pdir, "*.damaged")); len(dm) < 3 {
		t.Fatalf("damaged files %v: want the segment and its successors kept", dm)
	}
	// The records of the first segment survive; the log ends at the second's base.
	var base int64
	if _, err := fmt.Sscanf(filepath.Base(victim), "%020d.log", &base); err != nil || base == 0 {
		t.Fatalf("segment name %s: %v", victim, err)
	}
	p.Restart(t)
	cons := p.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got int64
	for got < base {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", got, base, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			if want := fmt.Sprintf("record-%03d-", r.Offset); r.Offset != got || !strings.HasPrefix(string(r.Value), want) {
				t.Fatalf("record at %d: offset %d %.12q, want %q", got, r.Offset, r.Value, want)
			}
			got++
		})
	}
	offs, err := p.Admin(t).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := offs.Lookup(topic, 0); o.Offset != base {
		t.Fatalf("end offset after repair %d, want %d", o.Offset, base)
	}
	if r := cl.ProduceSync(ctx, kgo.StringRecord("after")); r.FirstErr() != nil {
		t.Fatal(r.FirstErr())
	}
}
