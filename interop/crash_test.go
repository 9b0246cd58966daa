package interop

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// crashAck is one acknowledged record: its sequence number and the offset the broker gave it.
type crashAck struct {
	seq    int64
	offset int64
}

const (
	crashTopic      = "crash-acks1"
	crashPartitions = 2
	crashRounds     = 6    // SIGKILL in rounds 1-5, SIGTERM under load in the last one
	crashAcksPerRun = 3000 // acknowledged records per round before the kill
)

func crashValue(p int32, seq int64) []byte {
	return []byte(fmt.Sprintf("p%d-seq%010d-%s", p, seq, strings.Repeat("z", 48)))
}

func crashParse(p int32, v []byte) (int64, bool) {
	var gotP int32
	var seq int64
	if _, err := fmt.Sscanf(string(v), "p%d-seq%010d-", &gotP, &seq); err != nil || gotP != p {
		return 0, false
	}
	return seq, string(v) == string(crashValue(p, seq))
}

// TestCrashAcks1 produces with acks=1 (no idempotence) from a goroutine, SIGKILLs the
// broker once a few thousand records are acknowledged while the producer is still going,
// restarts it on the same data dir and ports, and checks every partition from offset 0:
// offsets contiguous, sequence numbers strictly increasing (no duplicate, no reordering,
// acknowledged or not), and every acknowledged record present at the offset it was
// acknowledged with. Five kill rounds (uncompressed, gzip, snappy, lz4, zstd) and one
// SIGTERM round, all under load, on a topic with 64 KiB segments; then an idle graceful
// restart and the same check.
func TestCrashAcks1(t *testing.T) {
	t.Parallel()
	b := startBrokerConfig(t, os.Getenv("SLUICE_INTEROP_CRASH_CONFIG"))
	// Small segments and indexes: the kills land in a log of many rolled segments.
	createTopicConfigs(t, b.addr, crashTopic, crashPartitions,
		map[string]string{"segment.bytes": "65536", "segment.index.bytes": "4096"})

	numbered := newSeqRecords(crashTopic, crashPartitions, crashValue)

	// Each round compresses differently, so recovery meets every codec's batches.
	codecs := []kgo.CompressionCodec{kgo.NoCompression(), kgo.GzipCompression(), kgo.SnappyCompression(),
		kgo.Lz4Compression(), kgo.ZstdCompression()}
	for round := 1; round <= crashRounds; round++ {
		before := numbered.ackedCount()
		numbered.resetFailures() // counted per round: a kill fails what is in flight
		cl, err := kgo.NewClient(
			kgo.SeedBrokers(b.addr),
			kgo.ClientID("sluice-interop-crash"),
			kgo.RequiredAcks(kgo.LeaderAck()),
			kgo.DisableIdempotentWrite(),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerBatchCompression(codecs[(round-1)%len(codecs)]),
			kgo.MaxBufferedRecords(2000),
			kgo.ProducerBatchMaxBytes(16<<10), // many small requests: more chances to die mid-append
		)
		if err != nil {
			t.Fatalf("kgo.NewClient: %v", err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		run := numbered.start(cl, ctx)
		stopProducer := func() {
			cancel()
			run.halt()
			cl.Close() // fails whatever is still buffered; no retry can reach a restarted broker
			run.wait()
		}

		ok := pollUntil(60*time.Second, func() bool { return numbered.ackedCount()-before >= crashAcksPerRun })
		preKillFailed, preKillErr := numbered.failures()
		if !ok {
			stopProducer()
			t.Fatalf("round %d: only %d records acknowledged within 60s (failures: %d, first: %v)",
				round, numbered.ackedCount()-before, preKillFailed, preKillErr)
		}
		if preKillFailed > 0 {
			t.Errorf("round %d: %d records failed before the kill, first: %v", round, preKillFailed, preKillErr)
		}
		how := "SIGKILL"
		if round == crashRounds {
			how = "SIGTERM"
			b.stop() // fails the test unless the broker exits 0 within 20s
		} else {
			b.kill()
		}
		stopProducer()
		failedNow, _ := numbered.failures()
		t.Logf("round %d: %s with the producer running; %d acknowledged this round, %d failed in flight",
			round, how, numbered.ackedCount()-before, failedNow-preKillFailed)

		b.start()
		_, acked := numbered.snapshot()
		verifyCrash(t, b.addr, fmt.Sprintf("after %s (round %d)", how, round), acked)
		if t.Failed() {
			return
		}
	}

	b.stop()
	b.start()
	_, final := numbered.snapshot()
	verifyCrash(t, b.addr, "after a graceful restart", final)

	// The log really is many segments (Kafka layout: <topic>-<partition>/<base>.log).
	segments := 0
	_ = filepath.WalkDir(b.dataDir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".log") &&
			filepath.Base(filepath.Dir(path)) == crashTopic+"-0" {
			segments++
		}
		return nil
	})
	t.Logf("partition 0: %d segment files with segment.bytes=65536", segments)
	if segments < 3 {
		t.Errorf("partition 0 has %d .log segment files under %s, want several (segment.bytes=65536)",
			segments, b.dataDir)
	}
}

// verifyCrash reads every partition from offset 0 and checks it against the acknowledged
// records.
func verifyCrash(t *testing.T, addr, when string, acked [][]crashAck) {
	t.Helper()
	parts := make([]int32, crashPartitions)
	for i := range parts {
		parts[i] = int32(i)
	}
	got := fetchAll(t, addr, crashTopic, parts, 60*time.Second)
	for _, p := range parts {
		errs := 0
		report := func(format string, args ...any) {
			t.Helper()
			errs++
			if errs <= 10 {
				t.Errorf("%s: partition %d: %s", when, p, fmt.Sprintf(format, args...))
			}
		}
		recs := got[p]
		seqAt := map[int64]int64{} // offset → seq
		prev := int64(-1)
		for i, r := range recs {
			if r.Offset != int64(i) {
				report("record %d has offset %d: offsets are not contiguous from 0", i, r.Offset)
				break
			}
			seq, ok := crashParse(p, r.Value)
			if !ok {
				report("offset %d: unexpected value %q", r.Offset, r.Value)
				continue
			}
			if seq <= prev {
				report("offset %d: seq %d after seq %d (duplicate or reordered)", r.Offset, seq, prev)
			}
			prev = seq
			seqAt[r.Offset] = seq
		}
		for _, a := range acked[p] {
			seq, ok := seqAt[a.offset]
			switch {
			case !ok:
				report("acknowledged seq %d at offset %d is missing (partition has %d records)", a.seq, a.offset, len(recs))
			case seq != a.seq:
				report("acknowledged seq %d at offset %d, but that offset holds seq %d", a.seq, a.offset, seq)
			}
		}
		if errs > 10 {
			t.Errorf("%s: partition %d: %d more problems", when, p, errs-10)
		}
		t.Logf("%s: partition %d: %d records, %d acknowledged ones checked", when, p, len(recs), len(acked[p]))
	}
}
