package replication_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/brokerproc"
)

// Corrupt segments on a single broker (replication factor 1), in a broker process:
// nothing can take over, so the partition stays offline with KAFKA_STORAGE_ERROR
// until an operator deletes the damaged segment (DeleteRecords past it).

const offlineLine = "corrupt batch: partition log offline"

// procTopic creates topic (one partition, RF 1, small segments) on p and produces n
// numbered records in batches of 10 (acks=all).
func procTopic(t *testing.T, p *brokerproc.Proc, topic string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := p.Admin(t).CreateTopic(ctx, 1, 1, map[string]*string{"segment.bytes": strp("2048")}, topic)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		t.Fatalf("create topic: %v", err)
	}
	produceBatches(t, p.Client(t, kgo.DefaultProduceTopic(topic)), topic, 0, n, 10)
}

// consumeUntilError reads partition 0 of topic from offset from, one batch per fetch,
// keeping retriable errors: it checks the numbered records it gets and returns them
// with the first error other than a restarting broker's transient ones.
func consumeUntilError(t *testing.T, p *brokerproc.Proc, topic string, from int64) (got int64, err error) {
	t.Helper()
	cl := p.Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(from)}}),
		kgo.KeepRetryableFetchErrors(), kgo.FetchMaxPartitionBytes(64), kgo.FetchMaxWait(100*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	next := from
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			want := strconv.FormatInt(next, 10)
			if r.Offset != next || string(r.Key) != want || string(r.Value) != "value-"+want {
				t.Fatalf("record at %d: offset %d key %q value %q", next, r.Offset, r.Key, r.Value)
			}
			next++
		})
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) {
			// A restarted broker answers NOT_LEADER (or UNKNOWN_TOPIC_OR_PARTITION)
			// for a partition until its log is open, and LEADER_NOT_AVAILABLE while
			// its new incarnation, which left the ISR, is elected leader again:
			// transient, not the answer this helper looks for.
			if ferr == nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, kerr.LeaderNotAvailable) &&
				!errors.Is(err, kerr.NotLeaderForPartition) && !errors.Is(err, kerr.UnknownTopicOrPartition) {
				ferr = err
			}
		})
		if ferr != nil {
			return next - from, ferr
		}
	}
	return next - from, ctx.Err()
}

// sinceLastStart is the broker output of its last start.
func sinceLastStart(p *brokerproc.Proc) string {
	out := p.Stderr()
	return out[strings.LastIndex(out, "----- brokerproc: start #"):]
}

// TestProcSingleReplicaOffline: a flipped byte in a sealed segment of a single
// replica: a consumer from the start gets every record before the damaged batch,
// then KAFKA_STORAGE_ERROR at it; consumers after it get the same (the log is
// offline), the damage is logged once however many fetches hit it; DeleteRecords
// past the damaged segment brings the partition back and a consumer from there reads
// every later record.
func TestProcSingleReplicaOffline(t *testing.T) {
	p := brokerproc.Start(t, brokerproc.Options{})
	const n = 300
	procTopic(t, p, "one", n)
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	base := flipSealed(t, p.DataDir, "one")
	segs := segmentFiles(t, p.DataDir, "one")
	next, err := strconv.ParseInt(strings.TrimSuffix(filepath.Base(segs[2]), ".log"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	p.Restart(t)

	got, err := consumeUntilError(t, p, "one", 0)
	if got != base || !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("from 0: %d records then %v; want %d then KAFKA_STORAGE_ERROR", got, err, base)
	}
	for _, from := range []int64{base, next} {
		if got, err := consumeUntilError(t, p, "one", from); got != 0 || !errors.Is(err, kerr.KafkaStorageError) {
			t.Fatalf("from %d while offline: %d records then %v; want KAFKA_STORAGE_ERROR", from, got, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	waitOfflineLine(t, p)
	if out := sinceLastStart(p); strings.Count(out, offlineLine) != 1 || strings.Contains(out, "fetch read") {
		t.Fatalf("broker output: %d %q lines (want 1), fetch read errors: %v:\n%s", strings.Count(out, offlineLine), offlineLine, strings.Contains(out, "fetch read"), out)
	}
	// The operator's repair: delete the records up to the segment after the damage.
	res, err := p.Admin(t).DeleteRecords(ctx, kadmOffsets("one", 0, next))
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("delete records before %d: %v", next, err)
	}
	cl := p.Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"one": {0: kgo.NewOffset().At(next)}}))
	for off := next; off < n && ctx.Err() == nil; {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("after the repair: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != off || string(r.Value) != "value-"+strconv.FormatInt(off, 10) {
				t.Fatalf("after the repair: record at %d: offset %d value %q", off, r.Offset, r.Value)
			}
			off++
		})
	}
	if ctx.Err() != nil {
		t.Fatal("records after the repair not read within 30 s")
	}
	// Writes work again.
	produceBatches(t, p.Client(t, kgo.DefaultProduceTopic("one")), "one", n, 10, 10)
}

// TestProcUncleanShutdownOffline: SIGKILL during a produce, a torn batch at the end
// of the active segment and a flipped byte in an older, flushed segment. The restart
// recovers the torn tail (it is gone, the acked records are there) and says nothing
// of the older damage until a read reaches that batch: KAFKA_STORAGE_ERROR there,
// every record before it intact.
func TestProcUncleanShutdownOffline(t *testing.T) {
	p := brokerproc.Start(t, brokerproc.Options{})
	const n = 400
	procTopic(t, p, "torn", n)
	// The second segment is below the recovery point (flushed: recovery does not scan
	// it; its damage is found by a read).
	segs := segmentFiles(t, p.DataDir, "torn")
	if len(segs) < 4 {
		t.Fatalf("%d segments, want at least 4", len(segs))
	}
	third, _ := strconv.ParseInt(strings.TrimSuffix(filepath.Base(segs[2]), ".log"), 10, 64)
	deadline := time.Now().Add(30 * time.Second)
	for recoveryPoint(t, p.DataDir, "torn") < third {
		if time.Now().After(deadline) {
			t.Fatalf("recovery point %d not past offset %d within 30 s", recoveryPoint(t, p.DataDir, "torn"), third)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Produce in the background and SIGKILL the broker mid-way (the promises of the
	// records in flight are not waited for).
	var acked atomic.Int64
	acked.Store(n)
	cl := p.Client(t, kgo.DefaultProduceTopic("torn"))
	for i := n; i < n+200; i++ {
		cl.Produce(context.Background(), &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: []byte("value-" + strconv.Itoa(i))}, func(r *kgo.Record, err error) {
			for err == nil {
				cur := acked.Load()
				if r.Offset+1 <= cur || acked.CompareAndSwap(cur, r.Offset+1) {
					return
				}
			}
		})
		if i == n+20 {
			ackWait := time.Now().Add(30 * time.Second)
			for acked.Load() == n {
				if time.Now().After(ackWait) {
					t.Fatal("no record of the background produce acknowledged within 30 s")
				}
				time.Sleep(time.Millisecond)
			}
			p.Kill()
			break
		}
	}
	ackedN := acked.Load()
	base := flipSealed(t, p.DataDir, "torn")
	segs = segmentFiles(t, p.DataDir, "torn")
	last := segs[len(segs)-1]
	st, err := os.Stat(last)
	if err != nil {
		t.Fatal(err)
	}
	// A torn batch: the first 40 bytes of a batch (its length runs past the end).
	head, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(last, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(head[:40]); err != nil {
		t.Fatal(err)
	}
	f.Close()
	p.Restart(t)
	if st2, err := os.Stat(last); err != nil || st2.Size() != st.Size() {
		t.Fatalf("active segment after recovery: %v bytes (err %v), want %d (the torn batch cut)", st2.Size(), err, st.Size())
	}
	if strings.Contains(sinceLastStart(p), offlineLine) {
		t.Fatal("damage reported before any read reached it")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := p.Admin(t).ListEndOffsets(ctx, "torn")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("torn", 0); o.Err != nil || o.Offset < ackedN {
		t.Fatalf("log end %d (err %v) after the restart, %d records acked", o.Offset, o.Err, ackedN)
	}
	got, err := consumeUntilError(t, p, "torn", 0)
	if got != base || !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("from 0: %d records then %v; want %d then KAFKA_STORAGE_ERROR", got, err, base)
	}
	waitOfflineLine(t, p)
}

// waitOfflineLine waits until the broker's output of its last start has the offline
// line (the output is copied from a pipe: it may lag the answer) and checks it is
// there once.
func waitOfflineLine(t *testing.T, p *brokerproc.Proc) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(sinceLastStart(p), offlineLine) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if c := strings.Count(sinceLastStart(p), offlineLine); c != 1 {
		t.Fatalf("%d %q lines in the broker output, want 1", c, offlineLine)
	}
}

// recoveryPoint is topic-0's offset in the recovery-point-offset-checkpoint under dir
// (-1 when absent).
func recoveryPoint(t *testing.T, dir, topic string) int64 {
	t.Helper()
	var out int64 = -1
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.Name() != "recovery-point-offset-checkpoint" {
			return nil
		}
		b, _ := os.ReadFile(path)
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) == 3 && f[0] == topic && f[1] == "0" {
				out, _ = strconv.ParseInt(f[2], 10, 64)
			}
		}
		return nil
	})
	return out
}
