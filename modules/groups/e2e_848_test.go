package groups_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/testbroker"
)

// nextGen is the context value that makes kgo use KIP-848 (see its consumer_group_848.go).
func nextGen() context.Context {
	//lint:ignore SA1029 kgo looks the opt-in up by this exact string key.
	return context.WithValue(context.Background(), "opt_in_kafka_next_gen_balancer_beta", true)
}

func TestConsumerGroup848Smoke(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig(groupConfig))
	adm := b.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 6, 1, nil, "t848"); err != nil {
		t.Fatal(err)
	}
	var clients []*kgo.Client
	for range 2 {
		clients = append(clients, b.Client(t, kgo.ConsumerGroup("g848"), kgo.ConsumeTopics("t848"), kgo.WithContext(nextGen())))
	}
	wait := consumeInGroup(t, ctx, clients, 300)
	describe := func() kmsg.ConsumerGroupDescribeResponseGroup {
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{"g848"}
		resp, err := req.RequestWith(ctx, b.Client(t))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Groups[0]
	}
	// Both members reconciled: disjoint assignments covering all six partitions.
	deadline := time.Now().Add(30 * time.Second)
	for {
		g := describe()
		owned := map[int32]int{}
		for _, mb := range g.Members {
			for _, tp := range mb.Assignment.TopicPartitions {
				for _, p := range tp.Partitions {
					owned[p]++
				}
			}
		}
		ok := g.State == "Stable" && len(g.Members) == 2 && len(owned) == 6
		for _, n := range owned {
			ok = ok && n == 1
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("group never reconciled: %+v", g)
		}
		time.Sleep(20 * time.Millisecond)
	}
	produceN(t, b.Client(t), "t848", 300)
	if seen := wait(); len(seen) != 300 {
		t.Fatalf("consumed %d, want 300", len(seen))
	}
	g := describe()
	t.Logf("848 group: err=%d state=%s epoch=%d assignor=%s members=%d", g.ErrorCode, g.State, g.Epoch, g.AssignorName, len(g.Members))
	if g.ErrorCode != 0 || len(g.Members) != 2 {
		t.Fatalf("describe: %+v", g)
	}
	lag, err := adm.Lag(ctx, "g848")
	if err != nil {
		t.Fatal(err)
	}
	if l := lag["g848"]; l.Error() != nil || l.Lag.Total() != 0 {
		t.Fatalf("lag = %v (%v), want 0", l.Lag.Total(), l.Error())
	}
}
