//go:build linux

package scaletest

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/brokerproc"
)

// TestAcceptOutOfDescriptors holds more connections than the broker has descriptors
// for: accept fails with EMFILE, and the broker must neither die nor spin nor flood
// its log (one line per 10 s), and must serve again once the connections close. The
// admin listener starves too while descriptors are out, so the metric is read after.
func TestAcceptOutOfDescriptors(t *testing.T) {
	const noFile = 256
	p := brokerproc.Start(t, brokerproc.Options{NoFile: noFile})
	began := time.Now()
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	// The kernel completes the handshakes into the listen backlog whether or not the
	// broker accepts, so these dials succeed; the broker's accepts run out of numbers.
	for i := 0; i < noFile+64; i++ {
		c, err := net.DialTimeout("tcp", p.Addr, 5*time.Second)
		if err != nil {
			break // the backlog is full too: enough
		}
		held = append(held, c)
	}
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(p.Stderr(), "accept failed; backing off") {
		if time.Now().After(deadline) {
			t.Fatalf("no accept failure logged with %d connections held (broker fds %d)", len(held), p.FDs())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if fds := p.FDs(); fds > noFile {
		t.Fatalf("broker holds %d descriptors, limit %d", fds, noFile)
	}
	n := len(held)
	for _, c := range held {
		c.Close()
	}
	held = nil

	// Served again: a produce and a read through a new client.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := p.Client(t, kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("after-emfile"), kgo.ConsumeTopics("after-emfile"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err := cl.ProduceSync(ctx, kgo.StringRecord("v")).FirstErr(); err != nil {
		t.Fatalf("produce after the descriptors came back: %v", err)
	}
	for got := false; !got; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("no record read back after the descriptors came back")
		}
		got = len(fs.Records()) > 0
	}
	if !p.Running() {
		t.Fatal("broker exited")
	}
	var errs float64
	for errs == 0 {
		if errs = acceptErrors(t, p.AdminAddr); errs > 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("sluice_accept_errors_total stayed 0")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Backing off, not spinning: 5 ms doubling to 1 s makes a few retries a second.
	if limit := 20 + 2*time.Since(began).Seconds(); errs > limit {
		t.Fatalf("%v failed accepts in %v: the accept loop spins (want at most %v)", errs, time.Since(began).Round(time.Second), limit)
	}
	// Rate-limited: at most one line per 10 s window since the start.
	lines := strings.Count(p.Stderr(), "accept failed; backing off")
	if limit := 1 + int(time.Since(began)/(10*time.Second)); lines > limit {
		t.Fatalf("%d accept failure lines in %v, want at most %d", lines, time.Since(began).Round(time.Second), limit)
	}
	t.Logf("%d connections held; %v accept errors counted, %d lines logged", n, errs, lines)
}

// acceptErrors reads sluice_accept_errors_total from the admin listener (0 when it
// cannot be read yet).
func acceptErrors(t *testing.T, admin string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(resp.Body); err != nil {
		return 0
	}
	for line := range strings.Lines(b.String()) {
		if v, ok := strings.CutPrefix(line, "sluice_accept_errors_total "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	return 0
}
