//go:build linux

package brokerproc_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/brokerproc"
)

// TestProc starts a broker under a file limit, produces and reads back a record across a
// SIGKILL and a restart, and checks the process figures the scale tests rely on.
func TestProc(t *testing.T) {
	p := brokerproc.Start(t, brokerproc.Options{NoFile: 4096})
	limits, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", p.PID()))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(limits), "Max open files            4096                 4096") {
		t.Fatalf("NoFile not applied:\n%s", limits)
	}
	if p.RSS() <= 0 || p.PeakRSS() < p.RSS() || p.FDs() <= 0 {
		t.Fatalf("rss %d peak %d fds %d", p.RSS(), p.PeakRSS(), p.FDs())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := p.Client(t, kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("t"))
	if err := cl.ProduceSync(ctx, kgo.StringRecord("v")).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	p.Kill()
	if p.Running() || p.RSS() != 0 || p.FDs() != -1 {
		t.Fatalf("after kill: running %v rss %d fds %d", p.Running(), p.RSS(), p.FDs())
	}
	p.Restart(t)
	rd := p.Client(t, kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for {
		fs := rd.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("no record after restart: %v", err)
		}
		if recs := fs.Records(); len(recs) > 0 {
			if string(recs[0].Value) != "v" {
				t.Fatalf("read %q, want v", recs[0].Value)
			}
			return
		}
	}
}

// TestStartNoWaitExit checks that a start that fails is reported by Wait with its output.
func TestStartNoWaitExit(t *testing.T) {
	p := brokerproc.StartNoWait(t, brokerproc.Options{Config: "no_such_key: 1\n"})
	exited, err := p.Wait(60 * time.Second)
	if !exited || err == nil {
		t.Fatalf("exited %v err %v, want a failed exit", exited, err)
	}
	if !strings.Contains(p.Stderr(), "no_such_key") {
		t.Fatalf("output does not name the bad key:\n%s", p.Stderr())
	}
}

// TestTmpfs checks the mount's size is what was asked.
func TestTmpfs(t *testing.T) {
	dir := brokerproc.Tmpfs(t, 8<<20)
	if err := os.WriteFile(dir+"/big", make([]byte, 9<<20), 0o644); err == nil {
		t.Fatal("wrote 9 MiB to an 8 MiB tmpfs")
	}
}
