package groups_test

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluicehq/sluice/internal/testbroker"
)

var longCompaction = flag.Bool("compaction.long", false, "commit 100,000 offsets in TestOffsetsTopicStaysSmall (the CI form commits 12,000)")

// offsetsTopicBytes is the size of __consumer_offsets on the broker (DescribeLogDirs).
func offsetsTopicBytes(t *testing.T, ctx context.Context, adm *kadm.Client) int64 {
	t.Helper()
	dirs, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	dirs.Each(func(d kadm.DescribedLogDir) {
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			if p.Topic == "__consumer_offsets" {
				n += p.Size
			}
		})
	})
	return n
}

// TestOffsetsTopicStaysSmall: a few groups committing offsets over and over keep
// __consumer_offsets proportional to their live keys (the cleaner compacts it), and
// after a restart the groups read back exactly their last commits, replayed from the
// compacted log.
func TestOffsetsTopicStaysSmall(t *testing.T) {
	commits := 12000
	if *longCompaction {
		commits = 100000
	}
	b := testbroker.Start(t, testbroker.WithConfig(`
configs:
  offsets.topic.num.partitions: "1"
  offsets.topic.segment.bytes: "65536"
  log.cleaner.backoff.ms: "50"
`))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	adm := b.Admin(t)
	if _, err := adm.CreateTopic(ctx, 4, 1, nil, "events"); err != nil {
		t.Fatal(err)
	}
	const groups = 4
	last := make([]kadm.Offsets, groups)
	var wg sync.WaitGroup
	errs := make(chan error, groups)
	for g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			group := fmt.Sprintf("g%d", g)
			for i := range commits / groups / 4 {
				os := kadm.Offsets{}
				for p := range int32(4) {
					os.Add(kadm.Offset{Topic: "events", Partition: p, At: int64(i*10) + int64(p), LeaderEpoch: -1})
				}
				res, err := adm.CommitOffsets(ctx, group, os)
				if err == nil {
					err = res.Error()
				}
				if err != nil {
					errs <- fmt.Errorf("%s commit %d: %w", group, i, err)
					return
				}
				last[g] = os
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Uncompacted, the log holds every commit (about 100 bytes each); compacted, 16
	// live keys plus the uncleaned head (at most a couple of 64 KiB segments).
	const bound = 512 << 10
	deadline := time.Now().Add(60 * time.Second)
	for {
		size := offsetsTopicBytes(t, ctx, adm)
		if size < bound {
			t.Logf("__consumer_offsets: %d bytes after %d commits", size, commits)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("__consumer_offsets is %d bytes after %d commits, want < %d", size, commits, bound)
		}
		time.Sleep(100 * time.Millisecond) // the cleaner runs every 50 ms
	}

	b.Restart(t)
	adm = b.Admin(t)
	for g := range groups {
		group := fmt.Sprintf("g%d", g)
		var got kadm.OffsetResponses
		for {
			var err error
			got, err = adm.FetchOffsets(ctx, group)
			if err == nil && got.Error() == nil {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("fetch offsets of %s: %v %v", group, err, got.Error())
			}
			time.Sleep(50 * time.Millisecond) // the coordinator loads after the restart
		}
		last[g].Each(func(o kadm.Offset) {
			r, ok := got.Lookup("events", o.Partition)
			if !ok || r.At != o.At {
				t.Fatalf("%s events-%d: offset %d after restart, want %d", group, o.Partition, r.At, o.At)
			}
		})
	}
}
