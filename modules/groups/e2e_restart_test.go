package groups_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/testbroker"
)

// restartFixture commits offsets to a few groups (by a consumer group and by simple
// commits, overwritten, deleted per partition and per group) and returns what every
// group must have afterwards.
func restartFixture(t *testing.T, b *testbroker.Broker) map[string]map[string]map[int32]int64 {
	t.Helper()
	const topic = "rs"
	adm := b.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	createTopic(t, adm, topic, 3)
	produceN(t, b.Client(t, kgo.DefaultProduceTopic(topic)), topic, 90)

	// A consumer group consumes everything and commits on leaving.
	seen := newSeenSet()
	c := startConsumer(t, b, "rc1", seen, fastGroupOpts("g-consumer", topic)...)
	waitFor(t, 10*time.Second, "90 records consumed", func() string {
		seen.mu.Lock()
		defer seen.mu.Unlock()
		if len(seen.seen) < 90 {
			return fmtMap(map[string]int{"seen": len(seen.seen)})
		}
		return ""
	})
	c.stop()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]map[int32]int64{"g-consumer": {topic: {}}}
	ends.Each(func(o kadm.ListedOffset) { want["g-consumer"][topic][o.Partition] = o.Offset })

	commit := func(group string, ps map[int32]int64) {
		t.Helper()
		var o kadm.Offsets
		for p, at := range ps {
			o.Add(kadm.Offset{Topic: topic, Partition: p, At: at, LeaderEpoch: -1, Metadata: "md-" + group})
		}
		resp, err := adm.CommitOffsets(ctx, group, o)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Fatalf("commit to %s: %v", group, err)
		}
	}
	commit("g-simple", map[int32]int64{0: 1, 1: 2, 2: 3})
	commit("g-simple", map[int32]int64{0: 10, 1: 20}) // overwrites
	want["g-simple"] = map[string]map[int32]int64{topic: {0: 10, 1: 20, 2: 3}}
	commit("g-partly", map[int32]int64{0: 5, 1: 6})
	del, err := adm.DeleteOffsets(ctx, "g-partly", kadm.TopicsSet{topic: {1: {}}})
	if err == nil {
		err = del.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	want["g-partly"] = map[string]map[int32]int64{topic: {0: 5}}
	commit("g-deleted", map[int32]int64{0: 7})
	dr, err := adm.DeleteGroups(ctx, "g-deleted")
	if err == nil {
		err = dr.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	want["g-deleted"] = map[string]map[int32]int64{}
	checkOffsets(t, adm, want, "before the restart")
	return want
}

func checkOffsets(t *testing.T, adm *kadm.Client, want map[string]map[string]map[int32]int64, when string) {
	t.Helper()
	for g, w := range want {
		// The coordinator loads its partitions after a restart; FetchOffsets retries
		// COORDINATOR_LOAD_IN_PROGRESS, so one call suffices.
		got := fetchAll(t, adm, g)
		for tp, ps := range got {
			if len(ps) == 0 {
				delete(got, tp)
			}
		}
		if !equalOffsets(got, w) {
			t.Errorf("%s: offsets of %s = %v, want %v", when, g, got, w)
		}
	}
}

// TestOffsetsSurviveRestart: committed offsets (and their deletions) are the same
// after a graceful restart, and a consumer of the group resumes at them.
func TestOffsetsSurviveRestart(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig(fastGroupConfig))
	want := restartFixture(t, b)
	b.Restart(t)
	adm := b.Admin(t)
	checkOffsets(t, adm, want, "after the restart")

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ds, err := adm.DescribeGroups(ctx, "g-consumer")
	if err != nil {
		t.Fatal(err)
	}
	if d := ds["g-consumer"]; d.Err != nil || d.State != "Empty" {
		t.Errorf("g-consumer after the restart: %v, state %q; want Empty", d.Err, d.State)
	}

	// A consumer of the group starts at the committed offsets, not at the start.
	produceN(t, b.Client(t, kgo.DefaultProduceTopic("rs")), "rs", 30)
	seen := newSeenSet()
	c := startConsumer(t, b, "rc2", seen, fastGroupOpts("g-consumer", "rs")...)
	waitFor(t, 10*time.Second, "the 30 new records consumed", func() string {
		seen.mu.Lock()
		defer seen.mu.Unlock()
		if len(seen.seen) < 30 {
			return fmtMap(map[string]int{"seen": len(seen.seen)})
		}
		return ""
	})
	c.mu.Lock()
	for p, first := range c.first {
		if w := want["g-consumer"]["rs"][p]; first != w {
			t.Errorf("after the restart partition %d was consumed from offset %d, want the committed %d", p, first, w)
		}
	}
	c.mu.Unlock()
}

// TestOffsetsRebuiltFromLog: with the offset store deleted while the broker is down,
// the coordinator rebuilds it from __consumer_offsets, deletions included.
func TestOffsetsRebuiltFromLog(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig(fastGroupConfig))
	want := restartFixture(t, b)
	b.Stop()
	dir := filepath.Join(b.DataDir, "groups", "offsets")
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("offset store: %v", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	b.Restart(t)
	checkOffsets(t, b.Admin(t), want, "after rebuilding the store")
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("offset store not recreated: %v", err)
	}
}

// TestRestartWithLiveConsumers restarts the broker under two consuming members and a
// producer: the members rejoin (the group's membership is not persisted), every
// acknowledged record is consumed, and no partition's committed offset goes back.
func TestRestartWithLiveConsumers(t *testing.T) {
	const topic, group, parts = "rl", "g-restart-live", 4
	b, adm := startWithTopic(t, fastGroupConfig, topic, parts)
	prod := startProducer(t, b, topic, parts)
	seen := newSeenSet()
	opts := fastGroupOpts(group, topic)
	c1 := startConsumer(t, b, "l1", seen, opts...)
	c2 := startConsumer(t, b, "l2", seen, opts...)
	stableAssignment(t, adm, group, topic, parts, []*consumer{c1, c2})
	var before map[string]map[int32]int64
	waitFor(t, 10*time.Second, "offsets committed for every partition", func() string {
		before = fetchAll(t, adm, group)
		if len(before[topic]) != parts {
			return fmtMap(before[topic])
		}
		return ""
	})

	t0 := time.Now()
	b.Restart(t)
	adm = b.Admin(t)
	after := stableAssignment(t, adm, group, topic, parts, []*consumer{c1, c2})
	t.Logf("after the restart: %v (stable %v after the restart began)", after, time.Since(t0))
	seen.mu.Lock()
	from := len(seen.seen)
	seen.mu.Unlock()
	waitFor(t, 10*time.Second, "consumption after the restart", func() string {
		seen.mu.Lock()
		defer seen.mu.Unlock()
		if len(seen.seen) < from+100 {
			return "no progress"
		}
		return ""
	})
	acked := prod.Stop()
	seen.waitConsumed(t, 15*time.Second, acked)
	c1.stop()
	c2.stop()
	final := fetchAll(t, adm, group)
	for p, at := range before[topic] {
		if final[topic][p] < at {
			t.Errorf("partition %d: committed offset %d after the restart, %d before", p, final[topic][p], at)
		}
	}
}
