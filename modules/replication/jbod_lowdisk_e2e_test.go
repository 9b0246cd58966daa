//go:build linux

package replication_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/internal/brokerproc"
	"github.com/sluicehq/sluice/kernel"
)

// TestClusterJBODLowDisk: each log dir is held to sluice.data.dir.reserve.bytes on
// its own. Three brokers with two log dirs each, broker 1's d0 on a small volume
// (a tmpfs behind a symlink). One partition broker 1 leads and one it follows are
// moved into d0, the rest into d1; then d0 fills below the reserve. Produce to the
// led partition answers KAFKA_STORAGE_ERROR and broker 1 leaves the followed one's
// ISR, while the partitions in d1 take acks=all writes with broker 1 in their ISR.
// With the space back both recover.
func TestClusterJBODLowDisk(t *testing.T) {
	const volume, reserve = 64 << 20, 24 << 20
	dirs := make([]string, 3)
	for i := range dirs {
		dirs[i] = t.TempDir()
	}
	small := brokerproc.Tmpfs(t, volume)
	if err := os.Symlink(small, filepath.Join(dirs[0], "d0")); err != nil {
		t.Fatal(err)
	}
	c := startClusterWith(t, 3, "segmentlog", map[string]string{
		"sluice.data.dir.reserve.bytes": strconv.Itoa(reserve),
		"replica.lag.time.max.ms":       "2000",
	}, clusterOpts{jbod: true, dirs: dirs})
	const topic, parts = "jbodlow", 6
	c.createTopic(topic, parts, 3, nil)
	tp := func(p int32) kernel.TopicPartition { return kernel.TopicPartition{Topic: topic, Partition: p} }
	led, followed := int32(-1), int32(-1)
	for p := range int32(parts) {
		if l := c.leaderOf(tp(p)); l == 1 && led < 0 {
			led = p
		} else if l != 1 && followed < 0 {
			followed = p
		}
	}
	if led < 0 || followed < 0 {
		t.Fatalf("broker 1 leads none or all of %d partitions", parts)
	}
	for p := range int32(parts) { // a record in each, so every replica has its epochs
		if code := clusterProduceTo(t, c, c.leaderOf(tp(p)), tp(p), -1, 5000); code != 0 {
			t.Fatalf("produce to %d: %v", p, kerr.ErrorForCode(code))
		}
	}
	d0, d1 := filepath.Join(dirs[0], "d0"), filepath.Join(dirs[0], "d1")
	var req kadm.AlterReplicaLogDirsReq
	for p := range int32(parts) {
		dir := d1
		if p == led || p == followed {
			dir = d0
		}
		req.Add(dir, kadm.TopicsSet{topic: {p: {}}})
	}
	res, err := kadm.NewClient(c.client()).AlterBrokerReplicaLogDirs(context.Background(), 1, req)
	if err != nil {
		t.Fatal(err)
	}
	res.Each(func(r kadm.AlterReplicaLogDirsResponse) {
		if r.Err != nil {
			t.Fatalf("move %d to %s: %v", r.Partition, r.Dir, r.Err)
		}
	})
	in := func(dir string, p int32) bool {
		_, err := os.Stat(filepath.Join(dir, topic+"-"+strconv.Itoa(int(p))))
		return err == nil
	}
	c.eventually(20*time.Second, "broker 1's replicas in their dirs", func() bool {
		for p := range int32(parts) {
			if in(d0, p) != (p == led || p == followed) {
				return false
			}
		}
		return true
	})
	for p := range int32(parts) {
		c.waitInSync(tp(p), 30*time.Second)
	}

	brokerproc.FillTo(t, filepath.Join(small, "ballast"), reserve-8<<20)
	c.eventually(20*time.Second, "produce to the led partition refused", func() bool {
		return clusterProduceTo(t, c, 1, tp(led), -1, 5000) == kerr.KafkaStorageError.Code
	})
	// Writes to the followed partition (acks=1) that broker 1 cannot append.
	c.eventually(30*time.Second, "broker 1 out of the followed partition's ISR", func() bool {
		leader := c.leaderOf(tp(followed))
		if code := clusterProduceTo(t, c, leader, tp(followed), 1, 5000); code != 0 {
			t.Fatalf("produce to the followed partition at its leader %d: %v", leader, kerr.ErrorForCode(code))
		}
		return !slices.Contains(c.image(leader).Partition(topic, followed).ISR, 1)
	})
	for p := range int32(parts) {
		if p == led || p == followed {
			continue
		}
		if code := clusterProduceTo(t, c, c.leaderOf(tp(p)), tp(p), -1, 5000); code != 0 {
			t.Fatalf("partition %d (in d1) with d0 low: %v", p, kerr.ErrorForCode(code))
		}
		if isr := c.image(1).Partition(topic, p).ISR; !slices.Contains(isr, 1) {
			t.Fatalf("partition %d (in d1): broker 1 left its ISR %v", p, isr)
		}
	}

	if err := os.Remove(filepath.Join(small, "ballast")); err != nil {
		t.Fatal(err)
	}
	c.eventually(20*time.Second, "produce to the led partition again", func() bool {
		return clusterProduceTo(t, c, 1, tp(led), -1, 5000) == 0
	})
	c.eventually(30*time.Second, fmt.Sprintf("broker 1 back in partition %d's ISR", followed), func() bool {
		return slices.Contains(c.image(c.leaderOf(tp(followed))).Partition(topic, followed).ISR, 1)
	})
}
