package interop

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClusterReassignment moves a partition with data from brokers [1 2 3] to [2 3 4]
// (its leader 1 leaves) with kadm while a producer writes to it: the new replica 4
// copies the log, the reassignment completes, broker 1 deletes its copy, every
// acknowledged record is readable once, and the three new replicas hold the same
// batches.
func TestClusterReassignment(t *testing.T) {
	t.Parallel()
	const topic = "moving"
	c := newClusterWith(t, 4, 3, nil, clusterOpt{configs: withReplConfigs(nil)})
	c.startAll()
	c.waitAllSeeAll(60*time.Second, []int32{1, 2, 3, 4})
	c.node(2).mustCreateAssigned(30*time.Second, topic, [][]int32{{1, 2, 3}}, map[string]string{"min.insync.replicas": "2"})
	c.node(2).waitPartitions(30*time.Second, topic, "ISR whole", fullISR([]int32{1, 2, 3}))
	produceN(t, c.seeds(), topic, 0, "before", 0, 2000)

	// A producer keeps writing during the move.
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var (
		mu    sync.Mutex
		acked []string
		fails int
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := int64(0); ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			v := seqValue("during", 0, i)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: v}).FirstErr()
			cancel()
			mu.Lock()
			if err != nil {
				fails++
			} else {
				acked = append(acked, string(v))
			}
			mu.Unlock()
		}
	}()

	adm := kadm.NewClient(c.node(3).cl)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req := kadm.AlterPartitionAssignmentsReq{}
	req.Assign(topic, 0, []int32{2, 3, 4})
	if _, err := answerErr(adm.AlterPartitionAssignments(ctx, req)); err != nil {
		t.Fatalf("AlterPartitionAssignments: %v", err)
	}
	var inProgress bool
	ok := pollUntil(60*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		l, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{topic: {0: {}}})
		if err != nil {
			return false
		}
		if len(l[topic]) > 0 {
			inProgress = true
		}
		return len(l[topic]) == 0
	})
	if !ok {
		t.Fatal("the reassignment did not complete within 60s")
	}
	t.Logf("reassignment listed as in progress while it ran: %v", inProgress)
	ps := c.node(3).waitPartitions(30*time.Second, topic, "replicas [2 3 4], ISR whole", func(ps map[int32]partState) bool {
		return slices.Equal(ps[0].replicas, []int32{2, 3, 4}) && slices.Equal(ps[0].isr, []int32{2, 3, 4}) && ps[0].leader != 1 && ps[0].leader >= 0
	})
	t.Logf("after the move: leader %d, replicas %v, ISR %v", ps[0].leader, ps[0].replicas, ps[0].isr)
	// Keep producing a moment on the new replicas, then stop.
	mu.Lock()
	n := len(acked)
	mu.Unlock()
	if !pollUntil(30*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(acked) > n+100 }) {
		t.Fatal("no acknowledged writes after the move")
	}
	close(stop)
	wg.Wait()

	// Broker 1 no longer hosts the partition.
	if !pollUntil(30*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(c.node(1).dataDir, topic+"-0"))
		return errors.Is(err, os.ErrNotExist)
	}) {
		t.Error("broker 1 still has the partition's directory 30s after it left the replicas")
	}
	got := readValues(t, c.node(4).addr, topic, 0)
	stored := map[string]int{}
	for _, v := range got {
		stored[v]++
	}
	for i := range int64(2000) {
		if stored[string(seqValue("before", 0, i))] != 1 {
			t.Fatalf("record before-%d stored %d times", i, stored[string(seqValue("before", 0, i))])
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, v := range acked {
		if stored[v] != 1 {
			t.Errorf("acknowledged %q stored %d times", v, stored[v])
		}
	}
	t.Logf("%d records stored; %d acknowledged during the move, %d produce errors (retried by the client)", len(got), len(acked), fails)
	c.waitReplicasIdenticalOn(60*time.Second, topic, 0, []int32{2, 3, 4})
}

// TestClusterPreferredLeaderElection: after a broker restarts, the partitions it
// preferred are led by others; kadm's ElectLeaders (preferred) moves them back once it
// is in their ISRs, and a second call answers ELECTION_NOT_NEEDED.
func TestClusterPreferredLeaderElection(t *testing.T) {
	t.Parallel()
	const topic = "preferred"
	c := newReplCluster(t, nil)
	c.node(1).mustCreateAssigned(30*time.Second, topic, [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}}, nil)
	c.node(1).waitPartitions(30*time.Second, topic, "ISR whole", fullISR(allThree))
	produceN(t, c.seeds(), topic, 0, "x", 0, 10)
	c.node(1).kill()
	c.node(2).waitPartitions(30*time.Second, topic, "partition 0 led by another", func(ps map[int32]partState) bool {
		return ps[0].leader == 2 || ps[0].leader == 3
	})
	c.node(1).restart()
	c.node(2).waitPartitions(60*time.Second, topic, "ISR whole again", fullISR(allThree))
	ps := c.node(2).waitPartitions(10*time.Second, topic, "metadata", func(map[int32]partState) bool { return true })
	if ps[0].leader == 1 {
		t.Fatal("broker 1 leads partition 0 again before any election (auto rebalance runs every 300s)")
	}
	adm := kadm.NewClient(c.node(2).cl)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{topic: {0: {}, 1: {}, 2: {}}})
	if err != nil {
		t.Fatalf("ElectLeaders: %v", err)
	}
	for p, r := range res[topic] {
		if p == 0 && r.Err != nil {
			t.Errorf("partition 0: %v", r.Err)
		}
		if p != 0 && r.Err != nil && !errors.Is(r.Err, kerr.ElectionNotNeeded) {
			t.Errorf("partition %d: %v, want success or ELECTION_NOT_NEEDED", p, r.Err)
		}
	}
	c.node(2).waitPartitions(30*time.Second, topic, "preferred leaders", func(ps map[int32]partState) bool {
		return ps[0].leader == 1 && ps[1].leader == 2 && ps[2].leader == 3
	})
	res, err = adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		t.Fatalf("ElectLeaders again: %v", err)
	}
	if r := res[topic][0]; !errors.Is(r.Err, kerr.ElectionNotNeeded) {
		t.Errorf("second preferred election of partition 0: %v, want ELECTION_NOT_NEEDED", r.Err)
	}
	if got := readValues(t, c.node(1).addr, topic, 0); len(got) != 10 {
		t.Errorf("partition 0 holds %d records after the elections, want 10", len(got))
	}
}
