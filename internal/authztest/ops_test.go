package authztest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/testbroker"
	"github.com/sluicehq/sluice/kernel"
)

// Kafka's supported operations of each resource type: what an authorized-operations
// bit field is made of (AclEntry.supportedOperations).
var (
	topicOps   = []kernel.Operation{kernel.OpRead, kernel.OpWrite, kernel.OpCreate, kernel.OpDelete, kernel.OpAlter, kernel.OpDescribe, kernel.OpDescribeConfigs, kernel.OpAlterConfigs}
	clusterOps = []kernel.Operation{kernel.OpCreate, kernel.OpAlter, kernel.OpDescribe, kernel.OpClusterAction, kernel.OpDescribeConfigs, kernel.OpAlterConfigs, kernel.OpIdempotentWrite}
	groupOps   = []kernel.Operation{kernel.OpRead, kernel.OpDescribe, kernel.OpDelete, kernel.OpDescribeConfigs, kernel.OpAlterConfigs}
)

// bits is the field of ops without the denied ones.
func bits(ops []kernel.Operation, typ kernel.ResourceType, name string, deny []check) int32 {
	var b int32
	for _, op := range ops {
		if !slices.Contains(deny, check{op, typ, name}) {
			b |= 1 << op
		}
	}
	return b
}

// askedOps is the set of operations asked about one resource.
func askedOps(qs []asked, typ kernel.ResourceType, name string) []kernel.Operation {
	var out []kernel.Operation
	for _, q := range qs {
		if q.Type == typ && q.Name == name && !slices.Contains(out, q.Op) {
			out = append(out, q.Op)
		}
	}
	slices.Sort(out)
	return out
}

func sorted(ops []kernel.Operation) []kernel.Operation {
	out := slices.Clone(ops)
	slices.Sort(out)
	return out
}

// TestAuthorizedOperations checks that every authorized-operations field reports
// exactly what the authorizer allows: each of the resource type's operations is asked,
// and the bits are the allowed ones.
func TestAuthorizedOperations(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker")
	}
	f := newFixture(t)
	cl := kernel.ClusterResourceName
	for _, tc := range []struct {
		name string
		deny []check
		maxV int16
		req  func() kmsg.Request
		// got returns each field with its resource.
		got func(kmsg.Response) map[check]int32
	}{
		{
			name: "Metadata v10: cluster and topic", maxV: 10,
			deny: []check{cluster(kernel.OpAlter), topic(kernel.OpWrite, topicT), topic(kernel.OpDelete, topicT)},
			req: func() kmsg.Request {
				r := kmsg.NewPtrMetadataRequest()
				r.IncludeClusterAuthorizedOperations, r.IncludeTopicAuthorizedOperations = true, true
				rt := kmsg.NewMetadataRequestTopic()
				rt.Topic = strp(topicT)
				r.Topics = append(r.Topics, rt)
				return r
			},
			got: func(resp kmsg.Response) map[check]int32 {
				r := resp.(*kmsg.MetadataResponse)
				return map[check]int32{
					{Type: kernel.ResCluster, Name: cl}:   r.AuthorizedOperations,
					{Type: kernel.ResTopic, Name: topicT}: r.Topics[0].AuthorizedOperations,
				}
			},
		},
		{
			name: "Metadata v10: nothing on the cluster without Describe", maxV: 10,
			deny: []check{cluster(kernel.OpDescribe)},
			req: func() kmsg.Request {
				r := kmsg.NewPtrMetadataRequest()
				r.IncludeClusterAuthorizedOperations = true
				r.Topics = []kmsg.MetadataRequestTopic{}
				return r
			},
			got: func(resp kmsg.Response) map[check]int32 {
				return map[check]int32{{Type: kernel.ResCluster, Name: cl}: resp.(*kmsg.MetadataResponse).AuthorizedOperations}
			},
		},
		{
			name: "DescribeCluster", maxV: -1,
			deny: []check{cluster(kernel.OpClusterAction), cluster(kernel.OpCreate)},
			req: func() kmsg.Request {
				r := kmsg.NewPtrDescribeClusterRequest()
				r.IncludeClusterAuthorizedOperations = true
				return r
			},
			got: func(resp kmsg.Response) map[check]int32 {
				return map[check]int32{{Type: kernel.ResCluster, Name: cl}: resp.(*kmsg.DescribeClusterResponse).ClusterAuthorizedOperations}
			},
		},
		{
			name: "DescribeGroups", maxV: -1,
			deny: []check{group(kernel.OpDelete, groupG), group(kernel.OpAlterConfigs, groupG)},
			req: func() kmsg.Request {
				r := kmsg.NewPtrDescribeGroupsRequest()
				r.Groups, r.IncludeAuthorizedOperations = []string{groupG}, true
				return r
			},
			got: func(resp kmsg.Response) map[check]int32 {
				return map[check]int32{{Type: kernel.ResGroup, Name: groupG}: resp.(*kmsg.DescribeGroupsResponse).Groups[0].AuthorizedOperations}
			},
		},
		{
			name: "ConsumerGroupDescribe", maxV: -1,
			deny: []check{group(kernel.OpRead, groupCG), group(kernel.OpDescribeConfigs, groupCG)},
			req: func() kmsg.Request {
				r := kmsg.NewPtrConsumerGroupDescribeRequest()
				r.Groups, r.IncludeAuthorizedOperations = []string{groupCG}, true
				return r
			},
			got: func(resp kmsg.Response) map[check]int32 {
				return map[check]int32{{Type: kernel.ResGroup, Name: groupCG}: resp.(*kmsg.ConsumerGroupDescribeResponse).Groups[0].AuthorizedOperations}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req()
			cl := f.clientFor(t, kmsg.Key(req.Key()), tc.maxV)
			f.rec.set(tc.deny...)
			resp := f.sendWith(t, cl, req)
			qs := f.rec.questions()
			f.rec.set()
			for res, field := range tc.got(resp) {
				var ops []kernel.Operation
				switch res.Type {
				case kernel.ResTopic:
					ops = topicOps
				case kernel.ResCluster:
					ops = clusterOps
				case kernel.ResGroup:
					ops = groupOps
				}
				want := bits(ops, res.Type, res.Name, tc.deny)
				if res.Type == kernel.ResCluster && slices.Contains(tc.deny, cluster(kernel.OpDescribe)) {
					want = 0 // as Kafka: no cluster operations without Describe on it
				} else if got := askedOps(qs, res.Type, res.Name); !slices.Equal(got, sorted(ops)) {
					t.Errorf("%s %q: asked %v, want every supported operation %v", resName(res.Type), res.Name, got, sorted(ops))
				}
				if field != want {
					t.Errorf("%s %q: authorized operations %013b, want %013b", resName(res.Type), res.Name, field, want)
				}
			}
		})
	}
}

// TestAllowedPaths runs the clients' ordinary flows with everything allowed: an
// idempotent producer, a consumer group, a transaction and topic administration all
// work, and each asked the checks its APIs need.
func TestAllowedPaths(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker")
	}
	rec := &recorder{}
	rec.set()
	b := testbroker.Start(t, testbroker.WithModules(rec.info()), testbroker.WithConfig("modules:\n  auth: {use: recorder}\n"))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := b.Admin(t)
	const tp, grp, tx = "ap", "ap-group", "ap-tx"
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"retention.ms": strp("600000")}, tp); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	prod := b.Client(t, kgo.DefaultProduceTopic(tp))
	if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte("a")}).FirstErr(); err != nil {
		t.Fatalf("idempotent produce: %v", err)
	}
	txp := b.Client(t, kgo.DefaultProduceTopic(tp), kgo.TransactionalID(tx))
	if err := txp.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txp.ProduceSync(ctx, &kgo.Record{Value: []byte("b")}).FirstErr(); err != nil {
		t.Fatalf("transactional produce: %v", err)
	}
	if err := txp.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit: %v", err)
	}
	cons := b.Client(t, kgo.ConsumeTopics(tp), kgo.ConsumerGroup(grp), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.DisableAutoCommit())
	var got int
	for got < 2 {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("consume: %v", err)
		}
		got += fs.NumRecords()
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit offsets: %v", err)
	}
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: strp("700000")}}, tp); err != nil {
		t.Fatalf("alter configs: %v", err)
	}
	if r, err := adm.DeleteTopics(ctx, tp); err != nil || r.Error() != nil {
		t.Fatalf("delete topic: %v %v", err, r.Error())
	}
	qs := rec.questions()
	for _, c := range []check{
		cluster(kernel.OpCreate), topic(kernel.OpWrite, tp), cluster(kernel.OpIdempotentWrite),
		txnID(kernel.OpWrite, tx), txnID(kernel.OpDescribe, tx), topic(kernel.OpRead, tp),
		group(kernel.OpRead, grp), group(kernel.OpDescribe, grp), topic(kernel.OpDescribe, tp),
		topic(kernel.OpAlterConfigs, tp), cluster(kernel.OpDelete),
	} {
		if !askedFor(qs, c) {
			t.Errorf("%s was never asked", c)
		}
	}
}
