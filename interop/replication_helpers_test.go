package interop

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Helpers of the replication tests (replication_test.go): clusters with short ISR
// timeouts, the ISR as Metadata reports it, and the batches of a replica read straight
// from its segment files.

// replConfigs are the broker configs of the replication test clusters: a follower that
// stops fetching leaves the ISR within seconds, and a restarted one fetches at once.
var replConfigs = map[string]string{
	"replica.lag.time.max.ms":   "3000",
	"replica.fetch.wait.max.ms": "200",
	"replica.fetch.backoff.ms":  "200",
	"num.partitions":            "1",
}

// withReplConfigs returns replConfigs with more added (more wins).
func withReplConfigs(more map[string]string) map[string]string {
	cfgs := maps.Clone(replConfigs)
	maps.Copy(cfgs, more)
	return cfgs
}

// newReplCluster starts three brokers (all voters) with replConfigs (plus more) and
// waits until each lists all three.
func newReplCluster(t *testing.T, more map[string]string) *cluster {
	t.Helper()
	c := newClusterWith(t, 3, 3, nil, clusterOpt{configs: withReplConfigs(more)})
	c.startAll()
	c.waitAllSeeAll(60*time.Second, allThree)
	return c
}

// seeds are the client addresses of every broker.
func (c *cluster) seeds() []string {
	var out []string
	for _, n := range c.nodes {
		out = append(out, n.addr)
	}
	return out
}

// partState is one partition as a broker's Metadata describes it.
type partState struct {
	leader int32
	epoch  int32
	isr    []int32 // sorted
	// replicas in assignment order (the first is the preferred leader).
	replicas []int32
	err      error
}

// partitions asks broker n for the leader, leader epoch and ISR of topic's partitions.
func (n *clusterNode) partitions(ctx context.Context, topic string) (map[int32]partState, error) {
	adm := kadm.NewClient(n.cl)
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return nil, err
	}
	td, ok := md.Topics[topic]
	if !ok {
		return nil, fmt.Errorf("metadata of broker %d has no topic %q", n.id, topic)
	}
	if td.Err != nil {
		return nil, fmt.Errorf("topic %q: %w", topic, td.Err)
	}
	out := map[int32]partState{}
	for p, pd := range td.Partitions {
		isr := slices.Clone(pd.ISR)
		slices.Sort(isr)
		out[p] = partState{leader: pd.Leader, epoch: pd.LeaderEpoch, isr: isr, replicas: slices.Clone(pd.Replicas), err: pd.Err}
	}
	return out, nil
}

// waitPartitions polls broker n's Metadata for topic until cond accepts the partitions.
func (n *clusterNode) waitPartitions(timeout time.Duration, topic, what string, cond func(map[int32]partState) bool) map[int32]partState {
	n.t.Helper()
	last, lastErr, ok := pollLatest(timeout, func(ctx context.Context) (map[int32]partState, error) { return n.partitions(ctx, topic) }, cond)
	if !ok {
		n.t.Fatalf("broker %d, topic %s: %s: not within %s (last %v, error %v)", n.id, topic, what, timeout, last, lastErr)
	}
	return last
}

// fullISR accepts partitions whose ISR holds all of want and which have a leader.
func fullISR(want []int32) func(map[int32]partState) bool {
	return func(ps map[int32]partState) bool {
		for _, p := range ps {
			if p.leader < 0 || !slices.Equal(p.isr, want) {
				return false
			}
		}
		return len(ps) > 0
	}
}

// batchID identifies a stored record batch: its offsets and its CRC (which covers
// everything from the attributes on, so two replicas with the same batch agree).
type batchID struct {
	base, last int64
	crc        uint32
}

// replicaBatches reads the batch headers of a partition from a broker's segment files
// (storage.segmentlog's layout: <data dir>/<topic>-<p>/<base offset>.log). A torn tail
// (a partial batch at the end of the last segment) is left out.
func replicaBatches(dataDir, topic string, p int32) ([]batchID, error) {
	dir := filepath.Join(dataDir, fmt.Sprintf("%s-%d", topic, p))
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var logs []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".log") {
			logs = append(logs, e.Name())
		}
	}
	sort.Strings(logs) // zero-padded base offsets sort as numbers
	var out []batchID
	for _, name := range logs {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		for len(b) >= 61 {
			n := int(int32(binary.BigEndian.Uint32(b[8:]))) + 12
			if n < 61 || n > len(b) {
				break
			}
			base := int64(binary.BigEndian.Uint64(b))
			out = append(out, batchID{
				base: base,
				last: base + int64(int32(binary.BigEndian.Uint32(b[23:]))),
				crc:  binary.BigEndian.Uint32(b[17:]),
			})
			b = b[n:]
		}
	}
	return out, nil
}

// mustCreateAssigned creates topic through broker n with an explicit replica
// assignment (assign[p] lists partition p's replicas, the first the preferred leader).
func (n *clusterNode) mustCreateAssigned(timeout time.Duration, topic string, assign [][]int32, configs map[string]string) {
	n.t.Helper()
	var lastErr error
	ok := pollUntil(timeout, func() bool {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 15000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
		for p, rs := range assign {
			ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
			ra.Partition, ra.Replicas = int32(p), rs
			rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
		}
		for _, k := range slices.Sorted(maps.Keys(configs)) {
			cc := kmsg.NewCreateTopicsRequestTopicConfig()
			cc.Name, cc.Value = k, kmsg.StringPtr(configs[k])
			rt.Configs = append(rt.Configs, cc)
		}
		req.Topics = append(req.Topics, rt)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		resp, err := n.request(ctx, req)
		if err != nil {
			lastErr = err
			return false
		}
		lastErr = kerr.ErrorForCode(resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode)
		return lastErr == nil || errors.Is(lastErr, kerr.TopicAlreadyExists)
	})
	if !ok {
		n.t.Fatalf("create topic %q with assignment %v through broker %d: %v", topic, assign, n.id, lastErr)
	}
}

// waitReplicasIdenticalOn is waitReplicasIdentical for one partition hosted by the
// given brokers.
func (c *cluster) waitReplicasIdenticalOn(timeout time.Duration, topic string, p int32, ids []int32) {
	c.t.Helper()
	var last string
	ok := pollUntil(timeout, func() bool {
		var first []batchID
		for i, id := range ids {
			bs, err := replicaBatches(c.node(id).dataDir, topic, p)
			if err != nil {
				last = fmt.Sprintf("broker %d: %v", id, err)
				return false
			}
			if i == 0 {
				first = bs
			} else if !slices.Equal(bs, first) {
				last = fmt.Sprintf("broker %d has %d batches (last %v), broker %d has %d (last %v)", ids[0], len(first), lastOf(first), id, len(bs), lastOf(bs))
				return false
			}
		}
		return true
	})
	if !ok {
		c.t.Fatalf("replicas of %s-%d not identical within %s: %s", topic, p, timeout, last)
	}
}

// waitReplicasIdentical polls until every broker's copy of topic's partitions holds the
// same batches (each broker must host every partition: RF = cluster size), and fails
// the test with the differences after timeout. It returns the agreed batches.
func (c *cluster) waitReplicasIdentical(timeout time.Duration, topic string, partitions int32) map[int32][]batchID {
	c.t.Helper()
	var last string
	agreed := map[int32][]batchID{}
	ok := pollUntil(timeout, func() bool {
		for p := range partitions {
			var first []batchID
			for i, n := range c.nodes {
				bs, err := replicaBatches(n.dataDir, topic, p)
				if err != nil {
					last = fmt.Sprintf("broker %d partition %d: %v", n.id, p, err)
					return false
				}
				if i == 0 {
					first = bs
					continue
				}
				if !slices.Equal(bs, first) {
					last = fmt.Sprintf("partition %d: broker %d has %d batches (last %v), broker %d has %d (last %v)",
						p, c.nodes[0].id, len(first), lastOf(first), n.id, len(bs), lastOf(bs))
					return false
				}
			}
			agreed[p] = first
		}
		return true
	})
	if !ok {
		c.t.Fatalf("replicas of %s not identical within %s: %s", topic, timeout, last)
	}
	return agreed
}

func lastOf(bs []batchID) any {
	if len(bs) == 0 {
		return "none"
	}
	return bs[len(bs)-1]
}

// seqValue is the value of record seq of partition p in the replication tests.
func seqValue(tag string, p int32, seq int64) []byte {
	return fmt.Appendf(nil, "%s-p%d-%08d", tag, p, seq)
}

// restart starts a killed broker again on its data and waits until it serves.
func (n *clusterNode) restart() {
	n.t.Helper()
	n.launch()
	waitReady(n.t, n.adminAddr, n.done, 60*time.Second)
}

// produceN produces count records acks=all (idempotent) to topic/p through a client of
// the given seeds, values seqValue(tag, p, from..from+count-1), and fails on any error.
func produceN(t *testing.T, seeds []string, topic string, p int32, tag string, from, count int64, opts ...kgo.Opt) {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RetryTimeout(30 * time.Second)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for i := from; i < from+count; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: seqValue(tag, p, i)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce %d records (%s) to %s-%d: %v", count, tag, topic, p, err)
	}
}

// readValues reads partition p of topic from the start up to its end offset through a
// client seeded with addr and returns the values in offset order (and checks offsets
// are dense).
func readValues(t *testing.T, addr, topic string, p int32) []string {
	t.Helper()
	got := fetchAll(t, addr, topic, []int32{p}, 60*time.Second)
	var out []string
	for i, r := range got[p] {
		if r.Offset != int64(i) {
			t.Fatalf("%s-%d: record %d at offset %d (offsets not dense)", topic, p, i, r.Offset)
		}
		out = append(out, string(r.Value))
	}
	return out
}
