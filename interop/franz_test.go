package interop

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFranzAdmin covers the admin calls the Python client of Debian 12 lacks, with kadm:
// IncrementalAlterConfigs (set and delete), DescribeCluster, DeleteRecords (and the new
// log start offset seen by ListOffsets and Fetch), and OffsetForLeaderEpoch.
func TestFranzAdmin(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	const topic = "kadm-admin"
	createTopic(t, b.addr, topic, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := newClient(t, b.addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)

	t.Run("incremental alter configs", func(t *testing.T) {
		retention := func() kadm.Config {
			t.Helper()
			rcs, err := adm.DescribeTopicConfigs(ctx, topic)
			if err != nil {
				t.Fatalf("DescribeTopicConfigs: %v", err)
			}
			rc, err := rcs.On(topic, nil)
			if err == nil {
				err = rc.Err
			}
			if err != nil {
				t.Fatalf("DescribeTopicConfigs %s: %v", topic, err)
			}
			for _, c := range rc.Configs {
				if c.Key == "retention.ms" {
					return c
				}
			}
			t.Fatalf("DescribeTopicConfigs %s: no retention.ms among %d configs", topic, len(rc.Configs))
			return kadm.Config{}
		}
		alter := func(op kadm.IncrementalOp, value *string) {
			t.Helper()
			resps, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: op, Name: "retention.ms", Value: value}}, topic)
			if err == nil {
				for _, r := range resps {
					if r.Err != nil {
						err = fmt.Errorf("%s: %w (%s)", r.Name, r.Err, r.ErrMessage)
					}
				}
			}
			if err != nil {
				t.Fatalf("AlterTopicConfigs (incremental, op %v): %v", op, err)
			}
		}

		alter(kadm.SetConfig, kadm.StringPtr("123456"))
		if c := retention(); c.MaybeValue() != "123456" || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
			t.Errorf("after SET: retention.ms = %q (source %v), want 123456 (DYNAMIC_TOPIC_CONFIG)", c.MaybeValue(), c.Source)
		}
		alter(kadm.DeleteConfig, nil)
		if c := retention(); c.MaybeValue() == "123456" || c.Source == kmsg.ConfigSourceDynamicTopicConfig {
			t.Errorf("after DELETE: retention.ms = %q (source %v), want the default back", c.MaybeValue(), c.Source)
		}
	})

	t.Run("describe cluster", func(t *testing.T) {
		resp, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("DescribeCluster: %v", err)
		}
		if resp.ErrorCode != 0 {
			t.Fatalf("DescribeCluster: error code %d (%v)", resp.ErrorCode, resp.ErrorMessage)
		}
		host, port, _ := net.SplitHostPort(b.addr)
		if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != 1 || resp.Brokers[0].Host != host ||
			strconv.Itoa(int(resp.Brokers[0].Port)) != port {
			t.Errorf("DescribeCluster brokers = %+v, want node 1 at %s", resp.Brokers, b.addr)
		}
		if resp.ControllerID != 1 || resp.ClusterID == "" {
			t.Errorf("DescribeCluster: controller %d, cluster id %q; want controller 1 and an id", resp.ControllerID, resp.ClusterID)
		}
	})

	t.Run("delete records", func(t *testing.T) {
		var recs []*kgo.Record
		for i := 0; i < 10; i++ {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Value: []byte(fmt.Sprintf("r%d", i))})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		var to kadm.Offsets
		to.AddOffset(topic, 0, 4, -1)
		resps, err := adm.DeleteRecords(ctx, to)
		if err != nil {
			t.Fatalf("DeleteRecords: %v", err)
		}
		r, ok := resps.Lookup(topic, 0)
		if !ok || r.Err != nil || r.LowWatermark != 4 {
			t.Fatalf("DeleteRecords to 4: %+v (found %v), want low watermark 4", r, ok)
		}
		starts, err := adm.ListStartOffsets(ctx, topic)
		if err != nil {
			t.Fatalf("ListStartOffsets: %v", err)
		}
		if o, ok := starts.Lookup(topic, 0); !ok || o.Err != nil || o.Offset != 4 {
			t.Errorf("ListStartOffsets after DeleteRecords: %+v, want 4", o)
		}
		got := fetchAll(t, b.addr, topic, []int32{0}, 30*time.Second)[0]
		if len(got) != 6 || got[0].Offset != 4 || string(got[0].Value) != "r4" || string(got[5].Value) != "r9" {
			var desc []string
			for _, r := range got {
				desc = append(desc, fmt.Sprintf("%d:%s", r.Offset, r.Value))
			}
			t.Errorf("fetch from the start after DeleteRecords: %v, want offsets 4..9 (r4..r9)", desc)
		}
	})

	t.Run("offset for leader epoch", func(t *testing.T) {
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			t.Fatalf("Metadata: %v", err)
		}
		p, ok := md.Topics[topic].Partitions[0]
		if !ok {
			t.Fatalf("Metadata: no partition 0 of %s", topic)
		}
		var req kadm.OffsetForLeaderEpochRequest
		req.Add(topic, 0, p.LeaderEpoch)
		resps, err := adm.OffsetForLeaderEpoch(ctx, req)
		if err != nil {
			t.Fatalf("OffsetForLeaderEpoch: %v", err)
		}
		r, ok := resps[topic][0]
		if !ok || r.Err != nil || r.EndOffset != 10 || r.LeaderEpoch != p.LeaderEpoch {
			t.Errorf("OffsetForLeaderEpoch(epoch %d) = %+v, want end offset 10 in epoch %d", p.LeaderEpoch, r, p.LeaderEpoch)
		}
	})
}
