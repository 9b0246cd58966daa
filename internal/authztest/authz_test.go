package authztest

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
)

// TestWhatEachAPIChecks runs every row of the table: with the row's checks denied, the
// request gets the row's answer, the denied checks were asked (by the connection's
// principal and host), and the state the row names did not change. Every key the
// broker claims must have a row.
func TestWhatEachAPIChecks(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker")
	}
	f := newFixture(t)
	covered := map[kmsg.Key]bool{}
	for _, r := range rows() {
		covered[r.key] = true
		t.Run(r.name, func(t *testing.T) {
			var before any
			if r.state != nil {
				f.rec.set()
				before = r.state(t, f)
			}
			cl := f.clientFor(t, r.key, r.maxV)
			f.rec.set(r.deny...)
			resp := f.sendWith(t, cl, r.req(f))
			qs := f.rec.questions()
			f.rec.set()
			r.verify(t, f, resp)
			if r.asksNothing && len(qs) > 0 {
				t.Errorf("an API without ACLs asked %v", qs)
			}
			for _, c := range r.deny {
				if !r.mayNotAsk && !askedFor(qs, c) {
					t.Errorf("%s was never asked (asked: %v)", c, qs)
				}
			}
			for _, q := range qs {
				if q.principal != kernel.Anonymous || q.host != "127.0.0.1" {
					t.Errorf("asked for %v at %q, want %v at 127.0.0.1", q.principal, q.host, kernel.Anonymous)
				}
			}
			if r.state != nil {
				if after := r.state(t, f); !equal(before, after) {
					t.Errorf("state changed by a denied request: before %v, after %v", before, after)
				}
			}
			if r.state == nil && r.codes != nil && r.denied.Code != 0 {
				for _, c := range r.codes(f.sendWith(t, cl, r.req(f))) {
					if c == r.denied.Code {
						t.Errorf("allowed, the request still gets %s", r.denied.Message)
					}
				}
			}
		})
	}
	claimed := f.b.Kernel.Claims()
	for _, c := range claimed {
		if c.Owner != "kernel" && !covered[c.Key] {
			t.Errorf("%s (claimed by %s) has no row in the table", c.Key.Name(), c.Owner)
		}
	}
}

func askedFor(qs []asked, c check) bool {
	for _, q := range qs {
		if q.check == c {
			return true
		}
	}
	return false
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

func createTopicReq(name string, validateOnly bool) kmsg.Request {
	r := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, 1
	r.Topics, r.TimeoutMillis, r.ValidateOnly = append(r.Topics, rt), 10000, validateOnly
	return r
}

func deleteTopicReq(name *string, id [16]byte) kmsg.Request {
	r := kmsg.NewPtrDeleteTopicsRequest()
	rt := kmsg.NewDeleteTopicsRequestTopic()
	rt.Topic, rt.TopicID = name, id
	r.Topics, r.TimeoutMillis = append(r.Topics, rt), 10000
	if name != nil {
		r.TopicNames = []string{*name}
	}
	return r
}

func retentionOfT(t *testing.T, f *fixture) any { return f.topicConfig(t, topicT, "retention.ms") }

func brokerRetention(t *testing.T, f *fixture) any {
	return f.describeCfg(t, kmsg.ConfigResourceTypeBroker, itoa(f.node), "log.retention.ms")
}

func listTxnIDs(t *testing.T, f *fixture) any {
	resp := f.send(t, kmsg.NewPtrListTransactionsRequest(), -1).(*kmsg.ListTransactionsResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("ListTransactions: %v", err) // not an empty list: the state is unknown
	}
	var ids []string
	for _, s := range resp.TransactionStates {
		ids = append(ids, s.TransactionalID)
	}
	return fmt.Sprint(len(ids), contains(ids, "tx-new"))
}

func addOffsetsReq(f *fixture) kmsg.Request {
	r := kmsg.NewPtrAddOffsetsToTxnRequest()
	r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Group = txnTX, f.pid, f.epoch, groupG
	return r
}

func findCoordinatorReq(key string, typ int8) kmsg.Request {
	r := kmsg.NewPtrFindCoordinatorRequest()
	r.CoordinatorKey, r.CoordinatorKeys, r.CoordinatorType = key, []string{key}, typ
	return r
}

func cgHeartbeatReq(g string) kmsg.Request {
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Group, r.MemberID, r.MemberEpoch, r.RebalanceTimeoutMillis = g, "m-authztest-0000000002", 0, 60000
	r.SubscribedTopicNames = []string{topicT}
	r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	return r
}

func cgDescribeReq(*fixture) kmsg.Request {
	r := kmsg.NewPtrConsumerGroupDescribeRequest()
	r.Groups = []string{groupCG}
	return r
}

func describeTxnReq(*fixture) kmsg.Request {
	r := kmsg.NewPtrDescribeTransactionsRequest()
	r.TransactionalIDs = []string{txnTX}
	return r
}

func offsetDeleteReq(*fixture) kmsg.Request {
	r := kmsg.NewPtrOffsetDeleteRequest()
	r.Group = groupG
	rt := kmsg.NewOffsetDeleteRequestTopic()
	rt.Topic = topicT
	rt.Partitions = append(rt.Partitions, kmsg.NewOffsetDeleteRequestTopicPartition())
	r.Topics = append(r.Topics, rt)
	return r
}

func listed(resp kmsg.Response) []string {
	var out []string
	for _, g := range resp.(*kmsg.ListGroupsResponse).Groups {
		out = append(out, g.Group)
	}
	return out
}
