package replication_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/kernel"
)

// A partition with data is reassigned to a second broker under replication throttles
// (KIP-73): first on the leader's side, then on the follower's. Each holds the new
// replica's catch-up near its rate while a producer keeps writing with acks=all (the
// new replica is out of the ISR, so it waits for nobody); with the throttles removed
// the replica catches up and joins the ISR with the leader's exact log.
func TestClusterReplicationThrottle(t *testing.T) {
	const limit = 512 << 10 // bytes/s
	// Two samples of a second: the rate is measured over 1-2 s, so the throttle bites
	// within the test's windows (with Kafka's 11 it would allow 10 s of backlog first).
	c := startCluster(t, 2, "segmentlog", map[string]string{
		"replication.quota.window.num":          "2",
		"replication.quota.window.size.seconds": "1",
	})
	c.createTopic("thr", 1, 1, nil)
	tp := kernel.TopicPartition{Topic: "thr", Partition: 0}
	leader := c.leaderOf(tp)
	other := 3 - leader

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.DefaultProduceTopic("thr"), kgo.MaxBufferedRecords(4096))
	value := make([]byte, 1000)
	for i := range 8 << 10 { // 8,192 records of about 1 KiB: 16 s of catch-up at the limit
		cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("record %d: %v", i, err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	lv, _ := c.repl(leader).Replica(tp)
	perOffset := float64(len(logBytes(t, lv.Log))) / float64(lv.Log.LogEndOffset())

	adm := kadm.NewClient(c.client())
	alterBroker := func(key string, value *string) {
		t.Helper()
		op := kadm.SetConfig
		if value == nil {
			op = kadm.DeleteConfig
		}
		res, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: op, Name: key, Value: value}})
		if err == nil {
			for _, r := range res {
				if r.Err != nil {
					err = r.Err
				}
			}
		}
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
	}
	alterTopic := func(key string, value *string) {
		t.Helper()
		op := kadm.SetConfig
		if value == nil {
			op = kadm.DeleteConfig
		}
		res, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: op, Name: key, Value: value}}, "thr")
		if err == nil {
			err = res[0].Err
		}
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
	}
	str := func(s string) *string { return &s }
	rate := str(strconv.Itoa(limit))

	// The leader's side: its replica (0:leader) is throttled.
	alterBroker("leader.replication.throttled.rate", rate)
	alterTopic("leader.replication.throttled.replicas", str(fmt.Sprintf("0:%d", leader)))
	c.eventually(10*time.Second, "the leader's throttle in both brokers' images", func() bool {
		for _, id := range []int32{1, 2} {
			im := c.image(id)
			if im.BrokerConfigs[""]["leader.replication.throttled.rate"] != *rate ||
				im.Topic("thr").Configs["leader.replication.throttled.replicas"] == "" {
				return false
			}
		}
		return true
	})
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("thr", 0, []int32{leader, other})
	if res, err := adm.AlterPartitionAssignments(ctx, req); err != nil || res.Error() != nil {
		t.Fatalf("reassign: %v %v", err, res.Error())
	}
	followerLEO := func() int64 {
		v, ok := c.repl(other).Replica(tp)
		if !ok {
			return 0
		}
		return v.Log.LogEndOffset()
	}
	c.eventually(20*time.Second, "the new replica fetching", func() bool { return followerLEO() > 0 })
	measure := func(side string) {
		t.Helper()
		time.Sleep(time.Second) // past the first samples' burst; a measurement window, not a synchronisation
		from, start := followerLEO(), time.Now()
		// A producer keeps writing meanwhile: the throttled replica holds nobody up.
		pstart := time.Now()
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
			t.Fatalf("produce during the throttled reassignment: %v", err)
		}
		if d := time.Since(pstart); d > 2*time.Second {
			t.Errorf("an acks=all produce took %v during the throttled reassignment", d)
		}
		time.Sleep(4 * time.Second) // the measurement window
		got := float64(followerLEO()-from) * perOffset / time.Since(start).Seconds()
		t.Logf("%s throttle: the new replica caught up at %.0f B/s (limit %d)", side, got, limit)
		if got < 0.5*limit || got > 1.5*limit {
			t.Errorf("%s throttle: the new replica caught up at %.0f B/s; want about %d", side, got, limit)
		}
		if v, _ := c.repl(leader).Replica(tp); slices.Contains(v.ISR, other) {
			t.Fatalf("%s throttle: the new replica joined the ISR already", side)
		}
	}
	measure("leader")

	// The follower's side instead: the new replica (0:other) is throttled as it fetches.
	alterBroker("follower.replication.throttled.rate", rate)
	alterTopic("follower.replication.throttled.replicas", str(fmt.Sprintf("0:%d", other)))
	alterTopic("leader.replication.throttled.replicas", nil)
	alterBroker("leader.replication.throttled.rate", nil)
	c.eventually(10*time.Second, "the follower's throttle in the new replica's image", func() bool {
		im := c.image(other)
		return im.BrokerConfigs[""]["follower.replication.throttled.rate"] == *rate &&
			im.Topic("thr").Configs["follower.replication.throttled.replicas"] != "" &&
			im.Topic("thr").Configs["leader.replication.throttled.replicas"] == ""
	})
	measure("follower")

	// Throttles off: the replica catches up and joins the ISR with the leader's log.
	alterTopic("follower.replication.throttled.replicas", nil)
	c.eventually(30*time.Second, "the reassignment done", func() bool {
		pi := c.image(leader).Partition("thr", 0)
		return pi != nil && slices.Equal(pi.Replicas, []int32{leader, other}) && pi.AddingReplicas == nil &&
			slices.Contains(pi.ISR, other)
	})
	c.waitInSync(tp, 30*time.Second)
}
