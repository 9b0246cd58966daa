package replication

import (
	"bytes"
	"context"
	"encoding/binary"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
)

func produceReq(acks int16, topic string, id byte, part int32, records []byte) *kmsg.ProduceRequest {
	r := kmsg.NewPtrProduceRequest()
	r.Acks, r.TimeoutMillis = acks, 5000
	t := kmsg.NewProduceRequestTopic()
	t.Topic, t.TopicID = topic, [16]byte{id}
	p := kmsg.NewProduceRequestTopicPartition()
	p.Partition, p.Records = part, records
	t.Partitions = append(t.Partitions, p)
	r.Topics = append(r.Topics, t)
	return r
}

func (h *harness) produce(v, acks int16, topic string, part int32, records []byte) kmsg.ProduceResponseTopicPartition {
	h.t.Helper()
	resp, err := h.do(context.Background(), v, produceReq(acks, topic, 1, part, records))
	if err != nil {
		h.t.Fatal(err)
	}
	return resp.Msg.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
}

func fetchReq(topic string, id byte, part int32, offset int64) *kmsg.FetchRequest {
	r := kmsg.NewPtrFetchRequest()
	r.MaxBytes, r.SessionEpoch = 1<<20, -1
	t := kmsg.NewFetchRequestTopic()
	t.Topic, t.TopicID = topic, [16]byte{id}
	p := kmsg.NewFetchRequestTopicPartition()
	p.Partition, p.FetchOffset, p.PartitionMaxBytes = part, offset, 1<<20
	t.Partitions = append(t.Partitions, p)
	r.Topics = append(r.Topics, t)
	return r
}

func (h *harness) fetch(ctx context.Context, v int16, r *kmsg.FetchRequest) *kmsg.FetchResponse {
	h.t.Helper()
	resp, err := h.do(ctx, v, r)
	if err != nil {
		h.t.Fatal(err)
	}
	out := &kmsg.FetchResponse{Version: v}
	if err := out.ReadFrom(bodyBytes(h.t, resp.Body)); err != nil {
		h.t.Fatal(err)
	}
	return out
}

func TestProduceFetchAllVersions(t *testing.T) {
	h := newHarness(t, nil, topicSpec{name: "t", id: 1})
	var want []byte
	for v := int16(3); v <= 13; v++ {
		b := testBatch(2, "v")
		res := h.produce(v, 1, "t", 0, b)
		if res.ErrorCode != 0 {
			t.Fatalf("produce v%d: %v", v, kerr.ErrorForCode(res.ErrorCode))
		}
		if res.BaseOffset != int64(v-3)*2 || res.LogAppendTime != -1 {
			t.Fatalf("produce v%d: %+v", v, res)
		}
		recordbatch.SetBaseOffset(b, res.BaseOffset)
		if got := int32(binary.BigEndian.Uint32(b[recordbatch.OffLeaderEpoch:])); got != 5 {
			t.Fatalf("leader epoch stamped %d, want 5", got)
		}
		want = append(want, b...)
	}
	for v := int16(4); v <= 18; v++ {
		resp := h.fetch(context.Background(), v, fetchReq("t", 1, 0, 0))
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.HighWatermark != 22 || !bytes.Equal(p.RecordBatches, want) {
			t.Fatalf("fetch v%d: err %d hw %d, %d bytes (want %d)", v, p.ErrorCode, p.HighWatermark, len(p.RecordBatches), len(want))
		}
		if v >= 5 && p.LogStartOffset != 0 {
			t.Fatalf("fetch v%d: log start %d", v, p.LogStartOffset)
		}
	}
}

func TestProduceErrors(t *testing.T) {
	h := newHarness(t, nil,
		topicSpec{name: "t", id: 1},
		topicSpec{name: "small", id: 2, configs: map[string]string{"max.message.bytes": "100"}},
		topicSpec{name: "strict", id: 3, configs: map[string]string{"message.timestamp.before.max.ms": "1000"}},
		topicSpec{name: "remote", id: 4, leader: 2},
	)
	corrupt := testBatch(1, "x")
	corrupt[len(corrupt)-1] ^= 0xff
	wrongCount := testBatch(2, "x")
	binary.BigEndian.PutUint32(wrongCount[recordbatch.OffRecordCount:], 3)
	recordbatch.SetCRC(wrongCount)
	wrongDelta := testBatch(2, "x")
	binary.BigEndian.PutUint32(wrongDelta[recordbatch.OffLastOffsetDelta:], 5)
	recordbatch.SetCRC(wrongDelta)
	trailing := append(testBatch(1, "x"), 0, 0, 0) // records section 3 bytes too long
	binary.BigEndian.PutUint32(trailing[recordbatch.OffBatchLength:], uint32(len(trailing)-recordbatch.LogOverhead))
	recordbatch.SetCRC(trailing)
	magic1 := testBatch(1, "x")
	magic1[recordbatch.OffMagic] = 1
	control := recordbatch.Build(recordbatch.Options{Control: true, ProducerID: -1}, recordbatch.Record{Key: []byte{0, 0, 0, 0}, Value: []byte{0, 0, 0, 0, 0, 0}})
	for _, tc := range []struct {
		name    string
		topic   string
		part    int32
		acks    int16
		records []byte
		want    *kerr.Error
	}{
		{"bad acks", "t", 0, 2, testBatch(1, "x"), kerr.InvalidRequiredAcks},
		{"corrupt crc", "t", 0, 1, corrupt, kerr.CorruptMessage},
		{"record count lies", "t", 0, 1, wrongCount, kerr.InvalidRecord},
		{"last offset delta lies", "t", 0, 1, wrongDelta, kerr.InvalidRecord},
		{"bytes after the last record", "t", 0, 1, trailing, kerr.InvalidRecord},
		{"truncated", "t", 0, 1, testBatch(1, "x")[:40], kerr.CorruptMessage},
		{"magic 1", "t", 0, 1, magic1, kerr.InvalidRecord},
		{"empty", "t", 0, 1, nil, kerr.InvalidRecord},
		{"control batch", "t", 0, 1, control, kerr.InvalidRecord},
		{"too large", "small", 0, 1, testBatch(10, "0123456789"), kerr.MessageTooLarge},
		{"old timestamp", "strict", 0, 1, testBatch(2, "x"), kerr.InvalidTimestamp},
		{"unknown topic", "nope", 0, 1, testBatch(1, "x"), kerr.UnknownTopicOrPartition},
		{"unknown partition", "t", 7, 1, testBatch(1, "x"), kerr.UnknownTopicOrPartition},
		{"not leader", "remote", 0, 1, testBatch(1, "x"), kerr.NotLeaderForPartition},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := h.produce(13-3, tc.acks, tc.topic, tc.part, tc.records)
			if res.ErrorCode != tc.want.Code {
				t.Fatalf("got %v, want %v", kerr.ErrorForCode(res.ErrorCode), tc.want)
			}
		})
	}
	// INVALID_TIMESTAMP lists the offending records (KIP-467).
	res := h.produce(10, 1, "strict", 0, testBatch(2, "x"))
	if len(res.ErrorRecords) != 2 || res.ErrorRecords[1].RelativeOffset != 1 {
		t.Fatalf("record errors %+v", res.ErrorRecords)
	}
	// NOT_LEADER carries the current leader and its endpoint (v10+).
	resp, _ := h.do(context.Background(), 10, produceReq(1, "remote", 4, 0, testBatch(1, "x")))
	pr := resp.Msg.(*kmsg.ProduceResponse)
	if pr.Topics[0].Partitions[0].CurrentLeader.LeaderID != 2 || len(pr.Brokers) != 1 || pr.Brokers[0].Host != "127.0.0.2" {
		t.Fatalf("leader hint: %+v %+v", pr.Topics[0].Partitions[0].CurrentLeader, pr.Brokers)
	}
	// Nothing was appended by the failures.
	if leo := h.m.partition(kernel.TopicPartition{Topic: "t"}).log.LogEndOffset(); leo != 0 {
		t.Fatalf("log end %d after failed produces", leo)
	}
	// Authorization.
	resp, _ = h.doAs(context.Background(), 9, produceReq(1, "t", 1, 0, testBatch(1, "x")), denyTopic("t"))
	if c := resp.Msg.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; c != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("auth: %v", kerr.ErrorForCode(c))
	}
	// v13 uses topic IDs.
	resp, _ = h.do(context.Background(), 13, produceReq(1, "", 9, 0, testBatch(1, "x")))
	if c := resp.Msg.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; c != kerr.UnknownTopicID.Code {
		t.Fatalf("v13 unknown id: %v", kerr.ErrorForCode(c))
	}
	resp, _ = h.do(context.Background(), 13, produceReq(1, "", 1, 0, testBatch(1, "x")))
	if c := resp.Msg.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; c != 0 {
		t.Fatalf("v13 by id: %v", kerr.ErrorForCode(c))
	}
}

func TestProduceAcks(t *testing.T) {
	h := newHarness(t, nil, topicSpec{name: "t", id: 1}, topicSpec{name: "mis", id: 2, configs: map[string]string{"min.insync.replicas": "2"}})
	resp, err := h.do(context.Background(), 9, produceReq(0, "t", 1, 0, testBatch(1, "x")))
	if err != nil || !resp.NoResponse {
		t.Fatalf("acks=0: %+v %v", resp, err)
	}
	if _, err := h.do(context.Background(), 9, produceReq(0, "nope", 1, 0, testBatch(1, "x"))); err == nil {
		t.Fatal("acks=0 failure must close the connection")
	}
	if res := h.produce(9, -1, "t", 0, testBatch(3, "x")); res.ErrorCode != 0 || res.BaseOffset != 1 {
		t.Fatalf("acks=all: %+v", res)
	}
	if res := h.produce(9, -1, "mis", 0, testBatch(1, "x")); res.ErrorCode != kerr.NotEnoughReplicas.Code {
		t.Fatalf("acks=all with ISR < min.insync: %v", kerr.ErrorForCode(res.ErrorCode))
	}
	if res := h.produce(9, 1, "mis", 0, testBatch(1, "x")); res.ErrorCode != 0 {
		t.Fatalf("acks=1 ignores min.insync: %v", kerr.ErrorForCode(res.ErrorCode))
	}
}

func TestProduceLogAppendTime(t *testing.T) {
	h := newHarness(t, nil, topicSpec{name: "t", id: 1, configs: map[string]string{"message.timestamp.type": "LogAppendTime"}})
	fixed := time.UnixMilli(1_800_000_000_000)
	h.m.now = func() time.Time { return fixed }
	res := h.produce(9, 1, "t", 0, testBatch(2, "x"))
	if res.ErrorCode != 0 || res.LogAppendTime != fixed.UnixMilli() {
		t.Fatalf("%+v", res)
	}
	f := h.fetch(context.Background(), 12, fetchReq("t", 1, 0, 0))
	b := f.Topics[0].Partitions[0].RecordBatches
	hd, err := recordbatch.ParseHeader(b)
	if err != nil || hd.Attributes&recordbatch.AttrLogAppendTime == 0 || hd.MaxTimestamp != fixed.UnixMilli() {
		t.Fatalf("header %+v %v", hd, err)
	}
	if err := recordbatch.CheckCRC(b); err != nil {
		t.Fatal(err)
	}
}

func TestFetchErrors(t *testing.T) {
	h := newHarness(t, nil, topicSpec{name: "t", id: 1}, topicSpec{name: "remote", id: 4, leader: 2})
	h.produce(9, 1, "t", 0, testBatch(3, "x"))
	check := func(name string, v int16, r *kmsg.FetchRequest, want *kerr.Error) *kmsg.FetchResponseTopicPartition {
		t.Helper()
		resp := h.fetch(context.Background(), v, r)
		p := &resp.Topics[0].Partitions[0]
		if p.ErrorCode != want.Code {
			t.Errorf("%s: got %v want %v", name, kerr.ErrorForCode(p.ErrorCode), want)
		}
		return p
	}
	oor := check("offset past end", 11, fetchReq("t", 1, 0, 4), kerr.OffsetOutOfRange)
	if oor.HighWatermark != 3 {
		t.Errorf("OFFSET_OUT_OF_RANGE should carry the HW, got %d", oor.HighWatermark)
	}
	check("negative offset", 11, fetchReq("t", 1, 0, -1), kerr.OffsetOutOfRange)
	check("unknown topic", 11, fetchReq("nope", 1, 0, 0), kerr.UnknownTopicOrPartition)
	check("unknown topic id", 13, fetchReq("", 9, 0, 0), kerr.UnknownTopicID)
	nl := check("not leader", 12, fetchReq("remote", 4, 0, 0), kerr.NotLeaderForPartition)
	if nl.CurrentLeader.LeaderID != 2 {
		t.Errorf("current leader %+v", nl.CurrentLeader)
	}
	r := fetchReq("t", 1, 0, 0)
	r.Topics[0].Partitions[0].CurrentLeaderEpoch = 4
	check("fenced epoch", 12, r, kerr.FencedLeaderEpoch)
	r = fetchReq("t", 1, 0, 0)
	r.Topics[0].Partitions[0].CurrentLeaderEpoch = 6
	check("unknown epoch", 12, r, kerr.UnknownLeaderEpoch)
	r = fetchReq("t", 1, 0, 0)
	r.ReplicaID = 3
	// Not one of the replicas: an empty answer (as Kafka), no records.
	if p := check("fetch by a non-replica", 11, r, &kerr.Error{}); len(p.RecordBatches) != 0 || p.HighWatermark != 3 {
		t.Errorf("fetch by a non-replica: %d bytes, HW %d", len(p.RecordBatches), p.HighWatermark)
	}
	resp, _ := h.doAs(context.Background(), 11, fetchReq("t", 1, 0, 0), denyTopic("t"))
	dec := &kmsg.FetchResponse{Version: 11}
	if err := dec.ReadFrom(bodyBytes(t, resp.Body)); err != nil || dec.Topics[0].Partitions[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("auth: %v %+v", err, dec.Topics)
	}
	// v13 by topic id works.
	if p := check("by id", 13, fetchReq("", 1, 0, 0), &kerr.Error{}); len(p.RecordBatches) == 0 {
		t.Error("v13 fetch by id returned no records")
	}
}

// TestFetchMaxBytes: partition and response limits with the at-least-one-batch rule.
func TestFetchMaxBytes(t *testing.T) {
	h := newHarness(t, nil, topicSpec{name: "t", id: 1, parts: 2})
	b := testBatch(1, string(make([]byte, 1000)))
	for i := 0; i < 3; i++ {
		h.produce(9, 1, "t", 0, testBatch(1, string(make([]byte, 1000))))
		h.produce(9, 1, "t", 1, testBatch(1, string(make([]byte, 1000))))
	}
	r := fetchReq("t", 1, 0, 0)
	r.MaxBytes = 10 // smaller than one batch
	p1 := kmsg.NewFetchRequestTopicPartition()
	p1.Partition, p1.PartitionMaxBytes = 1, 1<<20
	r.Topics[0].Partitions = append(r.Topics[0].Partitions, p1)
	resp := h.fetch(context.Background(), 11, r)
	if n := len(resp.Topics[0].Partitions[0].RecordBatches); n != len(b) {
		t.Fatalf("first partition: %d bytes, want one batch of %d", n, len(b))
	}
	if n := len(resp.Topics[0].Partitions[1].RecordBatches); n != 0 {
		t.Fatalf("second partition: %d bytes past max_bytes", n)
	}
	r = fetchReq("t", 1, 0, 0)
	r.Topics[0].Partitions[0].PartitionMaxBytes = int32(2*len(b) + 10)
	resp = h.fetch(context.Background(), 11, r)
	if n := len(resp.Topics[0].Partitions[0].RecordBatches); n != 2*len(b) {
		t.Fatalf("partition max bytes: %d, want %d", n, 2*len(b))
	}
}

func TestFetchLongPollWokenByProduce(t *testing.T) {
	h := newHarness(t, nil, topicSpec{name: "t", id: 1})
	r := fetchReq("t", 1, 0, 0)
	r.MinBytes, r.MaxWaitMillis = 1, 60_000
	got := make(chan *kmsg.FetchResponse, 1)
	start := time.Now()
	go func() {
		resp, err := h.do(context.Background(), 12, r)
		if err != nil {
			t.Error(err)
			got <- nil
			return
		}
		out := &kmsg.FetchResponse{Version: 12}
		_ = out.ReadFrom(bodyBytes(t, resp.Body))
		got <- out
	}()
	tp := kernel.TopicPartition{Topic: "t"}
	waitFor(t, func() bool { return h.m.pg.watching(tp) == 1 })
	h.produce(9, 1, "t", 0, testBatch(1, "wake"))
	select {
	case out := <-got:
		if out == nil || len(out.Topics[0].Partitions[0].RecordBatches) == 0 {
			t.Fatal("woken fetch has no records")
		}
		if d := time.Since(start); d > 30*time.Second {
			t.Fatalf("took %v", d)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("fetch not woken by the produce")
	}
	if h.m.pg.watching(tp) != 0 {
		t.Fatal("watcher leaked")
	}
}

func TestFetchMaxWaitExpires(t *testing.T) {
	h := newHarness(t, nil, topicSpec{name: "t", id: 1})
	r := fetchReq("t", 1, 0, 0)
	r.MinBytes, r.MaxWaitMillis = 1, 30
	start := time.Now()
	out := h.fetch(context.Background(), 12, r)
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Fatalf("returned after %v, before max wait", d)
	}
	if out.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatal(out.Topics[0].Partitions[0].ErrorCode)
	}
}

func TestStopCancelsWaitingFetch(t *testing.T) {
	h := newHarness(t, nil, topicSpec{name: "t", id: 1})
	r := fetchReq("t", 1, 0, 0)
	r.MinBytes, r.MaxWaitMillis = 1, 600_000
	done := make(chan error, 1)
	go func() {
		resp, err := h.do(context.Background(), 12, r)
		if err == nil {
			resp.Body.Release()
		}
		done <- err
	}()
	waitFor(t, func() bool { return h.m.pg.watching(kernel.TopicPartition{Topic: "t"}) == 1 })
	if err := h.m.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Stop did not complete the waiting fetch")
	}
}

func TestListOffsetsDeleteRecordsEpochs(t *testing.T) {
	h := newHarness(t, nil, topicSpec{name: "t", id: 1})
	for i := 0; i < 3; i++ {
		recs := []recordbatch.Record{{Value: []byte("a")}, {OffsetDelta: 1, TimestampDelta: 5, Value: []byte("b")}}
		h.produce(9, 1, "t", 0, recordbatch.Build(recordbatch.Options{ProducerID: -1, BaseTimestamp: int64(1000 * (i + 1))}, recs...))
	}
	list := func(v int16, ts int64) kmsg.ListOffsetsResponseTopicPartition {
		r := kmsg.NewPtrListOffsetsRequest()
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = ts
		rt.Partitions = append(rt.Partitions, rp)
		r.Topics = append(r.Topics, rt)
		resp, err := h.do(context.Background(), v, r)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Msg.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	}
	for _, tc := range []struct {
		ts, off, stamp int64
	}{{-2, 0, -1}, {-1, 6, -1}, {-3, 5, 3005}, {-4, 0, -1}, {-5, -1, -1}, {2000, 2, 2000}, {2003, 3, 2005}, {9999, -1, -1}} {
		got := list(11, tc.ts)
		if got.ErrorCode != 0 || got.Offset != tc.off || got.Timestamp != tc.stamp {
			t.Errorf("ts %d: offset %d timestamp %d err %d; want %d %d", tc.ts, got.Offset, got.Timestamp, got.ErrorCode, tc.off, tc.stamp)
		}
	}
	if got := list(11, -1); got.LeaderEpoch != 5 {
		t.Errorf("latest leader epoch %d", got.LeaderEpoch)
	}

	del := func(off int64) kmsg.DeleteRecordsResponseTopicPartition {
		r := kmsg.NewPtrDeleteRecordsRequest()
		rt := kmsg.NewDeleteRecordsRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewDeleteRecordsRequestTopicPartition()
		rp.Offset = off
		rt.Partitions = append(rt.Partitions, rp)
		r.Topics = append(r.Topics, rt)
		resp, err := h.do(context.Background(), 2, r)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Msg.(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0]
	}
	if got := del(7); got.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Errorf("delete past HW: %v", kerr.ErrorForCode(got.ErrorCode))
	}
	if got := del(2); got.ErrorCode != 0 || got.LowWatermark != 2 {
		t.Errorf("delete to 2: %+v", got)
	}
	if got := list(11, -2); got.Offset != 2 {
		t.Errorf("earliest after delete: %d", got.Offset)
	}
	if f := h.fetch(context.Background(), 11, fetchReq("t", 1, 0, 0)); f.Topics[0].Partitions[0].ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Errorf("fetch below log start: %d", f.Topics[0].Partitions[0].ErrorCode)
	}
	if got := del(-1); got.ErrorCode != 0 || got.LowWatermark != 6 {
		t.Errorf("delete to HW: %+v", got)
	}

	ofle := func(cur, epoch int32) kmsg.OffsetForLeaderEpochResponseTopicPartition {
		r := kmsg.NewPtrOffsetForLeaderEpochRequest()
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.CurrentLeaderEpoch, rp.LeaderEpoch = cur, epoch
		rt.Partitions = append(rt.Partitions, rp)
		r.Topics = append(r.Topics, rt)
		resp, err := h.do(context.Background(), 4, r)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Msg.(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]
	}
	if got := ofle(5, 5); got.ErrorCode != 0 || got.LeaderEpoch != 5 || got.EndOffset != 6 {
		t.Errorf("current epoch: %+v", got)
	}
	if got := ofle(-1, 9); got.LeaderEpoch != -1 || got.EndOffset != -1 {
		t.Errorf("future epoch: %+v", got)
	}
	if got := ofle(4, 5); got.ErrorCode != kerr.FencedLeaderEpoch.Code {
		t.Errorf("fenced: %+v", got)
	}
	// A new leader epoch starts a new cache entry at the log end.
	im := image(2, topicSpec{name: "t", id: 1})
	im.Topic("t").Partitions[0].LeaderEpoch = 7
	h.meta.publish(im)
	h.produce(9, 1, "t", 0, testBatch(1, "x"))
	if got := ofle(7, 5); got.LeaderEpoch != 5 || got.EndOffset != 6 {
		t.Errorf("old epoch after change: %+v", got)
	}
	if got := ofle(7, 6); got.LeaderEpoch != 5 || got.EndOffset != 6 {
		t.Errorf("epoch between: %+v", got)
	}
	if got := ofle(7, 7); got.LeaderEpoch != 7 || got.EndOffset != 7 {
		t.Errorf("new epoch: %+v", got)
	}
}

func TestImageLifecycle(t *testing.T) {
	h := newHarness(t, nil, topicSpec{name: "t", id: 1})
	h.produce(9, 1, "t", 0, testBatch(1, "x"))
	// A topic created in an image the subscription has not delivered yet is opened on
	// demand.
	h.meta.set(image(3, topicSpec{name: "t", id: 1}, topicSpec{name: "new", id: 2}))
	if res := h.produce(9, 1, "new", 0, testBatch(1, "x")); res.ErrorCode != 0 {
		t.Fatalf("lazy open: %v", kerr.ErrorForCode(res.ErrorCode))
	}
	// A stale image delivered late (without "new") must not remove it.
	h.m.applyImage(image(2, topicSpec{name: "t", id: 1}))
	if h.m.partition(kernel.TopicPartition{Topic: "new"}) == nil {
		t.Fatal("stale image removed a lazily opened partition")
	}
	// Config changes apply.
	h.meta.publish(image(4, topicSpec{name: "t", id: 1, configs: map[string]string{"max.message.bytes": "10"}}, topicSpec{name: "new", id: 2}))
	if res := h.produce(9, 1, "t", 0, testBatch(1, "x")); res.ErrorCode != kerr.MessageTooLarge.Code {
		t.Fatalf("config change: %v", kerr.ErrorForCode(res.ErrorCode))
	}
	// Deleting a topic removes its data; re-creating it starts empty.
	h.meta.publish(image(5, topicSpec{name: "new", id: 2}))
	if h.m.partition(kernel.TopicPartition{Topic: "t"}) != nil {
		t.Fatal("deleted topic still served")
	}
	h.meta.publish(image(6, topicSpec{name: "t", id: 3}, topicSpec{name: "new", id: 2}))
	if p := h.m.partition(kernel.TopicPartition{Topic: "t"}); p == nil || p.log.LogEndOffset() != 0 {
		t.Fatal("re-created topic not empty")
	}
}

func TestProduceTimestampNoneExempt(t *testing.T) {
	h := newHarness(t, nil, topicSpec{name: "strict", id: 1, configs: map[string]string{"message.timestamp.before.max.ms": "1000"}})
	b := recordbatch.Build(recordbatch.Options{ProducerID: -1, BaseTimestamp: -1}, recordbatch.Record{Value: []byte("x")})
	if res := h.produce(9, 1, "strict", 0, b); res.ErrorCode != 0 {
		t.Fatalf("record without timestamp rejected: %v", kerr.ErrorForCode(res.ErrorCode))
	}
	b = recordbatch.Build(recordbatch.Options{ProducerID: -1, BaseTimestamp: -1},
		recordbatch.Record{Value: []byte("x")}, recordbatch.Record{OffsetDelta: 1, TimestampDelta: 1001, Value: []byte("y")})
	res := h.produce(9, 1, "strict", 0, b)
	if res.ErrorCode != kerr.InvalidTimestamp.Code || len(res.ErrorRecords) != 1 || res.ErrorRecords[0].RelativeOffset != 1 {
		t.Fatalf("%v %+v", kerr.ErrorForCode(res.ErrorCode), res.ErrorRecords)
	}
}

func TestMetrics(t *testing.T) {
	h := newHarness(t, nil, topicSpec{name: "t", id: 1})
	b := testBatch(1, "x")
	h.produce(9, 1, "t", 0, b)
	h.fetch(context.Background(), 12, fetchReq("t", 1, 0, 0))
	var out bytes.Buffer
	h.ctx.metrics.WriteText(&out)
	for _, want := range []string{
		"sluice_produce_bytes_total " + strconv.Itoa(len(b)),
		"sluice_fetch_bytes_total " + strconv.Itoa(len(b)),
		"sluice_leader_partitions 1",
		"sluice_purgatory_waiting 0",
	} {
		if !strings.Contains(out.String(), want+"\n") {
			t.Errorf("metrics lack %q:\n%s", want, out.String())
		}
	}
}

type countingAuthz struct{ calls map[string]int }

func (c *countingAuthz) Authorize(_ context.Context, _ kernel.Principal, _ string, _ kernel.Operation, r kernel.Resource) bool {
	c.calls[r.Name]++
	return r.Name != "b"
}

func TestFetchAuthorizesEachTopicOnce(t *testing.T) {
	az := &countingAuthz{calls: map[string]int{}}
	op := &fetchOp{ctx: context.Background(), req: &kernel.Request{Conn: &kernel.ConnInfo{}, Authorizer: az}}
	for _, tc := range []struct {
		topic string
		want  bool
	}{{"a", true}, {"a", true}, {"b", false}, {"a", true}, {"c", true}, {"b", false}, {"", true}, {"c", true}} {
		if got := op.allowed(tc.topic); got != tc.want {
			t.Fatalf("%q: %v", tc.topic, got)
		}
	}
	for topic, n := range az.calls {
		if n != 1 {
			t.Errorf("topic %q authorized %d times", topic, n)
		}
	}
}

func TestFetchMaxBytesBrokerCap(t *testing.T) {
	h := newHarness(t, nil, topicSpec{name: "t", id: 1, parts: 2})
	h.produce(9, 1, "t", 0, testBatch(1, "x"))
	h.produce(9, 1, "t", 1, testBatch(1, "x"))
	h.m.setBrokerLimits(map[string]string{"fetch.max.bytes": "10"})
	r := fetchReq("t", 1, 0, 0)
	p1 := kmsg.NewFetchRequestTopicPartition()
	p1.Partition, p1.PartitionMaxBytes = 1, 1<<20
	r.Topics[0].Partitions = append(r.Topics[0].Partitions, p1)
	resp := h.fetch(context.Background(), 11, r)
	if len(resp.Topics[0].Partitions[0].RecordBatches) == 0 || len(resp.Topics[0].Partitions[1].RecordBatches) != 0 {
		t.Fatal("fetch.max.bytes does not cap the response (past the first batch)")
	}
	h.m.setBrokerLimits(map[string]string{})
	if got := h.m.fetchMaxBytes.Load(); got != defaultFetchMaxBytes {
		t.Fatalf("default %d", got)
	}
}

// A transactional batch without a transactional id is refused for the whole request
// (Kafka: TRANSACTIONAL_ID_AUTHORIZATION_FAILED), and nothing is appended; one behind a
// plain batch in the same records field is found too.
func TestProduceTransactionalBatchNeedsTransactionalID(t *testing.T) {
	h := newHarness(t, nil, topicSpec{name: "t", id: 1, parts: 2})
	txn := recordbatch.Build(recordbatch.Options{Transactional: true, ProducerID: 7, ProducerEpoch: 0, BaseSequence: 0}, recordbatch.Record{Value: []byte("x")})
	for _, tc := range []struct {
		name    string
		records []byte
	}{
		{"alone", txn},
		{"behind a plain batch", append(append([]byte{}, testBatch(1, "x")...), txn...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := produceReq(1, "t", 1, 1, tc.records)
			plain := kmsg.NewProduceRequestTopicPartition()
			plain.Partition, plain.Records = 0, testBatch(1, "y")
			r.Topics[0].Partitions = append([]kmsg.ProduceRequestTopicPartition{plain}, r.Topics[0].Partitions...)
			resp, err := h.do(context.Background(), 9, r)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range resp.Msg.(*kmsg.ProduceResponse).Topics[0].Partitions {
				if p.ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code {
					t.Errorf("partition %d: %v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", p.Partition, kerr.ErrorForCode(p.ErrorCode))
				}
			}
			for p := int32(0); p < 2; p++ {
				if leo := h.m.partition(kernel.TopicPartition{Topic: "t", Partition: p}).log.LogEndOffset(); leo != 0 {
					t.Errorf("partition %d: log end %d, want nothing appended", p, leo)
				}
			}
		})
	}
	// With a transactional id the batch is accepted (transactions are not checked yet).
	r := produceReq(1, "t", 1, 0, txn)
	id := "tx"
	r.TransactionID = &id
	resp, err := h.do(context.Background(), 9, r)
	if err != nil {
		t.Fatal(err)
	}
	if c := resp.Msg.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; c != 0 {
		t.Fatalf("with a transactional id: %v", kerr.ErrorForCode(c))
	}
}

// The stored batch's max timestamp is its records' (as Kafka's validator sets it), not
// what the client wrote in the header: storage keys retention and the time index on it.
func TestProduceRewritesBatchMaxTimestamp(t *testing.T) {
	h := newHarness(t, nil, topicSpec{name: "t", id: 1})
	now := time.Now().UnixMilli()
	for _, tc := range []struct {
		name   string
		header int64
		attrs  uint16
	}{
		{"far past", 0, 0},
		{"far future", now + 100*365*24*3600*1000, 0},
		{"log append time bit on a CreateTime topic", 0, recordbatch.AttrLogAppendTime},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := recordbatch.Build(recordbatch.Options{ProducerID: -1, BaseTimestamp: now},
				recordbatch.Record{OffsetDelta: 0, TimestampDelta: 0, Value: []byte("a")},
				recordbatch.Record{OffsetDelta: 1, TimestampDelta: 5, Value: []byte("b")})
			binary.BigEndian.PutUint64(b[recordbatch.OffMaxTimestamp:], uint64(tc.header))
			a := binary.BigEndian.Uint16(b[recordbatch.OffAttributes:]) | tc.attrs
			binary.BigEndian.PutUint16(b[recordbatch.OffAttributes:], a)
			recordbatch.SetCRC(b)
			res := h.produce(9, 1, "t", 0, b)
			if res.ErrorCode != 0 {
				t.Fatalf("produce: %v", kerr.ErrorForCode(res.ErrorCode))
			}
			fr := h.fetch(context.Background(), 11, fetchReq("t", 1, 0, res.BaseOffset))
			stored := fr.Topics[0].Partitions[0].RecordBatches
			hd, err := recordbatch.ParseHeader(stored)
			if err != nil {
				t.Fatal(err)
			}
			if err := recordbatch.CheckCRC(stored[:hd.Size()]); err != nil {
				t.Fatalf("stored batch: %v", err)
			}
			if hd.MaxTimestamp != now+5 || hd.Attributes&recordbatch.AttrLogAppendTime != 0 {
				t.Fatalf("stored max timestamp %d attributes %#x, want %d and CreateTime", hd.MaxTimestamp, hd.Attributes, now+5)
			}
		})
	}
}

// An unauthorized OffsetForLeaderEpoch must not open (on demand) a partition the
// subscription has not delivered yet: authorization comes before any lookup.
func TestOffsetForLeaderEpochAuthorizesFirst(t *testing.T) {
	h := newHarness(t, nil, topicSpec{name: "t", id: 1})
	h.meta.set(image(2, topicSpec{name: "t", id: 1}, topicSpec{name: "secret", id: 2}))
	r := kmsg.NewPtrOffsetForLeaderEpochRequest()
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = "secret"
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.CurrentLeaderEpoch, rp.LeaderEpoch = -1, 5
	rt.Partitions = append(rt.Partitions, rp)
	r.Topics = append(r.Topics, rt)
	resp, err := h.doAs(context.Background(), 4, r, denyTopicAndCluster("secret"))
	if err != nil {
		t.Fatal(err)
	}
	if c := resp.Msg.(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0].ErrorCode; c != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("got %v", kerr.ErrorForCode(c))
	}
	h.m.mu.RLock()
	_, opened := h.m.parts[kernel.TopicPartition{Topic: "secret"}]
	h.m.mu.RUnlock()
	if opened {
		t.Fatal("an unauthorized request opened the partition")
	}
	// A broker (CLUSTER_ACTION) may ask without DESCRIBE on the topic, as Kafka.
	resp, err = h.doAs(context.Background(), 4, r, denyTopic("secret"))
	if err != nil {
		t.Fatal(err)
	}
	if p := resp.Msg.(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]; p.ErrorCode != 0 || p.LeaderEpoch != 5 || p.EndOffset != 0 {
		t.Fatalf("with CLUSTER_ACTION: %v epoch %d end %d", kerr.ErrorForCode(p.ErrorCode), p.LeaderEpoch, p.EndOffset)
	}
}

// denyTopicAndCluster denies every operation on one topic and CLUSTER_ACTION.
type denyTopicAndCluster string

func (d denyTopicAndCluster) Authorize(_ context.Context, _ kernel.Principal, _ string, op kernel.Operation, r kernel.Resource) bool {
	return !(r.Type == kernel.ResTopic && r.Name == string(d)) && !(r.Type == kernel.ResCluster && op == kernel.OpClusterAction)
}
