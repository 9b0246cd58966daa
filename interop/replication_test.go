package interop

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/recordbatch"
)

// ISR replication tests (issue 8): three broker processes, RF 3, killed with SIGKILL.
// Helpers are in replication_helpers_test.go.

// durabilityRun is how long TestReplicationDurability's nemesis runs: 15s in CI, longer
// with SLUICE_DURABILITY=<duration> (e.g. 60s, 10m).
func durabilityRun(t *testing.T) time.Duration {
	if v := os.Getenv("SLUICE_DURABILITY"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("SLUICE_DURABILITY=%q: want a duration such as 60s", v)
		}
		return d
	}
	return 15 * time.Second
}

// TestReplicationDurability: an idempotent acks=all producer writes numbered records to
// 6 partitions (RF 3, min.insync.replicas 2) while a nemesis SIGKILLs a random broker
// every few seconds and restarts it once the others have it out of the ISR... and the
// ISR is whole again before the next kill. A consumer reads along the whole time.
// Afterwards: every record the producer sent is in its partition exactly once and in
// order (an idempotent producer retries until it is acknowledged), everything the
// consumer saw during the run is still there at the same offset, and the three
// replicas' segment files hold the same batches.
func TestReplicationDurability(t *testing.T) {
	t.Parallel()
	const (
		topic      = "durable"
		partitions = 6
	)
	runFor := durabilityRun(t)
	c := newReplCluster(t, nil)
	c.node(1).mustCreateTopic(30*time.Second, topic, partitions, 3, map[string]string{"min.insync.replicas": "2"})
	c.node(1).waitPartitions(30*time.Second, topic, "every ISR whole", fullISR(allThree))

	cl, err := kgo.NewClient(
		kgo.SeedBrokers(c.seeds()...),
		kgo.ClientID("sluice-interop-durability"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MaxBufferedRecords(2000),
		kgo.ProducerBatchMaxBytes(16<<10),
		kgo.ProducerLinger(2*time.Millisecond),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	numbered := newSeqRecords(topic, partitions, func(p int32, seq int64) []byte { return seqValue("d", p, seq) })
	run := numbered.start(cl, context.Background())
	defer run.halt()

	// The consumer reads along; seen[p][offset] is the value it got.
	consumer, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.ClientID("sluice-interop-durability-reader"),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: func() map[int32]kgo.Offset {
			m := map[int32]kgo.Offset{}
			for p := range int32(partitions) {
				m[p] = kgo.NewOffset().AtStart()
			}
			return m
		}()}), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	seen := make([]map[int64]string, partitions)
	for p := range seen {
		seen[p] = map[int64]string{}
	}
	consumeCtx, stopConsume := context.WithCancel(context.Background())
	consumed := make(chan struct{})
	go func() {
		defer close(consumed)
		for consumeCtx.Err() == nil {
			fs := consumer.PollFetches(consumeCtx)
			fs.EachRecord(func(r *kgo.Record) { seen[r.Partition][r.Offset] = string(r.Value) })
		}
	}()

	// The nemesis: kill a random broker, restart it after a moment, wait until every
	// ISR is whole and some records were acknowledged since, repeat.
	// The nemesis starts once the producer has had a first record acknowledged: a kill
	// before the client even knows the topic's leaders fails its first records with
	// UNKNOWN_TOPIC_OR_PARTITION, which says nothing about durability.
	if !pollUntil(60*time.Second, func() bool { return numbered.ackedCount() > 0 }) {
		f, fe := numbered.failures()
		t.Fatalf("no record acknowledged before the first kill (failed %d, first %v)", f, fe)
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 8))
	deadline := time.Now().Add(runFor)
	kills := 0
	for time.Now().Before(deadline) {
		victim := c.nodes[rng.IntN(len(c.nodes))]
		before := numbered.ackedCount()
		victim.kill()
		kills++
		t.Logf("kill %d: broker %d (SIGKILL) after %d acknowledged records", kills, victim.id, before)
		// Let the others notice (fencing, a new leader, an ISR shrink) before it returns.
		other := c.others(victim)[0]
		other.waitPartitions(30*time.Second, topic, fmt.Sprintf("broker %d out of every ISR", victim.id), func(ps map[int32]partState) bool {
			for _, p := range ps {
				if slices.Contains(p.isr, victim.id) || p.leader == victim.id {
					return false
				}
			}
			return true
		})
		victim.restart()
		other.waitPartitions(60*time.Second, topic, "every ISR whole again", fullISR(allThree))
		if !pollUntil(60*time.Second, func() bool { return numbered.ackedCount() > before+200 }) {
			f, fe := numbered.failures()
			t.Fatalf("no progress after kill %d: %d acknowledged (failed %d, first %v)", kills, numbered.ackedCount(), f, fe)
		}
	}
	run.halt()
	flushCtx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := cl.Flush(flushCtx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	run.wait()
	stopConsume()
	<-consumed

	sent, acked := numbered.snapshot()
	if failed, firstErr := numbered.failures(); failed > 0 {
		t.Errorf("%d records failed, first: %v (an idempotent acks=all producer with unlimited retries loses none)", failed, firstErr)
	}
	total := int64(0)
	for p := range int32(partitions) {
		vals := readValues(t, c.node(1).addr, topic, p)
		total += int64(len(vals))
		if int64(len(vals)) != sent[p] || int64(len(acked[p])) != sent[p] {
			t.Errorf("partition %d: %d records stored, %d sent, %d acknowledged", p, len(vals), sent[p], len(acked[p]))
		}
		bad := 0
		for i, v := range vals {
			if want := string(seqValue("d", p, int64(i))); v != want {
				bad++
				if bad <= 5 {
					t.Errorf("partition %d offset %d: %q, want %q (lost, duplicated or reordered)", p, i, v, want)
				}
			}
		}
		for off, v := range seen[p] {
			if off >= int64(len(vals)) || vals[off] != v {
				bad++
				if bad <= 10 {
					t.Errorf("partition %d: the consumer saw %q at offset %d during the run; it is gone now", p, v, off)
				}
			}
		}
	}
	batches := c.waitReplicasIdentical(60*time.Second, topic, partitions)
	for p, bs := range batches {
		if end := lastOf(bs); len(bs) > 0 && bs[len(bs)-1].last+1 != sent[p] {
			t.Errorf("partition %d: replicas end at %v, %d records were sent", p, end, sent[p])
		}
	}
	t.Logf("%d kills in %s: %d records, every one stored once and in order on all three replicas", kills, runFor, total)
}

// TestReplicationLeaderLossAcks: two producers write to one partition (RF 3,
// min.insync.replicas 2), one with acks=1 and one with acks=all, and its leader is
// SIGKILLed mid-stream. Every acks=all acknowledgement must survive; acks=1 may lose
// what the leader had not replicated (the test reports how much).
func TestReplicationLeaderLossAcks(t *testing.T) {
	t.Parallel()
	const topic = "acks"
	c := newReplCluster(t, nil)
	c.node(1).mustCreateTopic(30*time.Second, topic, 1, 3, map[string]string{"min.insync.replicas": "2"})
	ps := c.node(1).waitPartitions(30*time.Second, topic, "ISR whole", fullISR(allThree))
	leader := c.node(ps[0].leader)

	type stream struct {
		tag   string
		cl    *kgo.Client
		mu    sync.Mutex
		acked []int64
		sent  int64
		wg    sync.WaitGroup
	}
	mk := func(tag string, opts ...kgo.Opt) *stream {
		opts = append([]kgo.Opt{kgo.SeedBrokers(c.seeds()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerBatchMaxBytes(4 << 10), kgo.RecordRetries(3)}, opts...)
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return &stream{tag: tag, cl: cl}
	}
	one := mk("one", kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	all := mk("all")
	stop := make(chan struct{})
	var loops sync.WaitGroup
	for _, s := range []*stream{one, all} {
		loops.Add(1)
		go func() {
			defer loops.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				seq := s.sent
				s.sent++
				s.wg.Add(1)
				s.cl.Produce(context.Background(), &kgo.Record{Topic: topic, Value: seqValue(s.tag, 0, seq)}, func(_ *kgo.Record, err error) {
					defer s.wg.Done()
					if err == nil {
						s.mu.Lock()
						s.acked = append(s.acked, seq)
						s.mu.Unlock()
					}
				})
				if seq%500 == 499 {
					// Keep the two streams' rates alike and the buffer short.
					ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
					_ = s.cl.Flush(ctx)
					cancel()
				}
			}
		}()
	}
	count := func(s *stream) int {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.acked)
	}
	if !pollUntil(30*time.Second, func() bool { return count(one) > 2000 && count(all) > 2000 }) {
		t.Fatalf("acknowledged before the kill: acks=1 %d, acks=all %d", count(one), count(all))
	}
	leader.kill()
	t.Logf("leader %d killed with %d acks=1 and %d acks=all acknowledgements", leader.id, count(one), count(all))
	var other *clusterNode
	for _, n := range c.nodes {
		if n != leader {
			other = n
			break
		}
	}
	other.waitPartitions(30*time.Second, topic, "a new leader", func(ps map[int32]partState) bool {
		return ps[0].leader >= 0 && ps[0].leader != leader.id
	})
	afterOne, afterAll := count(one), count(all)
	if !pollUntil(30*time.Second, func() bool { return count(one) > afterOne+500 && count(all) > afterAll+500 }) {
		t.Fatalf("no progress after the failover: acks=1 %d, acks=all %d", count(one), count(all))
	}
	close(stop)
	loops.Wait()
	for _, s := range []*stream{one, all} {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		_ = s.cl.Flush(ctx)
		cancel()
		s.wg.Wait()
	}
	leader.restart()
	other.waitPartitions(60*time.Second, topic, "ISR whole again", fullISR(allThree))

	stored := map[string]int{}
	for _, v := range readValues(t, other.addr, topic, 0) {
		stored[v]++
	}
	for _, s := range []*stream{one, all} {
		lost, dup := 0, 0
		for _, seq := range s.acked {
			switch stored[string(seqValue(s.tag, 0, seq))] {
			case 0:
				lost++
			case 1:
			default:
				dup++
			}
		}
		t.Logf("acks=%s: %d sent, %d acknowledged, %d acknowledged but lost, %d duplicated", s.tag, s.sent, len(s.acked), lost, dup)
		if s == all && (lost > 0 || dup > 0) {
			t.Errorf("acks=all: %d acknowledged records lost and %d duplicated across the leader's SIGKILL", lost, dup)
		}
	}
	c.waitReplicasIdentical(60*time.Second, topic, 1)
}

// TestReplicationUncleanElection: the last ISR member of a partition dies and only the
// replicas that fell out of the ISR come back. With unclean.leader.election.enable=false
// the partition stays offline (no data loss); once the topic enables it, one of them
// becomes leader (what only the dead leader had is lost, as documented), writes work,
// and the old leader, restarted, truncates to the new leader's log.
//
// Five brokers, voters 1-3; the partition's replicas are 3 (leader), 4 and 5, so the
// metadata quorum survives killing all three of them one after the other.
func TestReplicationUncleanElection(t *testing.T) {
	t.Parallel()
	const topic = "unclean"
	c := newClusterWith(t, 5, 3, nil, clusterOpt{configs: withReplConfigs(nil)})
	c.startAll()
	c.waitAllSeeAll(60*time.Second, []int32{1, 2, 3, 4, 5})
	c.node(1).mustCreateAssigned(30*time.Second, topic, [][]int32{{3, 4, 5}}, map[string]string{"min.insync.replicas": "1"})
	ps := c.node(1).waitPartitions(30*time.Second, topic, "ISR whole", fullISR([]int32{3, 4, 5}))
	if ps[0].leader != 3 {
		t.Fatalf("leader %d, want the first replica 3", ps[0].leader)
	}
	leader, followers, watcher := c.node(3), []*clusterNode{c.node(4), c.node(5)}, c.node(1)
	produceN(t, c.seeds(), topic, 0, "before", 0, 100)
	for _, f := range followers {
		f.kill()
	}
	watcher.waitPartitions(30*time.Second, topic, "ISR = the leader alone", func(ps map[int32]partState) bool {
		return ps[0].leader == leader.id && slices.Equal(ps[0].isr, []int32{leader.id})
	})
	produceN(t, []string{leader.addr}, topic, 0, "only-on-leader", 0, 50)
	leader.kill()
	for _, f := range followers {
		f.restart()
	}
	// Both followers are back and unfenced, the leader is fenced: the partition has no
	// live ISR member and must stay offline.
	watcher.waitView(30*time.Second, "the old leader fenced, the followers back", func(v *view) bool {
		return slices.Equal(v.brokers, []int32{1, 2, 4, 5})
	})
	for range 3 { // three looks over a few heartbeat intervals
		ps := watcher.waitPartitions(10*time.Second, topic, "metadata", func(map[int32]partState) bool { return true })
		if ps[0].leader >= 0 {
			t.Fatalf("partition has leader %d (ISR %v) with unclean.leader.election.enable=false", ps[0].leader, ps[0].isr)
		}
		pollUntil(time.Second, func() bool { return false })
	}
	{
		cl := newClient(t, watcher.addr, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordDeliveryTimeout(3*time.Second))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("must-fail")}).FirstErr()
		cancel()
		if err == nil {
			t.Fatal("produce to an offline partition succeeded")
		}
		t.Logf("produce while offline: %v", err)
	}
	adm := kadm.NewClient(watcher.cl)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resps, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "unclean.leader.election.enable", Value: kadm.StringPtr("true")}}, topic)
	if err == nil {
		err = resps[0].Err
	}
	if err != nil {
		t.Fatalf("enable unclean election: %v", err)
	}
	ps = watcher.waitPartitions(30*time.Second, topic, "an unclean leader", func(ps map[int32]partState) bool {
		return ps[0].leader == 4 || ps[0].leader == 5
	})
	t.Logf("unclean leader %d, ISR %v, epoch %d", ps[0].leader, ps[0].isr, ps[0].epoch)
	produceN(t, c.seeds(), topic, 0, "after", 0, 20)
	leader.restart()
	watcher.waitPartitions(60*time.Second, topic, "ISR whole again", fullISR([]int32{3, 4, 5}))
	var want []string
	for i := range int64(100) {
		want = append(want, string(seqValue("before", 0, i)))
	}
	for i := range int64(20) {
		want = append(want, string(seqValue("after", 0, i)))
	}
	if got := readValues(t, watcher.addr, topic, 0); !slices.Equal(got, want) {
		t.Errorf("after the unclean election the partition holds %d records %q..., want the 100 before and 20 after", len(got), head(got))
	}
	c.waitReplicasIdenticalOn(60*time.Second, topic, 0, []int32{3, 4, 5})
}

func head(s []string) []string { return s[:min(len(s), 3)] }

// TestReplicationPartitionedLeader: a partition's leader is cut off from the other
// brokers (raft and follower fetches go through TCP proxies that drop traffic) while a
// client still reaches it. It must not acknowledge an acks=all write (its followers
// cannot fetch, and it cannot shrink the ISR without the controller); the others fence
// it and elect a new leader that takes writes. When the cut heals, the old leader
// truncates what it appended alone (acks=1 writes, which are lost as documented, and the
// unacknowledged acks=all ones) and its log ends up identical to the new leader's.
func TestReplicationPartitionedLeader(t *testing.T) {
	t.Parallel()
	const topic = "cut"
	needBroker(t)
	// raft[i][j] carries raft traffic from broker i+1 to broker j+1; repl[j] carries
	// follower fetches to broker j+1 (its REPLICATION listener, advertised at the proxy).
	var raft raftLinks
	var repl [3]*tcpProxy
	// A listener not named after a protocol is mapped to one (Kafka's rule).
	cfgs := withReplConfigs(map[string]string{"inter.broker.listener.name": "REPLICATION",
		"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,REPLICATION:PLAINTEXT"})
	c := newClusterWith(t, 3, 3, raft.voters(t), clusterOpt{configs: cfgs, listeners: func(id int32) string {
		addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		repl[id-1] = newTCPProxy(t, addr)
		return fmt.Sprintf("[{name: PLAINTEXT, address: 127.0.0.1:0}, {name: REPLICATION, address: %q, advertised: %q}]", addr, repl[id-1].addr())
	}})
	c.startAll()
	c.waitAllSeeAll(60*time.Second, allThree)
	c.node(1).mustCreateTopic(30*time.Second, topic, 1, 3, map[string]string{"min.insync.replicas": "2"})
	ps := c.node(1).waitPartitions(30*time.Second, topic, "ISR whole", fullISR(allThree))
	victim := c.node(ps[0].leader)
	survivors := c.others(victim)
	produceN(t, c.seeds(), topic, 0, "before", 0, 100)

	cut := func(on bool) {
		raft.cutNode(victim.id, on)
		repl[victim.id-1].setCut(on)
	}
	cut(true)
	t.Logf("leader %d cut off from brokers %d and %d", victim.id, survivors[0].id, survivors[1].id)

	// Produce requests sent to the victim itself (a client with a stale view): acks=all
	// is never acknowledged; acks=1 is, and those records are lost once the cut heals.
	id := topicID(t, victim.cl, topic)
	acks1 := newClient(t, victim.addr, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	rawProduce := func(acks int16, value string) int16 {
		req := kmsg.NewPtrProduceRequest()
		req.Acks = acks
		req.TimeoutMillis = 3000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic, rt.TopicID = topic, id
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = recordbatch.Build(recordbatch.Options{BaseTimestamp: time.Now().UnixMilli(), ProducerID: -1, BaseSequence: -1},
			recordbatch.Record{Value: []byte(value)})
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		// kgo sends a Produce with the acks its client was made with.
		cl := victim.cl
		if acks == 1 {
			cl = acks1
		}
		resp, err := cl.SeedBrokers()[0].Request(ctx, req)
		if err != nil {
			t.Fatalf("produce (acks=%d) to the cut-off leader: %v", acks, err)
		}
		return resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
	}
	for i := range 3 {
		if code := rawProduce(-1, fmt.Sprintf("cut-acks-all-%d", i)); code == 0 {
			t.Fatalf("the cut-off leader acknowledged an acks=all write")
		} else {
			t.Logf("acks=all to the cut-off leader: %v", kerr.ErrorForCode(code))
		}
	}
	n := 0
	var other error
	for i := range 30 {
		if code := rawProduce(1, fmt.Sprintf("cut-acks-1-%d", i)); code == 0 {
			n++
		} else {
			other = kerr.ErrorForCode(code)
		}
	}
	t.Logf("acks=1 to the cut-off leader: %d of 30 acknowledged (lost once the cut heals), other answers: %v", n, other)

	// The others elect a new leader among themselves and take acks=all writes.
	survivors[0].waitPartitions(30*time.Second, topic, "a new leader", func(ps map[int32]partState) bool {
		return ps[0].leader >= 0 && ps[0].leader != victim.id && !slices.Contains(ps[0].isr, victim.id)
	})
	produceN(t, []string{survivors[0].addr, survivors[1].addr}, topic, 0, "during", 0, 50)

	cut(false)
	survivors[0].waitPartitions(60*time.Second, topic, "the old leader back in the ISR", fullISR(allThree))
	var want []string
	for i := range int64(100) {
		want = append(want, string(seqValue("before", 0, i)))
	}
	for i := range int64(50) {
		want = append(want, string(seqValue("during", 0, i)))
	}
	if got := readValues(t, survivors[0].addr, topic, 0); !slices.Equal(got, want) {
		t.Errorf("the partition holds %d records %q..., want the 100 before and 50 during the cut", len(got), head(got))
	}
	c.waitReplicasIdentical(60*time.Second, topic, 1)
}
