package groups_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/testbroker"
)

// setGroupConfigs sets group configs (name, value pairs) with IncrementalAlterConfigs.
func setGroupConfigs(t testing.TB, cl *kgo.Client, group string, kvs ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for i := 0; i+1 < len(kvs); i += 2 {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = kvs[i], kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(kvs[i+1])
		res.Configs = append(res.Configs, c)
	}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("IncrementalAlterConfigs GROUP %s: %+v", group, resp.Resources)
	}
}

// shareMember drives the share protocol by hand over one kgo client: a heartbeat to
// join, and ShareFetch / ShareAcknowledge with its own session epoch.
type shareMember struct {
	t     testing.TB
	cl    *kgo.Client
	group string
	id    string
	epoch int32 // next share session epoch
	topic [16]byte
}

func newShareMember(t testing.TB, cl *kgo.Client, group, topic string) *shareMember {
	t.Helper()
	m := &shareMember{t: t, cl: cl, group: group, id: rand.Text()[:22]}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hb := kmsg.NewPtrShareGroupHeartbeatRequest()
	hb.GroupID, hb.MemberID, hb.MemberEpoch, hb.SubscribedTopicNames = group, m.id, 0, []string{topic}
	resp, err := hb.RequestWith(ctx, cl)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("ShareGroupHeartbeat join: %v %+v", err, resp)
	}
	md := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	md.Topics = append(md.Topics, mt)
	mresp, err := md.RequestWith(ctx, cl)
	if err != nil || len(mresp.Topics) != 1 {
		t.Fatalf("metadata: %v", err)
	}
	m.topic = mresp.Topics[0].TopicID
	return m
}

type acquired struct {
	first, last int64
	count       int16
}

// fetch sends a ShareFetch for partition 0 with acks (offset → type) and returns
// what it acquired and the partition's acknowledgement error code.
func (m *shareMember) fetch(wait time.Duration, acks map[int64]int8) ([]acquired, int16, int16) {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrShareFetchRequest()
	req.GroupID, req.MemberID, req.ShareSessionEpoch = kmsg.StringPtr(m.group), kmsg.StringPtr(m.id), m.epoch
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.MaxRecords = int32(wait/time.Millisecond), 1, 1<<20, 100
	rt := kmsg.NewShareFetchRequestTopic()
	rt.TopicID = m.topic
	rp := kmsg.NewShareFetchRequestTopicPartition()
	rp.AcknowledgementBatches = ackBatches(acks)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, m.cl)
	if err != nil {
		m.t.Fatalf("ShareFetch: %v", err)
	}
	if resp.ErrorCode != 0 {
		return nil, resp.ErrorCode, 0
	}
	m.epoch++
	var out []acquired
	var ackErr int16
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				m.t.Fatalf("ShareFetch partition error %s", kerr.ErrorForCode(p.ErrorCode))
			}
			ackErr = p.AcknowledgeErrorCode
			for _, a := range p.AcquiredRecords {
				out = append(out, acquired{a.FirstOffset, a.LastOffset, a.DeliveryCount})
			}
		}
	}
	return out, 0, ackErr
}

func ackBatches(acks map[int64]int8) []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch {
	var out []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch
	for _, off := range slices.Sorted(maps.Keys(acks)) {
		b := kmsg.NewShareFetchRequestTopicPartitionAcknowledgementBatch()
		b.FirstOffset, b.LastOffset, b.AcknowledgeTypes = off, off, []int8{acks[off]}
		out = append(out, b)
	}
	return out
}

// ack sends a ShareAcknowledge and returns the top-level and partition error codes.
func (m *shareMember) ack(acks map[int64]int8) (int16, int16) {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrShareAcknowledgeRequest()
	req.GroupID, req.MemberID, req.ShareSessionEpoch = kmsg.StringPtr(m.group), kmsg.StringPtr(m.id), m.epoch
	rt := kmsg.NewShareAcknowledgeRequestTopic()
	rt.TopicID = m.topic
	rp := kmsg.NewShareAcknowledgeRequestTopicPartition()
	for _, b := range ackBatches(acks) {
		ab := kmsg.NewShareAcknowledgeRequestTopicPartitionAcknowledgementBatch()
		ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes = b.FirstOffset, b.LastOffset, b.AcknowledgeTypes
		rp.AcknowledgementBatches = append(rp.AcknowledgementBatches, ab)
	}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, m.cl)
	if err != nil {
		m.t.Fatalf("ShareAcknowledge: %v", err)
	}
	if resp.ErrorCode == 0 {
		m.epoch++
	}
	var pe int16
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			pe = p.ErrorCode
		}
	}
	return resp.ErrorCode, pe
}

const (
	ackAccept  int8 = 1
	ackRelease int8 = 2
	ackReject  int8 = 3
)

// describeShareOffsets returns partition 0's start offset and lag for group.
func describeShareOffsets(t testing.TB, cl *kgo.Client, group, topic string) (int64, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	g := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	g.GroupID = group
	rt := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
	rt.Topic, rt.Partitions = topic, []int32{0}
	g.Topics = append(g.Topics, rt)
	req.Groups = append(req.Groups, g)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 || len(resp.Groups[0].Topics) != 1 {
		t.Fatalf("DescribeShareGroupOffsets: %v %+v", err, resp)
	}
	p := resp.Groups[0].Topics[0].Partitions[0]
	return p.StartOffset, p.Lag
}

// The share-partition state machine over the wire, by hand: acquisition, accept,
// release (redelivered with a higher delivery count), reject, lock expiry, the
// delivery count limit with a dead-letter topic, session epoch errors, acknowledging
// a record twice, the start offset and lag reported, and the state surviving a broker
// restart.
func TestShareGroupRecordStates(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig(groupConfig))
	cl := b.Client(t)
	adm := b.Admin(t)
	createTopic(t, adm, "sq", 1)
	const group = "g-share-states"
	setGroupConfigs(t, cl, group,
		"share.auto.offset.reset", "earliest",
		"share.record.lock.duration.ms", "1000",
		"share.delivery.count.limit", "2",
		"errors.deadletterqueue.topic.name", "sq-dlq",
		"errors.deadletterqueue.copy.record.enable", "true")
	produceN(t, cl, "sq", 5) // offsets 0-4, values "0".."4"

	m := newShareMember(t, cl, group, "sq")
	got, code, _ := m.fetch(2*time.Second, nil)
	if code != 0 || len(got) != 1 || got[0] != (acquired{0, 4, 1}) {
		t.Fatalf("first fetch: %+v (code %d), want 0-4 at delivery 1", got, code)
	}
	// Accept 0, release 1, reject 2; 3 and 4 stay acquired.
	if top, pe := m.ack(map[int64]int8{0: ackAccept, 1: ackRelease, 2: ackReject}); top != 0 || pe != 0 {
		t.Fatalf("ack: %s %s", kerr.ErrorForCode(top), kerr.ErrorForCode(pe))
	}
	// Accepting 0 again: it is no longer acquired.
	if _, pe := m.ack(map[int64]int8{0: ackAccept}); pe != kerr.InvalidRecordState.Code {
		t.Fatalf("second accept: %s, want INVALID_RECORD_STATE", kerr.ErrorForCode(pe))
	}
	// The released record comes back at once, delivered a second time.
	got, _, _ = m.fetch(0, nil)
	if len(got) != 1 || got[0] != (acquired{1, 1, 2}) {
		t.Fatalf("after release: %+v, want 1 at delivery 2", got)
	}
	// A wrong session epoch.
	bad := *m
	bad.epoch += 5
	if _, code, _ := bad.fetch(0, nil); code != kerr.InvalidShareSessionEpoch.Code {
		t.Fatalf("wrong epoch: %s", kerr.ErrorForCode(code))
	}
	// Locks expire after a second: 3 and 4 come back (delivery 2); 1 reached the limit
	// (2) and is archived and dead-lettered.
	var again []acquired
	waitFor(t, 10*time.Second, "expired locks redelivered", func() string {
		got, _, _ := m.fetch(500*time.Millisecond, nil)
		again = append(again, got...)
		if len(again) == 0 {
			return "nothing yet"
		}
		return ""
	})
	if len(again) != 1 || again[0] != (acquired{3, 4, 2}) {
		t.Fatalf("after lock expiry: %+v, want 3-4 at delivery 2", again)
	}
	// Accept 3, release 4 at the limit: archived and dead-lettered too.
	if top, pe := m.ack(map[int64]int8{3: ackAccept, 4: ackRelease}); top != 0 || pe != 0 {
		t.Fatalf("ack: %s %s", kerr.ErrorForCode(top), kerr.ErrorForCode(pe))
	}
	start, lag := describeShareOffsets(t, cl, group, "sq")
	if start != 5 || lag != 0 {
		t.Errorf("DescribeShareGroupOffsets: start %d lag %d, want 5 and 0", start, lag)
	}
	// The dead-letter topic has records 1 and 4, copied, with their origin.
	dlq := b.Client(t, kgo.ConsumeTopics("sq-dlq"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var dead []*kgo.Record
	waitFor(t, 10*time.Second, "two dead letters", func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		dead = append(dead, dlq.PollFetches(ctx).Records()...)
		if len(dead) < 2 {
			return fmt.Sprintf("%d dead letters", len(dead))
		}
		return ""
	})
	header := func(r *kgo.Record, k string) string {
		for _, h := range r.Headers {
			if h.Key == k {
				return string(h.Value)
			}
		}
		return ""
	}
	var offs []string
	for _, r := range dead {
		offs = append(offs, header(r, "sluice.source.offset"))
		if string(r.Value) != header(r, "sluice.source.offset") || header(r, "sluice.share.group") != group ||
			header(r, "sluice.source.topic") != "sq" || header(r, "sluice.delivery.count") != "2" {
			t.Errorf("dead letter %q: headers %+v", r.Value, r.Headers)
		}
	}
	if slices.Sort(offs); !slices.Equal(offs, []string{"1", "4"}) {
		t.Errorf("dead-lettered offsets %v, want 1 and 4", offs)
	}

	// After a restart nothing done is delivered again; new records are.
	b.Restart(t)
	cl = b.Client(t)
	produceN(t, cl, "sq", 2) // offsets 5, 6
	m2 := newShareMember(t, cl, group, "sq")
	var after []acquired
	waitFor(t, 15*time.Second, "the new records after the restart", func() string {
		got, code, _ := m2.fetch(500*time.Millisecond, nil)
		if code != 0 {
			m2.epoch = 0
			return kerr.ErrorForCode(code).Error()
		}
		after = append(after, got...)
		if len(after) == 0 {
			return "nothing yet"
		}
		return ""
	})
	if len(after) != 1 || after[0] != (acquired{5, 6, 1}) {
		t.Fatalf("after the restart: %+v, want 5-6 at delivery 1", after)
	}
}

// Several kgo share consumers (KIP-932, kgo.ShareGroup) on one topic: every record is
// delivered, each accepted exactly once, the load is spread, and the group's lag goes
// to zero.
func TestShareGroupKgoConsumers(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig(groupConfig))
	cl := b.Client(t)
	adm := b.Admin(t)
	const topic, group, n = "sk", "g-share-kgo", 600
	createTopic(t, adm, topic, 3)
	setGroupConfigs(t, cl, group, "share.auto.offset.reset", "earliest")
	produceN(t, cl, topic, n)

	var mu sync.Mutex
	accepted := map[string]int{}
	byConsumer := map[int]int{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range 3 {
		c := b.Client(t, kgo.ShareGroup(group), kgo.ConsumeTopics(topic), kgo.ShareMaxRecords(50), kgo.ClientID("share-"+strconv.Itoa(i)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				fs := c.PollFetches(ctx)
				fs.EachRecord(func(r *kgo.Record) {
					r.Ack(kgo.AckAccept)
					mu.Lock()
					accepted[string(r.Value)]++
					byConsumer[i]++
					mu.Unlock()
				})
			}
			fctx, fcancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer fcancel()
			_ = c.FlushAcks(fctx)
		}()
	}
	waitFor(t, 30*time.Second, "every record accepted", func() string {
		mu.Lock()
		defer mu.Unlock()
		if len(accepted) < n {
			return fmt.Sprintf("%d of %d", len(accepted), n)
		}
		return ""
	})
	waitFor(t, 15*time.Second, "lag zero", func() string {
		start, lag := describeShareOffsetsAll(t, cl, group, topic)
		if lag != 0 || start != n {
			return fmt.Sprintf("start offsets sum %d, lag %d", start, lag)
		}
		return ""
	})
	cancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for v, c := range accepted {
		if c != 1 {
			t.Errorf("record %s accepted %d times", v, c)
		}
	}
	if len(byConsumer) < 2 {
		t.Errorf("records by consumer %v: the share group did not spread the load", byConsumer)
	}
}

// describeShareOffsetsAll sums the start offsets and lags of every partition of topic.
func describeShareOffsetsAll(t testing.TB, cl *kgo.Client, group, topic string) (int64, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	g := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	g.GroupID = group
	req.Groups = append(req.Groups, g)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 {
		t.Fatalf("DescribeShareGroupOffsets: %v %+v", err, resp)
	}
	var start, lag int64
	for _, rt := range resp.Groups[0].Topics {
		if rt.Topic != topic {
			continue
		}
		for _, p := range rt.Partitions {
			start += p.StartOffset
			lag += p.Lag
		}
	}
	return start, lag
}

// Share group membership survives a restart: a member heartbeats on at its epoch
// (no UNKNOWN_MEMBER_ID, no rejoin) with its assignment, and ShareGroupDescribe shows
// the group as it was.
func TestShareGroupMembershipSurvivesRestart(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig(groupConfig))
	cl := b.Client(t)
	createTopic(t, b.Admin(t), "sm", 2)
	const group = "g-share-restart"
	tryHeartbeat := func(cl *kgo.Client, id string, epoch int32, topics []string) (*kmsg.ShareGroupHeartbeatResponse, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.GroupID, req.MemberID, req.MemberEpoch, req.SubscribedTopicNames = group, id, epoch, topics
		return req.RequestWith(ctx, cl)
	}
	heartbeat := func(cl *kgo.Client, id string, epoch int32, topics []string) *kmsg.ShareGroupHeartbeatResponse {
		t.Helper()
		resp, err := tryHeartbeat(cl, id, epoch, topics)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	a, c := rand.Text()[:22], rand.Text()[:22]
	ra := heartbeat(cl, a, 0, []string{"sm"})
	rc := heartbeat(cl, c, 0, []string{"sm"})
	ra = heartbeat(cl, a, ra.MemberEpoch, nil)
	if ra.ErrorCode != 0 || rc.ErrorCode != 0 {
		t.Fatalf("joins: %d %d", ra.ErrorCode, rc.ErrorCode)
	}
	before := describeShare(t, cl, group)

	b.Restart(t)
	cl = b.Client(t)
	var after *kmsg.ShareGroupHeartbeatResponse
	// The coordinator loads its state after the restart; until it has,
	// FindCoordinator may answer COORDINATOR_NOT_AVAILABLE, which kgo
	// hands back rather than retrying.
	waitFor(t, 15*time.Second, "a heartbeat after the restart", func() string {
		var err error
		if after, err = tryHeartbeat(cl, a, ra.MemberEpoch, nil); err != nil {
			return err.Error()
		}
		if after.ErrorCode != 0 {
			return kerr.ErrorForCode(after.ErrorCode).Error()
		}
		return ""
	})
	if after.MemberEpoch != ra.MemberEpoch {
		t.Errorf("member epoch %d after the restart, was %d", after.MemberEpoch, ra.MemberEpoch)
	}
	d := describeShare(t, cl, group)
	if d.GroupEpoch != before.GroupEpoch || len(d.Members) != 2 {
		t.Errorf("after the restart: epoch %d with %d members, before %d with %d", d.GroupEpoch, len(d.Members), before.GroupEpoch, len(before.Members))
	}
	for i := range d.Members {
		if len(d.Members[i].Assignment.TopicPartitions) != len(before.Members[i].Assignment.TopicPartitions) {
			t.Errorf("member %s: assignment %+v, before %+v", d.Members[i].MemberID, d.Members[i].Assignment, before.Members[i].Assignment)
		}
	}
	// A member that leaves is gone after the next restart.
	if r := heartbeat(cl, c, -1, nil); r.ErrorCode != 0 {
		t.Fatalf("leave: %d", r.ErrorCode)
	}
	b.Restart(t)
	cl = b.Client(t)
	waitFor(t, 15*time.Second, "one member after the second restart", func() string {
		d, err := tryDescribeShare(cl, group)
		if err != nil {
			return err.Error()
		}
		if d.ErrorCode != 0 || len(d.Members) != 1 || d.Members[0].MemberID != a {
			return fmt.Sprintf("%+v", d)
		}
		return ""
	})
}
