package transforms_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/testbroker"
	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/transforms"
)

// eosConfig keeps the internal topics small so the coordinators load quickly.
const eosConfig = `
configs:
  offsets.topic.num.partitions: "4"
  transaction.state.log.num.partitions: "4"
`

// txnProduce writes n transactions of 3 records each with a transactional producer,
// aborting every third; keys alternate between the two routes. It returns the values
// of the committed records and, per input partition, the offset after the last
// committed record.
func txnProduce(t *testing.T, b *testbroker.Broker, from, n int, committed map[string]bool, ends map[int32]int64) {
	t.Helper()
	cl := b.Client(t, kgo.TransactionalID("eos-input-producer"), kgo.DefaultProduceTopic("in"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionTimeout(30*time.Second))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := from; i < from+n; i++ {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatalf("begin %d: %v", i, err)
		}
		commit := i%3 != 2
		var vals []string
		for j := range 3 {
			key := "apple"
			if (i+j)%2 == 1 {
				key = "zebra"
			}
			v := fmt.Sprintf("v-%d-%d", i, j)
			vals = append(vals, v)
			r := &kgo.Record{Key: []byte(key), Value: []byte(v), Partition: int32(j % 2)}
			res := cl.ProduceSync(ctx, r)
			if err := res.FirstErr(); err != nil {
				t.Fatalf("produce %s: %v", v, err)
			}
			if commit {
				ends[r.Partition] = max(ends[r.Partition], r.Offset+1)
			}
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end transaction %d (commit %v): %v", i, commit, err)
		}
		if commit {
			for _, v := range vals {
				committed[v] = true
			}
		}
	}
}

// txnEnds writes one committed transaction with an end record for each route in each
// input partition: once a consumer of an output partition saw the end records, it saw
// everything routed there before them.
func txnEnds(t *testing.T, b *testbroker.Broker, committed map[string]bool, ends map[int32]int64) {
	t.Helper()
	cl := b.Client(t, kgo.TransactionalID("eos-input-producer"), kgo.DefaultProduceTopic("in"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for p := range int32(2) {
		for _, key := range []string{"apple", "zebra"} {
			r := &kgo.Record{Key: []byte(key), Value: []byte(fmt.Sprintf("end-%s-%d", key, p)), Partition: p}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
			committed[string(r.Value)] = true
			ends[p] = max(ends[p], r.Offset+1)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
}

// TestDerivedExactlyOnce: a derived route-by-key transform fed by a transactional
// producer (some transactions aborted) writes exactly the committed inputs' outputs,
// once each, also across a broker restart in the middle of the stream; its position
// is the offsets of the group __sluice-transform-<name>, which reach the input's end.
func TestDerivedExactlyOnce(t *testing.T) {
	b := startBroker(t, eosConfig, "")
	createTopic(t, b, "in", 2)
	createTopic(t, b, "a-to-m", 1)
	createTopic(t, b, "n-to-z", 2)
	mustDeploy(t, b, "router", "route-by-key", url.Values{"input": {"in"}, "mode": {"derived"}, "output": {"a-to-m", "n-to-z"}})
	committed, ends := map[string]bool{}, map[int32]int64{}
	txnProduce(t, b, 0, 15, committed, ends)
	b.Restart(t) // the worker is most likely in the middle of the input
	txnProduce(t, b, 15, 15, committed, ends)
	txnEnds(t, b, committed, ends)

	adm := b.Admin(t)
	group := transforms.GroupPrefix + "router"
	testbroker.WaitFor(t, 90*time.Second, "the transform's group offsets reach the input's end", func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return err.Error()
		}
		for p, end := range ends {
			// end is after the last committed record; its transaction's COMMIT
			// marker follows, and the position passes it (ReadStable's end).
			if o, ok := offs.Lookup("in", p); !ok || o.At != end+1 {
				return fmt.Sprintf("in/%d at %+v, want %d", p, o.At, end+1)
			}
		}
		return ""
	})
	if s := list(t, b)["router"]; !s.ExactlyOnce {
		t.Errorf("list does not say the transform is exactly once: %+v", s)
	}

	got := map[string]int{}
	for topic, want := range map[string]byte{"a-to-m": 'a', "n-to-z": 'z'} {
		for _, r := range consumeCommitted(t, b, topic) {
			if r.Key[0] != want {
				t.Errorf("%s routed to %s", r.Key, topic)
			}
			got[string(r.Value)]++
		}
	}
	for v := range committed {
		if got[v] != 1 {
			t.Errorf("committed input %s appears %d times in the outputs", v, got[v])
		}
	}
	for v, n := range got {
		if !committed[v] {
			t.Errorf("output %s (%d times) is from an aborted transaction", v, n)
		}
	}
}

// consumeCommitted reads every partition of topic with read_committed until the end
// records of both input partitions (written last, see txnEnds) arrived in it.
func consumeCommitted(t *testing.T, b *testbroker.Broker, topic string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := b.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(100*time.Millisecond))
	var out []*kgo.Record
	ends := map[string]bool{}
	for len(ends) < 2 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: %d records, end records %v before the deadline", topic, len(out), ends)
		}
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, r)
			if v := string(r.Value); strings.HasPrefix(v, "end-") {
				ends[v] = true
			}
		})
	}
	return out
}

// TestDerivedExactlyOnceMigratesPosition: a transform whose group has no offset yet
// starts from the position the at-least-once worker stored in the metadata log.
func TestDerivedExactlyOnceMigratesPosition(t *testing.T) {
	b := startBroker(t, eosConfig, "")
	createTopic(t, b, "in", 1)
	createTopic(t, b, "a-to-m", 1)
	createTopic(t, b, "n-to-z", 1)
	cl := b.Client(t)
	for i := range 4 {
		if err := produce(t, cl, &kgo.Record{Topic: "in", Key: []byte("apple"), Value: []byte("v" + strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
	}
	ext, ok := b.Kernel.Module("metadata").(kernel.ExtensionStore)
	if !ok {
		t.Fatal("metadata module is not a kernel.ExtensionStore")
	}
	pctx, pcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer pcancel()
	if err := ext.PutExtension(pctx, transforms.PositionNamespace, "mig/0", binary.BigEndian.AppendUint64(nil, 2)); err != nil {
		t.Fatal(err)
	}
	mustDeploy(t, b, "mig", "route-by-key", url.Values{"input": {"in"}, "mode": {"derived"}, "output": {"a-to-m", "n-to-z"}})
	adm := b.Admin(t)
	testbroker.WaitFor(t, 60*time.Second, "the group offset at the input's end", func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		offs, err := adm.FetchOffsets(ctx, transforms.GroupPrefix+"mig")
		if err != nil {
			return err.Error()
		}
		if o, ok := offs.Lookup("in", 0); !ok || o.At != 4 {
			return fmt.Sprintf("in/0 at %d (found %v)", o.At, ok)
		}
		return ""
	})
	if err := produce(t, cl, &kgo.Record{Topic: "a-to-m", Key: []byte("end"), Value: []byte("end-mark")}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rc := b.Client(t, kgo.ConsumeTopics("a-to-m"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(100*time.Millisecond))
	var got []string
	for !slices.Contains(got, "end-mark") {
		fs := rc.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("a-to-m: %q before the deadline", got)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if want := []string{"v2", "v3", "end-mark"}; !slices.Equal(got, want) {
		t.Fatalf("a-to-m holds %q, want %q (resumed from the stored position 2)", got, want)
	}
}

// TestDerivedExactlyOncePolicies: under drop, a failing batch is skipped and the
// position passes it; under reject, the batches before a failing one are committed
// and the position (the group's lag) stops at it, with nothing after it written.
func TestDerivedExactlyOncePolicies(t *testing.T) {
	b := startBroker(t, eosConfig, "breaker_failures: 100, breaker_pause_ms: 100")
	for _, topic := range []string{"din", "dout", "rin", "rout"} {
		createTopic(t, b, topic, 1)
	}
	mustDeploy(t, b, "drp", "trap", url.Values{"input": {"din"}, "mode": {"derived"}, "output": {"dout"}, "policy": {"drop"}})
	mustDeploy(t, b, "rej", "trap", url.Values{"input": {"rin"}, "mode": {"derived"}, "output": {"rout"}})
	cl := b.Client(t)
	for _, topic := range []string{"din", "rin"} {
		for _, v := range []string{"a", "b", "trap", "c"} { // one batch each
			if err := produce(t, cl, &kgo.Record{Topic: topic, Value: []byte(v)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	adm := b.Admin(t)
	position := func(name, topic string, want int64) {
		t.Helper()
		testbroker.WaitFor(t, 60*time.Second, name+"'s position at "+strconv.FormatInt(want, 10), func() string {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			offs, err := adm.FetchOffsets(ctx, transforms.GroupPrefix+name)
			if err != nil {
				return err.Error()
			}
			if o, ok := offs.Lookup(topic, 0); !ok || o.At != want {
				return fmt.Sprintf("%s/0 at %d (found %v)", topic, o.At, ok)
			}
			return ""
		})
	}
	position("drp", "din", 4)
	position("rej", "rin", 2)
	// The rejecting transform keeps failing at the trap and writes nothing more.
	testbroker.WaitFor(t, 60*time.Second, "rej retried the trap", func() string {
		if s := list(t, b)["rej"]; s.Failures < 3 {
			return fmt.Sprintf("%d failures", s.Failures)
		}
		return ""
	})
	position("rej", "rin", 2)
	for topic, want := range map[string][]string{"dout": {"a", "b", "c"}, "rout": {"a", "b"}} {
		if err := produce(t, cl, &kgo.Record{Topic: topic, Value: []byte("end-mark")}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		rc := b.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(100*time.Millisecond))
		var got []string
		for !slices.Contains(got, "end-mark") && ctx.Err() == nil {
			rc.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		}
		cancel()
		if want = append(want, "end-mark"); !slices.Equal(got, want) {
			t.Errorf("%s holds %q, want %q", topic, got, want)
		}
	}
	if s := list(t, b)["drp"]; s.Dropped != 1 {
		t.Errorf("drp dropped %d records, want 1", s.Dropped)
	}
}
