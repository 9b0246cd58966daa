package replication_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/kernel"
)

// Corrupt segments in a cluster (offline.go): a replica whose log finds a bad batch
// goes offline; a leader resigns, a follower cuts its log at the damage, and both
// refetch from a healthy replica.

// produceBatches produces n numbered records in batches of per (one ProduceSync each,
// acks=all), so that a small segment.bytes rolls many segments.
func produceBatches(t *testing.T, cl *kgo.Client, topic string, from, n, per int) {
	t.Helper()
	for i := from; i < from+n; i += per {
		produceAll(t, cl, topic, i, min(per, from+n-i))
	}
}

// segmentFiles lists the .log files of partition 0 of topic under dir, oldest first.
func segmentFiles(t *testing.T, dir, topic string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Base(filepath.Dir(path)) == topic+"-0" && filepath.Ext(path) == ".log" {
			out = append(out, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// flipSealed flips one byte inside the records of the first batch of the second
// segment of topic's partition 0 under dir (a sealed segment: at least three exist)
// and returns that batch's base offset. The header still parses; the CRC fails.
func flipSealed(t *testing.T, dir, topic string) int64 {
	t.Helper()
	segs := segmentFiles(t, dir, topic)
	if len(segs) < 3 {
		t.Fatalf("%d segments of %s under %s, want at least 3", len(segs), topic, dir)
	}
	f, err := os.OpenFile(segs[1], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var hdr [70]byte
	if _, err := f.ReadAt(hdr[:], 0); err != nil {
		t.Fatal(err)
	}
	base := int64(binary.BigEndian.Uint64(hdr[:8]))
	hdr[65] ^= 0xff // past the 61-byte header: inside the first record
	if _, err := f.WriteAt(hdr[65:66], 65); err != nil {
		t.Fatal(err)
	}
	return base
}

// consumeAll reads partition 0 of topic from the start until n records came and
// checks each numbered record arrived once, in offset order, with its value.
func consumeAll(t *testing.T, cl *kgo.Client, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	got := 0
	for got < n && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(_ string, _ int32, err error) {
			if ctx.Err() == nil {
				t.Logf("fetch error: %v", err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			want := strconv.Itoa(got)
			if string(r.Key) != want || string(r.Value) != "value-"+want || r.Offset != int64(got) {
				t.Fatalf("record %d: offset %d key %q value %q", got, r.Offset, r.Key, r.Value)
			}
			got++
		})
	}
	if got != n {
		t.Fatalf("consumed %d records, want %d", got, n)
	}
}

// damagedCluster starts three brokers on segmentlog, creates topic (RF 3,
// min.insync.replicas 2, small segments), produces n acked records and waits until the
// replicas agree.
func damagedCluster(t *testing.T, topic string, n int, opts clusterOpts) (*rcluster, kernel.TopicPartition) {
	c := startClusterWith(t, 3, "segmentlog", nil, opts)
	c.createTopic(topic, 1, 3, map[string]*string{"min.insync.replicas": strp("2"), "segment.bytes": strp("2048")})
	tp := kernel.TopicPartition{Topic: topic}
	produceBatches(t, c.client(kgo.DefaultProduceTopic(topic)), topic, 0, n, 10)
	c.waitInSync(tp, 30*time.Second)
	return c, tp
}

// restartDamaged stops broker id, flips a byte in a sealed segment of its copy of
// tp (after a clean stop: the restarted broker has not verified anything yet) and
// starts it again; it returns the damaged batch's base offset.
func (c *rcluster) restartDamaged(id int32, tp kernel.TopicPartition) int64 {
	c.t.Helper()
	c.stop(id)
	base := flipSealed(c.t, c.nodes[id-1].dir, tp.Topic)
	c.restart(id)
	return base
}

// waitFollowing waits until broker id is in tp's ISR with the leader's log end,
// without reading its log (a read would verify it), in its own image and in the
// leader's, where it must also be unfenced: only then does the leader send a
// consumer in its rack to it.
func (c *rcluster) waitFollowing(id int32, tp kernel.TopicPartition) {
	c.t.Helper()
	c.eventually(30*time.Second, fmt.Sprintf("broker %d in the ISR of %s, caught up", id, tp), func() bool {
		pi := c.image(id).Partition(tp.Topic, tp.Partition)
		if pi.Leader < 0 || pi.Leader == id || !slices.Contains(pi.ISR, id) {
			return false
		}
		lim := c.image(pi.Leader)
		if lpi := lim.Partition(tp.Topic, tp.Partition); lpi == nil || lpi.Leader != pi.Leader || !slices.Contains(lpi.ISR, id) {
			return false
		}
		if b := lim.Brokers[id]; b == nil || b.Fenced {
			return false
		}
		lv, ok1 := c.repl(pi.Leader).Replica(tp)
		v, ok2 := c.repl(id).Replica(tp)
		return ok1 && ok2 && v.Log.LogEndOffset() == lv.Log.LogEndOffset()
	})
}

// TestClusterLeaderLogOffline: the leader's copy of a sealed segment is damaged. A
// consumer reading from the start gets every acked record once with its bytes: the
// leader finds the bad batch, resigns, another ISR member leads, and the old leader,
// now a follower, cuts its log at the damage, refetches and rejoins the ISR with the
// same bytes as the others.
func TestClusterLeaderLogOffline(t *testing.T) {
	const n = 300
	c, tp := damagedCluster(t, "dmg", n, clusterOpts{})
	pref := c.image(1).Partition(tp.Topic, 0).Replicas[0]
	base := c.restartDamaged(pref, tp)
	c.waitFollowing(pref, tp)
	// The damaged broker leads again (preferred election).
	adm := kadm.NewClient(c.client())
	c.eventually(30*time.Second, fmt.Sprintf("broker %d leads again", pref), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{tp.Topic: {0: {}}})
		for _, nd := range c.running() {
			if c.image(nd.id).Partition(tp.Topic, 0).Leader != pref {
				return false
			}
		}
		v, ok := c.repl(pref).Replica(tp)
		return ok && !v.Follower
	})
	cons := c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{tp.Topic: {0: kgo.NewOffset().At(0)}}))
	consumeAll(t, cons, n)
	// The consumer may finish at the new leader before every image names it.
	c.eventually(30*time.Second, fmt.Sprintf("a leader other than the damaged broker %d", pref), func() bool {
		l := c.leaderOf(tp)
		return l != pref && l >= 0
	})
	logs := c.nodes[pref-1].logs
	for _, line := range []string{"corrupt batch: partition log offline", "resigning leadership", "log cut at the corrupt batch; online again"} {
		c.eventually(30*time.Second, fmt.Sprintf("broker %d logs %q", pref, line), func() bool { return logs.contains(line) })
	}
	// Writes go on (acks=all, min.insync.replicas 2), and the old leader rejoins with
	// identical bytes.
	produceBatches(t, c.client(kgo.DefaultProduceTopic(tp.Topic)), tp.Topic, n, 20, 10)
	c.eventually(30*time.Second, fmt.Sprintf("broker %d back in the ISR", pref), func() bool {
		return slices.Contains(c.image(pref).Partition(tp.Topic, 0).ISR, pref)
	})
	c.sameBytes(tp)
	consumeAll(t, c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{tp.Topic: {0: kgo.NewOffset().At(0)}})), n+20)
	t.Logf("damaged batch at offset %d", base)
}

// TestClusterFollowerLogOffline: a follower's copy of a sealed segment is damaged and
// it serves a consumer in its rack (follower reads). The read finds the bad batch;
// the follower cuts its log there and refetches from the leader, which stays leader;
// the consumer gets every acked record once, and the follower ends in the ISR with
// the leader's bytes.
func TestClusterFollowerLogOffline(t *testing.T) {
	const n = 300
	c, tp := damagedCluster(t, "fdmg", n, clusterOpts{racks: []string{"r1", "r2", "r3"}, replication: "follower_reads: true"})
	leader := c.leaderOf(tp)
	follower := leader%3 + 1
	c.restartDamaged(follower, tp)
	c.waitFollowing(follower, tp)
	cons := c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{tp.Topic: {0: kgo.NewOffset().At(0)}}),
		kgo.Rack(fmt.Sprintf("r%d", follower)))
	consumeAll(t, cons, n)
	logs := c.nodes[follower-1].logs
	for _, line := range []string{"corrupt batch: partition log offline", "log cut at the corrupt batch; online again"} {
		c.eventually(30*time.Second, fmt.Sprintf("broker %d logs %q", follower, line), func() bool { return logs.contains(line) })
	}
	if l := c.leaderOf(tp); l != leader {
		t.Fatalf("leader moved from %d to %d on a follower's damage", leader, l)
	}
	c.eventually(30*time.Second, fmt.Sprintf("broker %d in the ISR", follower), func() bool {
		return slices.Contains(c.image(leader).Partition(tp.Topic, 0).ISR, follower)
	})
	c.sameBytes(tp)
}

// sameBytes waits until every replica of tp has the leader's log end and HW, then
// checks their logs are byte for byte the leader's. (Leader epochs may differ: an
// epoch in which no record was written is in the caches of the brokers that led or
// followed through it, not in a log rebuilt by refetching.)
func (c *rcluster) sameBytes(tp kernel.TopicPartition) {
	c.t.Helper()
	var pi *kernel.PartitionImage
	c.eventually(30*time.Second, fmt.Sprintf("replicas of %s at the leader's log end", tp), func() bool {
		pi = c.image(c.running()[0].id).Partition(tp.Topic, tp.Partition)
		if pi.Leader < 0 {
			return false
		}
		lv, ok := c.repl(pi.Leader).Replica(tp)
		if !ok || lv.HW != lv.Log.LogEndOffset() {
			return false
		}
		for _, r := range pi.Replicas {
			v, ok := c.repl(r).Replica(tp)
			if !ok || v.Log.LogEndOffset() != lv.Log.LogEndOffset() || v.HW != lv.HW || v.Log.LogStartOffset() != lv.Log.LogStartOffset() {
				return false
			}
		}
		return true
	})
	lv, _ := c.repl(pi.Leader).Replica(tp)
	want := logBytes(c.t, lv.Log)
	for _, r := range pi.Replicas {
		v, _ := c.repl(r).Replica(tp)
		if got := logBytes(c.t, v.Log); !bytes.Equal(got, want) {
			c.t.Fatalf("%s: replica %d's log (%d bytes) differs from leader %d's (%d bytes)", tp, r, len(got), pi.Leader, len(want))
		}
	}
}
