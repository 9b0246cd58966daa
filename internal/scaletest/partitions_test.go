//go:build linux

package scaletest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/brokerproc"
)

// partitionsShape is one run of TestManyPartitions: topics of perTopic partitions.
type partitionsShape struct {
	topics, perTopic int
	noFile           uint64
	maxRSS           int64  // asserted bound of the broker's peak RSS
	configs          string // the broker's extra configs, YAML map entries
}

func manyPartitionsShape() partitionsShape {
	if brokerproc.Full() {
		// The goal: 100,000 partitions under nofile 20,000, RSS under 1 GiB.
		// The heap in use stays under ~400 MiB, but without a soft limit the runtime
		// keeps the garbage of the reopens after a restart (1.4-1.5 GiB of RSS);
		// sluice.memory.limit.bytes is the operator's knob for that (docs/BENCHMARKS.md).
		return partitionsShape{topics: 100, perTopic: 1000, noFile: 20000, maxRSS: 1 << 30, configs: `sluice.memory.limit.bytes: "671088640"`}
	}
	// Four times more partitions than descriptors: the file cache must be what holds.
	return partitionsShape{topics: 2, perTopic: 1000, noFile: 512, maxRSS: 512 << 20}
}

// TestManyPartitions opens more partitions than the broker has descriptors for,
// writes one record to each and reads every one back, across a restart; it asserts the
// process's descriptors stay under its limit and its peak RSS under the bound, and
// logs the times (docs/BENCHMARKS.md, "Scale and resource safety").
func TestManyPartitions(t *testing.T) {
	s := manyPartitionsShape()
	total := s.topics * s.perTopic
	// pprof on the admin listener, so a long run can be profiled while it runs.
	p := brokerproc.Start(t, brokerproc.Options{NoFile: s.noFile, ReadyTimeout: 2 * time.Minute, StopTimeout: 2 * time.Minute,
		Config: "admin_pprof: true\nconfigs: {" + s.configs + "}\n"})
	t.Logf("broker %s, admin (pprof) %s", p.Addr, p.AdminAddr)
	adm := p.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()

	names := make([]string, s.topics)
	for i := range names {
		names[i] = fmt.Sprintf("scale-%03d", i)
	}
	created := createTopics(ctx, t, adm, int32(s.perTopic), 1, names)

	produceAll := func(round string) time.Duration {
		t.Helper()
		cl := p.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(s.perTopic*4),
			kgo.RequestTimeoutOverhead(time.Minute), kgo.RecordDeliveryTimeout(5*time.Minute))
		recs := make([]*kgo.Record, 0, total)
		for _, name := range names {
			for part := range s.perTopic {
				recs = append(recs, &kgo.Record{Topic: name, Partition: int32(part), Value: fmt.Appendf(nil, "%s-%s-%d", round, name, part)})
			}
		}
		return produceEach(ctx, t, cl, round, recs)
	}
	firstWrite := produceAll("a")
	if fds := p.FDs(); fds >= int(s.noFile) {
		t.Fatalf("broker holds %d descriptors, limit %d", fds, s.noFile)
	}

	readAll := func(want int) time.Duration {
		t.Helper()
		begin := time.Now()
		// End offsets say every partition holds the records written.
		ends, err := adm.ListEndOffsets(ctx, names...)
		if err != nil {
			t.Fatalf("ListEndOffsets: %v", err)
		}
		n := 0
		ends.Each(func(o kadm.ListedOffset) {
			if o.Err != nil {
				t.Errorf("end offset %s/%d: %v", o.Topic, o.Partition, o.Err)
				return
			}
			if o.Offset != int64(want) {
				t.Errorf("end offset %s/%d = %d, want %d", o.Topic, o.Partition, o.Offset, want)
			}
			n++
		})
		if n != total {
			t.Fatalf("end offsets for %d partitions, want %d", n, total)
		}
		// And the records read back, every one.
		cl := p.Client(t, kgo.ConsumeTopics(names...), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchMaxPartitionBytes(1<<10), kgo.FetchMaxBytes(8<<20))
		seen := make(map[string]struct{}, total*want)
		for len(seen) < total*want {
			fs := cl.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				t.Fatalf("read %d of %d records: %v", len(seen), total*want, err)
			}
			fs.EachError(func(topic string, part int32, err error) {
				t.Fatalf("fetch %s/%d: %v", topic, part, err)
			})
			fs.EachRecord(func(r *kgo.Record) {
				want := fmt.Sprintf("-%s-%d", r.Topic, r.Partition)
				if got := string(r.Value); len(got) != len(want)+1 || got[1:] != want {
					t.Fatalf("record %s/%d@%d = %q", r.Topic, r.Partition, r.Offset, got)
				}
				seen[string(r.Value)] = struct{}{}
			})
		}
		return time.Since(begin)
	}
	firstRead := readAll(1)
	firstPeak := p.PeakRSS()
	if firstPeak > s.maxRSS {
		t.Errorf("broker peak RSS %d MiB before the restart, bound %d MiB", firstPeak>>20, s.maxRSS>>20)
	}

	stopBegin := time.Now()
	if err := p.Stop(); err != nil { // orderly: SIGTERM, every log flushed and closed
		t.Fatalf("stop: %v", err)
	}
	stopped := time.Since(stopBegin)
	restartBegin := time.Now()
	p.Restart(t) // started again (it is stopped already)
	startup := time.Since(restartBegin)
	secondWrite := produceAll("b")
	secondRead := readAll(2)

	fds, rss, peak := p.FDs(), p.RSS(), p.PeakRSS()
	t.Logf("%d partitions (%d topics x %d), nofile %d: create %v, first write %v, read %v; stop %v, start to ready %v, write %v, read %v; fds %d, RSS %d MiB, peak RSS %d MiB before the restart, %d MiB after",
		total, s.topics, s.perTopic, s.noFile, created.Round(time.Millisecond), firstWrite.Round(time.Millisecond),
		firstRead.Round(time.Millisecond), stopped.Round(time.Millisecond), startup.Round(time.Millisecond), secondWrite.Round(time.Millisecond),
		secondRead.Round(time.Millisecond), fds, rss>>20, firstPeak>>20, peak>>20)
	if fds >= int(s.noFile) {
		t.Errorf("broker holds %d descriptors, limit %d", fds, s.noFile)
	}
	if peak > s.maxRSS {
		t.Errorf("broker peak RSS %d MiB, bound %d MiB", peak>>20, s.maxRSS>>20)
	}
}
