//go:build linux

// Package diskfull runs a broker process on a small tmpfs and fills it, as a full
// volume would: what must keep working does, writes resume when space returns, and a
// start on a volume with too little room is refused with a message.
package diskfull

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/brokerproc"
)

const (
	volume  = 256 << 20
	reserve = 64 << 20
)

// eventually polls cond every 50 ms until it holds or 30 s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 30 s: %s", what)
		}
		time.Sleep(50 * time.Millisecond) // polling interval, not synchronisation
	}
}

// produceOnce produces one record with no retries and returns the outcome.
func produceOnce(t *testing.T, p *brokerproc.Proc, topic, value string) error {
	t.Helper()
	cl := p.Client(t, kgo.DisableIdempotentWrite(), kgo.RecordRetries(0), kgo.RecordDeliveryTimeout(10*time.Second))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(value)}).FirstErr()
}

// consume reads topic's partition 0 from its start until n records came, and returns
// their values.
func consume(t *testing.T, p *brokerproc.Proc, topic string, n int) []string {
	t.Helper()
	cl := p.Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []string
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records of %s", len(got), n, topic)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch %s: %v", topic, err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

// TestDiskFull fills the broker's volume below sluice.data.dir.reserve.bytes: produce
// answers KAFKA_STORAGE_ERROR while reads, DeleteRecords and DeleteTopics work; a
// restart there starts; below half the reserve the start is refused with a message
// naming the config; with the ballast gone it starts and every acknowledged record
// is there, and writes work again.
func TestDiskFull(t *testing.T) {
	vol := brokerproc.Tmpfs(t, volume)
	opts := brokerproc.Options{
		DataDir: filepath.Join(vol, "data"),
		Config:  fmt.Sprintf("configs: {sluice.data.dir.reserve.bytes: %q}\n", fmt.Sprint(reserve)),
	}
	p := brokerproc.Start(t, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	adm := p.Admin(t)
	for _, topic := range []string{"keep", "drop"} {
		res, err := adm.CreateTopic(ctx, 1, 1, nil, topic)
		if err == nil {
			err = res.Err
		}
		if err != nil {
			t.Fatalf("create %s: %v", topic, err)
		}
	}
	const n = 100
	cl := p.Client(t)
	for i := range n {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "keep", Value: fmt.Appendf(nil, "v%d", i)}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "drop", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	// Below the reserve: writes refused, the rest works.
	brokerproc.FillTo(t, filepath.Join(vol, "ballast-1"), reserve-16<<20)
	// Until the guard's next sample (once a second) produce still works: those
	// "probe" records are acknowledged and must be kept.
	probes := 0
	eventually(t, "produce refused with KAFKA_STORAGE_ERROR", func() bool {
		err := produceOnce(t, p, "keep", "probe")
		if err == nil {
			probes++
		}
		return errors.Is(err, kerr.KafkaStorageError)
	})
	if got := consume(t, p, "keep", n); got[0] != "v0" || got[n-1] != fmt.Sprintf("v%d", n-1) {
		t.Fatalf("read while full: %q ... %q", got[0], got[n-1])
	}
	dr, err := adm.DeleteRecords(ctx, kadm.Offsets{"keep": {0: {Topic: "keep", Partition: 0, At: n / 2}}})
	if err == nil {
		err = dr.Error()
	}
	if err != nil {
		t.Fatalf("DeleteRecords while full: %v", err)
	}
	dt, err := adm.DeleteTopics(ctx, "drop")
	if err == nil {
		err = dt.Error()
	}
	if err != nil {
		t.Fatalf("DeleteTopics while full: %v", err)
	}

	// A restart below the reserve (above half of it) starts, still refusing writes.
	p.Restart(t)
	if err := produceOnce(t, p, "keep", "refused"); !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("produce after a restart below the reserve: %v, want KAFKA_STORAGE_ERROR", err)
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}

	// Below half the reserve the broker refuses to start, and says why.
	brokerproc.FillTo(t, filepath.Join(vol, "ballast-2"), reserve/2-8<<20)
	refused := brokerproc.StartNoWait(t, opts)
	exited, err := refused.Wait(60 * time.Second)
	if !exited || err == nil {
		t.Fatalf("start below half the reserve: exited %v, err %v", exited, err)
	}
	if out := refused.Stderr(); !strings.Contains(out, "sluice.data.dir.reserve.bytes") {
		t.Fatalf("refused start does not name sluice.data.dir.reserve.bytes:\n%s", out)
	}

	// Space back: it starts, writes work, and every record not deleted is there.
	for _, b := range []string{"ballast-1", "ballast-2"} {
		if err := os.Remove(filepath.Join(vol, b)); err != nil {
			t.Fatal(err)
		}
	}
	p = brokerproc.Start(t, opts)
	if err := produceOnce(t, p, "keep", "after"); err != nil {
		t.Fatalf("produce with space back: %v", err)
	}
	got := consume(t, p, "keep", n/2+probes+1)
	for i, v := range got {
		want := "probe"
		switch {
		case i < n/2:
			want = fmt.Sprintf("v%d", n/2+i)
		case i == len(got)-1:
			want = "after"
		}
		if v != want {
			t.Fatalf("record %d after the refill: %q, want %q (of %q)", i, v, want, got)
		}
	}
	md, err := p.Admin(t).ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if md.Has("drop") {
		t.Fatal("topic deleted while full is back")
	}
}
