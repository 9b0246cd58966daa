//go:build linux

package replication_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/brokerproc"
	"github.com/sluicehq/sluice/kernel"
)

// TestClusterFollowerPausesOnLowDisk: a follower whose data dir falls below
// sluice.data.dir.reserve.bytes stops appending what it fetches and leaves the ISR,
// while acks=all writes go on with the other two; with space back it resumes, catches
// up and rejoins the ISR with the leader's bytes.
func TestClusterFollowerPausesOnLowDisk(t *testing.T) {
	const volume, reserve = 192 << 20, 48 << 20
	dirs := make([]string, 3)
	for i := range dirs {
		dirs[i] = filepath.Join(brokerproc.Tmpfs(t, volume), "data")
	}
	c := startClusterWith(t, 3, "segmentlog", map[string]string{
		"sluice.data.dir.reserve.bytes": fmt.Sprint(reserve),
		"replica.lag.time.max.ms":       "2000",
	}, clusterOpts{dirs: dirs})
	const topic = "lowdisk"
	c.createTopic(topic, 1, 3, map[string]*string{"min.insync.replicas": strp("2")})
	tp := kernel.TopicPartition{Topic: topic}
	cl := c.client(kgo.DefaultProduceTopic(topic))
	produceBatches(t, cl, topic, 0, 50, 10)
	c.waitInSync(tp, 30*time.Second)

	leader := c.leaderOf(tp)
	follower := leader%3 + 1
	vol := filepath.Dir(c.nodes[follower-1].dir)
	ballast := filepath.Join(vol, "ballast")
	brokerproc.FillTo(t, ballast, reserve-16<<20)
	logs := c.nodes[follower-1].logs
	c.eventually(30*time.Second, fmt.Sprintf("broker %d pauses its fetchers", follower), func() bool {
		return logs.contains("replica fetchers paused")
	})
	// Writes go on (min.insync.replicas 2) and the paused follower leaves the ISR.
	produceBatches(t, cl, topic, 50, 50, 10)
	c.eventually(30*time.Second, fmt.Sprintf("broker %d out of the ISR", follower), func() bool {
		return !slices.Contains(c.image(leader).Partition(topic, 0).ISR, follower)
	})
	lv, ok1 := c.repl(leader).Replica(tp)
	fv, ok2 := c.repl(follower).Replica(tp)
	if !ok1 || !ok2 {
		t.Fatalf("replicas of %s: leader's found %v, follower's %v", tp, ok1, ok2)
	}
	if fv.Log.LogEndOffset() >= lv.Log.LogEndOffset() {
		t.Fatalf("paused follower's log end %d, leader's %d: it kept appending", fv.Log.LogEndOffset(), lv.Log.LogEndOffset())
	}

	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	c.eventually(30*time.Second, fmt.Sprintf("broker %d resumes", follower), func() bool {
		return logs.contains("replica fetchers resume")
	})
	c.eventually(30*time.Second, fmt.Sprintf("broker %d back in the ISR", follower), func() bool {
		return slices.Contains(c.image(leader).Partition(topic, 0).ISR, follower)
	})
	c.sameBytes(tp)
	consumeAll(t, c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0)}})), 100)
}
