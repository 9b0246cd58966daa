package groups_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/testbroker"
)

// groupConfig is a broker config for group tests: no initial rebalance delay and a
// small __consumer_offsets so loading is quick.
const groupConfig = `
configs:
  group.initial.rebalance.delay.ms: "0"
  offsets.topic.num.partitions: "4"
`

func produceN(t *testing.T, cl *kgo.Client, topic string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint(i))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

func TestClassicGroupSmoke(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig(groupConfig))
	adm := b.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 6, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	produceN(t, b.Client(t), "orders", 600)

	var clients []*kgo.Client
	for i := range 3 {
		clients = append(clients, b.Client(t, kgo.ConsumerGroup("g1"), kgo.ConsumeTopics("orders"),
			kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.ClientID(fmt.Sprintf("c%d", i))))
	}
	seen := consumeInGroup(t, ctx, clients, 600)()
	if len(seen) != 600 {
		t.Fatalf("consumed %d distinct records, want 600", len(seen))
	}
	groups, err := adm.DescribeGroups(ctx, "g1")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("group: %+v", groups["g1"].State)
	lag, err := adm.Lag(ctx, "g1")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("lag: %v", lag["g1"].Lag.Total())
}

// consumeInGroup polls with every client (members of one group) until the clients
// together saw want distinct values, then commits each client's offsets. It returns at
// once; the returned func waits and returns how often each value was consumed.
func consumeInGroup(t *testing.T, ctx context.Context, clients []*kgo.Client, want int) func() map[string]int {
	t.Helper()
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	pollCtx, stop := context.WithCancel(ctx)
	for _, cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if err := cl.CommitUncommittedOffsets(ctx); err != nil {
					t.Errorf("commit: %v", err)
				}
			}()
			for pollCtx.Err() == nil {
				cl.PollFetches(pollCtx).EachRecord(func(r *kgo.Record) {
					mu.Lock()
					seen[string(r.Value)]++
					mu.Unlock()
				})
				mu.Lock()
				n := len(seen)
				mu.Unlock()
				if n >= want {
					stop()
				}
			}
		}()
	}
	return func() map[string]int {
		wg.Wait()
		stop()
		return seen
	}
}
