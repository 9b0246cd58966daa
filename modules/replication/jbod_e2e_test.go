package replication_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/testbroker"
	"github.com/sluicehq/sluice/kernel"
)

// TestClusterJBODDirFailure: three brokers with two log dirs each, a topic of RF 3.
// Broker 1's replicas of the partitions it leads are moved into its dir d0 with
// AlterReplicaLogDirs, the others into d1; then d0 is lost. Only the partitions
// whose broker-1 replica was in d0 change leader; broker 1 keeps leading nothing it
// cannot serve, keeps following the rest, and no record acknowledged with acks=all
// is lost or read twice.
func TestClusterJBODDirFailure(t *testing.T) {
	c := startClusterWith(t, 3, "segmentlog", map[string]string{
		"replica.lag.time.max.ms": "2000",
		"min.insync.replicas":     "2",
	}, clusterOpts{jbod: true})
	const topic, parts = "jbodfail", 6
	c.createTopic(topic, parts, 3, nil)
	ctx := context.Background()
	d0, d1 := filepath.Join(c.nodes[0].dir, "d0"), filepath.Join(c.nodes[0].dir, "d1")

	led := map[int32]bool{}
	var req kadm.AlterReplicaLogDirsReq
	for p := range int32(parts) {
		dir := d1
		if c.leaderOf(kernel.TopicPartition{Topic: topic, Partition: p}) == 1 {
			led[p], dir = true, d0
		}
		req.Add(dir, kadm.TopicsSet{topic: {p: {}}})
	}
	if len(led) == 0 || len(led) == parts {
		t.Fatalf("broker 1 leads %d of %d partitions: nothing to tell apart", len(led), parts)
	}
	adm := kadm.NewClient(c.client())
	res, err := adm.AlterBrokerReplicaLogDirs(ctx, 1, req)
	if err != nil {
		t.Fatal(err)
	}
	res.Each(func(r kadm.AlterReplicaLogDirsResponse) {
		if r.Err != nil {
			t.Errorf("move %d to %s: %v", r.Partition, r.Dir, r.Err)
		}
	})
	in := func(dir string, p int32) bool {
		_, err := os.Stat(filepath.Join(dir, topic+"-"+strconv.Itoa(int(p))))
		return err == nil
	}
	c.eventually(20*time.Second, "broker 1's replicas in their dirs", func() bool {
		for p := range int32(parts) {
			if in(d0, p) != led[p] || in(d1, p) == led[p] {
				return false
			}
		}
		return true
	})

	// acks=all producer over every partition, through the failure.
	cl := c.client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.ProducerLinger(time.Millisecond), kgo.RequiredAcks(kgo.AllISRAcks()))
	var mu sync.Mutex
	acked := map[string]bool{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			v := strconv.Itoa(i)
			pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err := cl.ProduceSync(pctx, &kgo.Record{Value: []byte(v)}).FirstErr()
			cancel()
			if err != nil {
				t.Errorf("produce %s: %v", v, err)
				return
			}
			mu.Lock()
			acked[v] = true
			mu.Unlock()
		}
	})
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	c.eventually(10*time.Second, "records before the failure", func() bool { return count() >= 300 })

	if err := os.RemoveAll(d0); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(d0, []byte("gone"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.eventually(30*time.Second, "the partitions of d0 led elsewhere, the others unchanged", func() bool {
		for p := range int32(parts) {
			l := c.leaderOf(kernel.TopicPartition{Topic: topic, Partition: p})
			if led[p] && (l == 1 || l < 0) {
				return false
			}
		}
		return true
	})
	for p := range int32(parts) {
		if !led[p] && c.leaderOf(kernel.TopicPartition{Topic: topic, Partition: p}) == 1 {
			t.Errorf("partition %d: broker 1 took its leadership with its replica in d1", p)
		}
	}
	before := count()
	c.eventually(20*time.Second, "records after the failure", func() bool { return count() >= before+300 })
	close(stop)
	wg.Wait()

	// DescribeLogDirs on broker 1: d0 failed, d1 serves its replicas.
	c.eventually(10*time.Second, "d0 reported failed", func() bool {
		ds, err := adm.DescribeBrokerLogDirs(ctx, 1, nil)
		if err != nil {
			return false
		}
		return errors.Is(ds[d0].Err, kerr.KafkaStorageError) && ds[d1].Err == nil && len(ds[d1].Topics[topic]) == parts-len(led)
	})

	// Every acknowledged record, once.
	var seeds []string
	for _, nd := range c.running() {
		seeds = append(seeds, nd.k.Addrs()[0].String())
	}
	testbroker.ExpectExactlyOnce(t, ctx, seeds, topic, acked)
}
