package interop

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Helpers of the idempotence and transaction tests (txn_*_test.go, idempotence_test.go).

// txnBrokerConfig is the broker config of the transaction tests: small internal topics
// (fewer partitions to create and load on every start) and no initial rebalance delay.
const txnBrokerConfig = `configs: {group.initial.rebalance.delay.ms: "0", offsets.topic.num.partitions: "4", transaction.state.log.num.partitions: "4"}
`

// sentinelKey is the key of the non-transactional record writeSentinels appends to
// every partition. A read_committed consumer sees it only once the last stable offset
// has passed every transaction before it, so reading up to the sentinels both collects
// everything and checks that no transaction was left hanging.
const sentinelKey = "~sentinel~"

// partitionList returns 0..n-1.
func partitionList(n int) []int32 {
	ps := make([]int32, n)
	for i := range ps {
		ps[i] = int32(i)
	}
	return ps
}

// writeSentinels appends one sentinel record to each partition of topic with a plain
// (non-transactional) producer.
func writeSentinels(t *testing.T, addr, topic string, partitions int) {
	t.Helper()
	cl := newClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for p := range partitions {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(p), Key: []byte(sentinelKey)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce sentinels to %q: %v", topic, err)
	}
}

// readToSentinels reads every partition of topic from offset 0 with the given isolation
// level until it has seen each partition's sentinel (writeSentinels), and returns the
// records before the sentinels. It fails on a fetch error or when the sentinels do not
// all show up within timeout (for read_committed: a transaction left open pins the last
// stable offset below them).
func readToSentinels(t *testing.T, addr, topic string, partitions int, level kgo.IsolationLevel, timeout time.Duration) map[int32][]*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	offsets := map[int32]kgo.Offset{}
	for p := range partitions {
		offsets[int32(p)] = kgo.NewOffset().AtStart()
	}
	cl := newClient(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchIsolationLevel(level), kgo.FetchMaxWait(200*time.Millisecond))
	got := map[int32][]*kgo.Record{}
	done := map[int32]bool{}
	for len(done) < partitions {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %q (%s): sentinels of %d of %d partitions seen after %s; records so far per partition: %v",
				topic, levelName(level), len(done), partitions, timeout, countPerPartition(got))
		}
		for _, fe := range fs.Errors() {
			t.Fatalf("read %q (%s) partition %d: %v", fe.Topic, levelName(level), fe.Partition, fe.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if done[r.Partition] {
				t.Errorf("read %q (%s) partition %d: record at offset %d after the sentinel", topic, levelName(level), r.Partition, r.Offset)
				return
			}
			if string(r.Key) == sentinelKey {
				done[r.Partition] = true
				return
			}
			got[r.Partition] = append(got[r.Partition], r)
		})
	}
	return got
}

func levelName(l kgo.IsolationLevel) string {
	if l == kgo.ReadCommitted() {
		return "read_committed"
	}
	return "read_uncommitted"
}

func countPerPartition(m map[int32][]*kgo.Record) map[int32]int {
	out := map[int32]int{}
	for p, rs := range m {
		out[p] = len(rs)
	}
	return out
}

// values returns the record values of every partition, partition by partition, each in
// offset order.
func valuesPerPartition(m map[int32][]*kgo.Record) map[int32][]string {
	out := map[int32][]string{}
	for p, rs := range m {
		for _, r := range rs {
			out[p] = append(out[p], string(r.Value))
		}
	}
	return out
}

// checkSamePartitionValues compares what a consumer read with what it should have read,
// partition by partition and in order; it reports at most a few differences per partition.
func checkSamePartitionValues(t *testing.T, what string, got, want map[int32][]string) {
	t.Helper()
	g, w := map[string][]string{}, map[string][]string{}
	for p, vs := range got {
		g[fmt.Sprintf("partition %d", p)] = vs
	}
	for p, vs := range want {
		w[fmt.Sprintf("partition %d", p)] = vs
	}
	checkSameLists(t, what, g, w)
}

// checkSameLists compares lists of values by name, each in order; it reports at most a
// few differences per list.
func checkSameLists(t *testing.T, what string, got, want map[string][]string) {
	t.Helper()
	names := map[string]bool{}
	for k := range got {
		names[k] = true
	}
	for k := range want {
		names[k] = true
	}
	for _, k := range slices.Sorted(maps.Keys(names)) {
		g, w := got[k], want[k]
		if len(g) != len(w) {
			t.Errorf("%s: %s: %d records, want %d", what, k, len(g), len(w))
		}
		bad := 0
		for i := 0; i < len(g) && i < len(w); i++ {
			if g[i] != w[i] {
				bad++
				if bad <= 5 {
					t.Errorf("%s: %s: record %d is %q, want %q", what, k, i, g[i], w[i])
				}
			}
		}
		if bad > 5 {
			t.Errorf("%s: %s: %d more differences", what, k, bad-5)
		}
	}
}

// waitStable polls until the read_committed end offsets (the last stable offsets) of
// topic equal its high watermarks, i.e. no transaction is open on it, and fails after
// timeout with both sets of offsets.
func waitStable(t *testing.T, addr, topic string, timeout time.Duration) {
	t.Helper()
	adm := kadm.NewClient(newClient(t, addr))
	var last string
	ok := pollUntil(timeout, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		lso, hw, err := stableAndEnd(ctx, adm, topic)
		if err != nil {
			last = err.Error()
			return false
		}
		last = fmt.Sprintf("last stable offsets %v, high watermarks %v", lso, hw)
		for p, o := range hw {
			if lso[p] != o {
				return false
			}
		}
		return true
	})
	if !ok {
		t.Fatalf("%q: the last stable offset did not reach the high watermark within %s: %s", topic, timeout, last)
	}
}

// stableAndEnd returns the read_committed and read_uncommitted end offsets of topic by
// partition.
func stableAndEnd(ctx context.Context, adm *kadm.Client, topic string) (lso, hw map[int32]int64, err error) {
	committed, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		return nil, nil, fmt.Errorf("ListOffsets read_committed: %w", err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, nil, fmt.Errorf("ListOffsets read_uncommitted: %w", err)
	}
	lso, hw = map[int32]int64{}, map[int32]int64{}
	var errs []error
	committed.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			errs = append(errs, fmt.Errorf("read_committed partition %d: %w", o.Partition, o.Err))
		}
		lso[o.Partition] = o.Offset
	})
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			errs = append(errs, fmt.Errorf("read_uncommitted partition %d: %w", o.Partition, o.Err))
		}
		hw[o.Partition] = o.Offset
	})
	return lso, hw, errors.Join(errs...)
}

// isFenced reports whether err says the producer's epoch is stale: PRODUCER_FENCED or
// INVALID_PRODUCER_EPOCH (which one depends on the request and its version).
func isFenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch)
}
