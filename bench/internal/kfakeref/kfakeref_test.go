package kfakeref

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestRefusesBadOptions(t *testing.T) {
	for _, o := range []Options{
		{Port: -1},
		{Port: 70000},
		{Mode: Ceiling, DataDir: "/tmp/x"},
		{Mode: Ceiling, SyntheticCompression: "brotli"},
		{Mode: Ceiling, SyntheticRecordBytes: -1},
		{Mode: 7},
	} {
		if c, err := Start(o); err == nil {
			c.Close()
			t.Errorf("Start(%+v) succeeded", o)
		}
	}
	if _, err := ParseMode("fast"); err == nil {
		t.Error(`ParseMode("fast") succeeded`)
	}
	for _, s := range []string{"reference", "ceiling", "blackhole"} {
		if _, err := ParseMode(s); err != nil {
			t.Errorf("ParseMode(%q): %v", s, err)
		}
	}
}

// Both modes answer a real client on 127.0.0.1; the ceiling acknowledges produce and
// serves synthetic records of the size asked for.
func TestModes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ref, err := Start(Options{Mode: Reference, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(ref.ListenAddrs()...), kgo.DefaultProduceTopic("r"),
		kgo.AllowAutoTopicCreation(), kgo.ConsumeTopics("r"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("stored")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if recs := pollRecords(ctx, t, cl); len(recs) != 1 || string(recs[0].Value) != "stored" {
		t.Fatalf("reference read back %d records", len(recs))
	}

	ceil, err := Start(Options{Mode: Ceiling, SyntheticRecordBytes: 37, SyntheticCompression: "lz4"})
	if err != nil {
		t.Fatal(err)
	}
	defer ceil.Close()
	cl2, err := kgo.NewClient(kgo.SeedBrokers(ceil.ListenAddrs()...), kgo.DefaultProduceTopic("c"),
		kgo.AllowAutoTopicCreation(), kgo.ConsumeTopics("c"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	if err := cl2.ProduceSync(ctx, &kgo.Record{Value: []byte("discarded")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	recs := pollRecords(ctx, t, cl2)
	if len(recs) < 2 {
		t.Fatalf("ceiling served %d records", len(recs))
	}
	for _, r := range recs {
		if len(r.Value) != 37 {
			t.Fatalf("ceiling served a %d-byte value, want 37", len(r.Value))
		}
	}
}

// pollRecords polls until a fetch returns records (the client may see the topic before
// the fake's auto-creation reaches its metadata: those fetch errors are retried).
func pollRecords(ctx context.Context, t *testing.T, cl *kgo.Client) []*kgo.Record {
	t.Helper()
	for {
		fs := cl.PollFetches(ctx)
		if recs := fs.Records(); len(recs) > 0 {
			return recs
		}
		if err := ctx.Err(); err != nil {
			t.Fatalf("no records: %v (last fetch error: %v)", err, fs.Err())
		}
	}
}
