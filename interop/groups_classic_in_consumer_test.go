package interop

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kip848 is the context value that makes kgo speak the consumer group protocol
// (KIP-848) instead of the classic one.
func kip848() context.Context {
	//lint:ignore SA1029 kgo looks the opt-in up by this exact string key.
	return context.WithValue(context.Background(), "opt_in_kafka_next_gen_balancer_beta", true)
}

// TestClassicClientsInConsumerGroup: a kgo member in KIP-848 mode makes the group a
// consumer group; kcat -G and librdkafka (range), kafkajs (RoundRobinAssigner) and
// sarama (roundrobin) then join it as classic members. Their protocols have nothing in
// common, so as a classic group they could not even form; inside the consumer group
// the server's assignor assigns all five and the group consumes everything. When the
// KIP-848 member leaves, the default migration policy would downgrade the group, but
// its classic members share no protocol: it stays a consumer group, its four classic
// members are assigned every partition, and it goes on consuming.
func TestClassicClientsInConsumerGroup(t *testing.T) {
	t.Parallel()
	kcat := needKcat(t)
	needLibrdkafka(t)
	node := needKafkajs(t)
	b := startBrokerConfig(t, `configs: {group.initial.rebalance.delay.ms: "0", offsets.topic.num.partitions: "4", group.min.session.timeout.ms: "1000", group.consumer.heartbeat.interval.ms: "300"}
`)
	const (
		topic      = "classic-in-848"
		group      = "classic-in-848-g"
		partitions = 6
	)
	createTopic(t, b.addr, topic, partitions)
	cl := newClient(t, b.addr)
	adm := kadm.NewClient(cl)
	produceSeq(t, b.addr, topic, partitions, "first", 300)

	next := startKgoMember(t, b.addr, kgo.WithContext(kip848()), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ClientID("mixed848-kgo"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.AutoCommitInterval(100*time.Millisecond), kgo.FetchMaxWait(100*time.Millisecond))
	waitConsumerShape(t, cl, group, topic, partitions, 0, 1)

	classics := startClassicClients(t, kcat, node, b.addr, topic, group, "mixed848")
	waitConsumerShape(t, cl, group, topic, partitions, 4, 1)
	waitCommittedAtEnd(t, adm, group, topic, 30*time.Second)

	next.Close()
	waitConsumerShape(t, cl, group, topic, partitions, 4, 0)
	produceSeq(t, b.addr, topic, partitions, "second", 60)
	waitCommittedAtEnd(t, adm, group, topic, 30*time.Second)

	classics.stop(t)
}

// waitConsumerShape waits until ConsumerGroupDescribe shows group as a Stable consumer
// group with classic classic-protocol and consumers consumer-protocol members, every
// one of them holding a partition and the partitions of topic assigned once each.
func waitConsumerShape(t *testing.T, cl *kgo.Client, group, topic string, partitions, classic, consumers int) {
	t.Helper()
	why := ""
	if !pollUntil(60*time.Second, func() bool {
		why = consumerShape(cl, group, topic, partitions, classic, consumers)
		return why == ""
	}) {
		t.Fatalf("group %s: not a stable consumer group with %d classic and %d consumer members: %s", group, classic, consumers, why)
	}
}

func consumerShape(cl *kgo.Client, group, topic string, partitions, classic, consumers int) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err.Error()
	}
	if len(resp.Groups) != 1 {
		return fmt.Sprintf("%d groups described", len(resp.Groups))
	}
	g := resp.Groups[0]
	if g.ErrorCode != 0 || g.State != "Stable" {
		return fmt.Sprintf("error %d, state %s", g.ErrorCode, g.State)
	}
	types := map[int8]int{}
	owner := map[int32]string{}
	for _, m := range g.Members {
		types[m.MemberType]++
		n := 0
		for _, tp := range m.Assignment.TopicPartitions {
			if tp.Topic != topic {
				return "assigned foreign topic " + tp.Topic
			}
			for _, p := range tp.Partitions {
				if o, dup := owner[p]; dup {
					return fmt.Sprintf("partition %d assigned to %s and %s", p, o, m.ClientID)
				}
				owner[p] = m.ClientID
				n++
			}
		}
		if n == 0 {
			return "member " + m.ClientID + " holds nothing"
		}
	}
	if types[0] != classic || types[1] != consumers {
		return fmt.Sprintf("member types %v", types)
	}
	if len(owner) != partitions {
		return fmt.Sprintf("%d of %d partitions assigned", len(owner), partitions)
	}
	return ""
}
