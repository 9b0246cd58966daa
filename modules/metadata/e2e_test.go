package metadata_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/testbroker"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func configOf(t *testing.T, rcs kadm.ResourceConfigs, name string) kadm.Config {
	t.Helper()
	if len(rcs) != 1 || rcs[0].Err != nil {
		t.Fatalf("describe: %+v", rcs)
	}
	for _, c := range rcs[0].Configs {
		if c.Key == name {
			return c
		}
	}
	t.Fatalf("config %s not described", name)
	return kadm.Config{}
}

func TestE2ETopicLifecycle(t *testing.T) {
	b := testbroker.Start(t)
	adm := b.Admin(t)
	ctx := testCtx(t)

	created, err := adm.CreateTopics(ctx, 3, 1, map[string]*string{"retention.ms": kadm.StringPtr("60000")}, "orders", "events")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"orders", "events"} {
		r := created[name]
		if r.Err != nil || r.ID == (kadm.TopicID{}) || r.NumPartitions != 3 || r.ReplicationFactor != 1 {
			t.Fatalf("create %s: %+v", name, r)
		}
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "orders"); !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Errorf("create again: %v", err)
	}

	topics, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := topics.Names(); !slices.Equal(got, []string{"events", "orders"}) {
		t.Fatalf("topics %v", got)
	}
	orders := topics["orders"]
	if orders.ID != created["orders"].ID || len(orders.Partitions) != 3 {
		t.Errorf("orders: %+v", orders)
	}
	for _, p := range orders.Partitions {
		if p.Leader != 1 || p.Err != nil || !slices.Equal(p.Replicas, []int32{1}) {
			t.Errorf("partition %+v", p)
		}
	}

	// Partitions: grow, then refuse to shrink.
	if rs, err := adm.CreatePartitions(ctx, 2, "orders"); err != nil || rs["orders"].Err != nil {
		t.Fatalf("add partitions: %v %+v", err, rs)
	}
	if rs, _ := adm.UpdatePartitions(ctx, 2, "orders"); !errors.Is(rs["orders"].Err, kerr.InvalidPartitions) {
		t.Errorf("shrink: %+v", rs)
	}
	if topics, _ = adm.ListTopics(ctx, "orders"); len(topics["orders"].Partitions) != 5 {
		t.Errorf("after grow: %d partitions", len(topics["orders"].Partitions))
	}

	// Topic configs: describe, incremental alter, full replace.
	rcs, err := adm.DescribeTopicConfigs(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if c := configOf(t, rcs, "retention.ms"); c.MaybeValue() != "60000" || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Errorf("retention.ms: %+v", c)
	}
	alters := []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "segment.ms", Value: kadm.StringPtr("3600000")},
		{Op: kadm.DeleteConfig, Name: "retention.ms"},
		{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: kadm.StringPtr("compact")},
	}
	if rs, err := adm.AlterTopicConfigs(ctx, alters, "orders"); err != nil || rs[0].Err != nil {
		t.Fatalf("incremental alter: %v %+v", err, rs)
	}
	rcs, _ = adm.DescribeTopicConfigs(ctx, "orders")
	if c := configOf(t, rcs, "segment.ms"); c.MaybeValue() != "3600000" {
		t.Errorf("segment.ms: %+v", c)
	}
	if c := configOf(t, rcs, "retention.ms"); c.Source == kmsg.ConfigSourceDynamicTopicConfig {
		t.Errorf("retention.ms still set: %+v", c)
	}
	if c := configOf(t, rcs, "cleanup.policy"); c.MaybeValue() != "delete,compact" {
		t.Errorf("cleanup.policy: %+v", c)
	}
	bad := []kadm.AlterConfig{{Name: "retention.ms", Value: kadm.StringPtr("forever")}}
	if rs, _ := adm.AlterTopicConfigs(ctx, bad, "orders"); len(rs) != 1 || !errors.Is(rs[0].Err, kerr.InvalidConfig) || rs[0].ErrMessage == "" {
		t.Errorf("bad value: %+v", rs)
	}
	state := []kadm.AlterConfig{{Name: "max.message.bytes", Value: kadm.StringPtr("2048")}}
	if rs, err := adm.AlterTopicConfigsState(ctx, state, "orders"); err != nil || rs[0].Err != nil {
		t.Fatalf("full replace: %v %+v", err, rs)
	}
	rcs, _ = adm.DescribeTopicConfigs(ctx, "orders")
	if c := configOf(t, rcs, "segment.ms"); c.Source == kmsg.ConfigSourceDynamicTopicConfig {
		t.Errorf("full replace kept segment.ms: %+v", c)
	}
	if c := configOf(t, rcs, "max.message.bytes"); c.MaybeValue() != "2048" {
		t.Errorf("max.message.bytes: %+v", c)
	}
	if rcs, _ := adm.DescribeTopicConfigs(ctx, "nope"); len(rcs) != 1 || !errors.Is(rcs[0].Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("describe missing topic: %+v", rcs)
	}

	// Delete.
	if rs, err := adm.DeleteTopics(ctx, "events", "missing"); err != nil || rs["events"].Err != nil ||
		!errors.Is(rs["missing"].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("delete: %v %+v", err, rs)
	}
	// A fresh client: kgo caches metadata answers for a few seconds.
	if topics, _ = b.Admin(t).ListTopics(ctx); !slices.Equal(topics.Names(), []string{"orders"}) {
		t.Errorf("after delete: %v", topics.Names())
	}
	// By id (v6).
	del := kmsg.NewPtrDeleteTopicsRequest()
	rt := kmsg.NewDeleteTopicsRequestTopic()
	rt.TopicID = created["orders"].ID
	del.Topics = append(del.Topics, rt)
	delResp, err := del.RequestWith(ctx, b.Client(t))
	if err != nil || len(delResp.Topics) != 1 || delResp.Topics[0].ErrorCode != 0 || delResp.Topics[0].Topic == nil || *delResp.Topics[0].Topic != "orders" {
		t.Fatalf("delete by id: %v %+v", err, delResp)
	}
}

// badCreate is a CreateTopics of one topic that must fail with want.
type badCreate struct {
	name       string
	topic      string
	partitions int32
	rf         int16
	configs    map[string]*string
	want       *kerr.Error
}

func TestE2EValidation(t *testing.T) {
	b := testbroker.Start(t)
	adm := b.Admin(t)
	ctx := testCtx(t)
	for _, tc := range []badCreate{
		{"invalid name", "a/b", 1, 1, nil, kerr.InvalidTopicException},
		{"too many replicas", "rf", 1, 3, nil, kerr.InvalidReplicationFactor},
		{"no partitions", "np", 0, 1, nil, kerr.InvalidPartitions},
		{"unknown config", "uc", 1, 1, map[string]*string{"retention.mss": kadm.StringPtr("1")}, kerr.InvalidConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := adm.CreateTopic(ctx, tc.partitions, tc.rf, tc.configs, tc.topic)
			if !errors.Is(err, tc.want) {
				t.Errorf("err %v, want %v", err, tc.want)
			}
			if r.ErrMessage == "" {
				t.Errorf("no error message")
			}
		})
	}
	// Validate-only creates nothing.
	if rs, err := adm.ValidateCreateTopics(ctx, 2, 1, nil, "dry"); err != nil || rs["dry"].Err != nil {
		t.Fatalf("validate: %v %+v", err, rs)
	}
	if topics, _ := adm.ListTopics(ctx); len(topics) != 0 {
		t.Errorf("validate-only created %v", topics.Names())
	}
	// Broker defaults (-1).
	if r, err := adm.CreateTopic(ctx, -1, -1, nil, "defaults"); err != nil || r.NumPartitions != 1 || r.ReplicationFactor != 1 {
		t.Errorf("defaults: %v %+v", err, r)
	}
}

func TestE2EBrokerConfigsAndCluster(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig("configs:\n  log.retention.ms: \"7000\"\n"))
	adm := b.Admin(t)
	ctx := testCtx(t)

	rcs, err := adm.DescribeBrokerConfigs(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if c := configOf(t, rcs, "log.retention.ms"); c.MaybeValue() != "7000" || c.Source != kmsg.ConfigSourceStaticBrokerConfig {
		t.Errorf("static: %+v", c)
	}
	set := []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "log.retention.ms", Value: kadm.StringPtr("8000")}}
	if rs, err := adm.AlterBrokerConfigs(ctx, set, 1); err != nil || rs[0].Err != nil {
		t.Fatalf("alter broker: %v %+v", err, rs)
	}
	rcs, _ = adm.DescribeBrokerConfigs(ctx, 1)
	if c := configOf(t, rcs, "log.retention.ms"); c.MaybeValue() != "8000" || c.Source != kmsg.ConfigSourceDynamicBrokerConfig {
		t.Errorf("dynamic: %+v", c)
	}
	// Topics inherit it.
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "inherit"); err != nil {
		t.Fatal(err)
	}
	trcs, _ := adm.DescribeTopicConfigs(ctx, "inherit")
	if c := configOf(t, trcs, "retention.ms"); c.MaybeValue() != "8000" || c.Source != kmsg.ConfigSourceDynamicBrokerConfig {
		t.Errorf("topic inherits: %+v", c)
	}
	ro := []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "node.id", Value: kadm.StringPtr("4")}}
	if rs, _ := adm.AlterBrokerConfigs(ctx, ro, 1); len(rs) != 1 || !errors.Is(rs[0].Err, kerr.InvalidRequest) {
		t.Errorf("read-only: %+v", rs)
	}

	md, err := adm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Cluster) != 22 || md.Controller != 1 || len(md.Brokers) != 1 {
		t.Errorf("metadata: %+v", md)
	}
	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.IncludeClusterAuthorizedOperations = true
	dcr, err := dc.RequestWith(ctx, b.Client(t))
	if err != nil || dcr.ErrorCode != 0 || dcr.ClusterID != md.Cluster || dcr.ControllerID != 1 || len(dcr.Brokers) != 1 ||
		dcr.Brokers[0].Port != md.Brokers[0].Port || dcr.ClusterAuthorizedOperations <= 0 {
		t.Errorf("describe cluster: %v %+v", err, dcr)
	}
}

func TestE2EAutoCreate(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig("configs:\n  num.partitions: \"2\"\n"))
	ctx := testCtx(t)
	cl := b.Client(t)

	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("auto")
	req.Topics = append(req.Topics, rt)
	req.AllowAutoTopicCreation = false
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("without auto-creation: %v %+v", err, resp)
	}
	req.AllowAutoTopicCreation = true
	resp, err = req.RequestWith(ctx, cl)
	if err != nil || resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) != 2 || resp.Topics[0].TopicID == [16]byte{} {
		t.Fatalf("auto-created: %v %+v", err, resp)
	}

	// A producer that may auto-create gets its topic and can write to it.
	prod := b.Client(t, kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("produced"))
	if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("produce to an auto-created topic: %v", err)
	}
	topics, err := b.Admin(t).ListTopics(ctx)
	if err != nil || !slices.Equal(topics.Names(), []string{"auto", "produced"}) {
		t.Errorf("topics: %v %v", err, topics.Names())
	}
}

func TestE2ERestart(t *testing.T) {
	b := testbroker.Start(t)
	ctx := testCtx(t)
	adm := b.Admin(t)
	created, err := adm.CreateTopic(ctx, 4, 1, map[string]*string{"retention.ms": kadm.StringPtr("12345")}, "durable")
	if err != nil {
		t.Fatal(err)
	}
	set := []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "log.retention.bytes", Value: kadm.StringPtr("1048576")}}
	if rs, err := adm.AlterBrokerConfigs(ctx, set); err != nil || rs[0].Err != nil { // cluster default
		t.Fatalf("alter cluster default: %v %+v", err, rs)
	}
	md, err := adm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}

	b.Restart(t)
	adm = b.Admin(t)
	md2, err := adm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if md2.Cluster != md.Cluster {
		t.Errorf("cluster id %s, was %s", md2.Cluster, md.Cluster)
	}
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d := topics["durable"]
	if d.ID != created.ID || len(d.Partitions) != 4 {
		t.Errorf("topic after restart: %+v", d)
	}
	rcs, _ := adm.DescribeTopicConfigs(ctx, "durable")
	if c := configOf(t, rcs, "retention.ms"); c.MaybeValue() != "12345" {
		t.Errorf("topic config after restart: %+v", c)
	}
	rcs, _ = adm.DescribeBrokerConfigs(ctx)
	if c := configOf(t, rcs, "log.retention.bytes"); c.MaybeValue() != "1048576" || c.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Errorf("cluster default after restart: %+v", c)
	}
}

// TestE2EConfigSection starts the module from its YAML section (strictly decoded by the
// kernel), with the TCP transport on a kernel-chosen port, and restarts it: a single
// voter finds itself by id even though its raft address changed.
func TestE2EConfigSection(t *testing.T) {
	cfg := `
modules:
  metadata:
    use: raft
    raft_listen: 127.0.0.1:0
    heartbeat_timeout: 40ms
    election_timeout: 40ms
    lease_timeout: 20ms
    commit_timeout: 2ms
    snapshot_threshold: 4
    snapshot_interval: 50ms
`
	b := testbroker.Start(t, testbroker.WithConfig(cfg))
	ctx := testCtx(t)
	for _, name := range []string{"t1", "t2", "t3", "t4", "t5"} {
		if _, err := b.Admin(t).CreateTopic(ctx, 1, 1, nil, name); err != nil {
			t.Fatal(err)
		}
	}
	b.Restart(t)
	topics, err := b.Admin(t).ListTopics(ctx)
	if err != nil || len(topics) != 5 {
		t.Fatalf("after restart: %v %v", err, topics.Names())
	}
}
