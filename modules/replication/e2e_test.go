package replication_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/internal/testbroker"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func createTopic(t *testing.T, b *testbroker.Broker, name string, partitions int32, configs map[string]*string) {
	t.Helper()
	res, err := b.Admin(t).CreateTopic(testCtx(t), partitions, 1, configs, name)
	if err != nil || res.Err != nil {
		t.Fatalf("create topic %s: %v %v", name, err, res.Err)
	}
}

func str(s string) *string { return &s }

// topicID looks the topic's ID up (Fetch v13+ addresses topics by ID).
func topicID(t *testing.T, b *testbroker.Broker, name string) [16]byte {
	t.Helper()
	td, err := b.Admin(t).ListTopics(testCtx(t), name)
	if err != nil || td[name].Err != nil {
		t.Fatalf("list topics: %v %v", err, td[name].Err)
	}
	return td[name].ID
}

func produceSync(t *testing.T, cl *kgo.Client, recs ...*kgo.Record) {
	t.Helper()
	if err := cl.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// consumeN reads n records from the start of topic.
func consumeN(t *testing.T, b *testbroker.Broker, topic string, n int, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	cl := b.Client(t, append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500 * time.Millisecond)}, opts...)...)
	return pollN(t, testCtx(t), cl, n)
}

// pollN polls cl until it has read n records, failing on a fetch error or once ctx
// ends.
func pollN(t *testing.T, ctx context.Context, cl *kgo.Client, n int) []*kgo.Record {
	t.Helper()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d: %v", len(out), n, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		out = append(out, fs.Records()...)
	}
	return out
}

// valuesOf is the records' values.
func valuesOf(recs []*kgo.Record) []string {
	vals := make([]string, len(recs))
	for i, r := range recs {
		vals[i] = string(r.Value)
	}
	return vals
}

func TestE2EProduceConsumeAcks(t *testing.T) {
	b := testbroker.Start(t)
	for _, tc := range []struct {
		name string
		opts []kgo.Opt
	}{
		{"acks=0", []kgo.Opt{kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite()}},
		{"acks=1", []kgo.Opt{kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite()}},
		{"acks=all", []kgo.Opt{kgo.RequiredAcks(kgo.AllISRAcks())}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := "acks-" + tc.name[5:]
			createTopic(t, b, topic, 1, nil)
			cl := b.Client(t, append(tc.opts, kgo.DefaultProduceTopic(topic))...)
			var recs []*kgo.Record
			for i := 0; i < 50; i++ {
				recs = append(recs, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: []byte("value-" + strconv.Itoa(i)),
					Headers: []kgo.RecordHeader{{Key: "h", Value: []byte{byte(i)}}}})
			}
			produceSync(t, cl, recs...)
			got := consumeN(t, b, topic, 50)
			for i, r := range got {
				if r.Offset != int64(i) || string(r.Key) != strconv.Itoa(i) || string(r.Value) != "value-"+strconv.Itoa(i) ||
					len(r.Headers) != 1 || r.Headers[0].Value[0] != byte(i) {
					t.Fatalf("record %d: %+v", i, r)
				}
			}
		})
	}
}

func TestE2ECodecs(t *testing.T) {
	b := testbroker.Start(t)
	for _, c := range []struct {
		name  string
		codec kgo.CompressionCodec
	}{{"none", kgo.NoCompression()}, {"gzip", kgo.GzipCompression()}, {"snappy", kgo.SnappyCompression()}, {"lz4", kgo.Lz4Compression()}, {"zstd", kgo.ZstdCompression()}} {
		t.Run(c.name, func(t *testing.T) {
			topic := "codec-" + c.name
			createTopic(t, b, topic, 1, nil)
			cl := b.Client(t, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(c.codec), kgo.ProducerLinger(50*time.Millisecond))
			var recs []*kgo.Record
			for i := 0; i < 100; i++ {
				recs = append(recs, &kgo.Record{Value: bytes.Repeat([]byte{byte('a' + i%26)}, 200)})
			}
			produceSync(t, cl, recs...)
			got := consumeN(t, b, topic, 100)
			for i, r := range got {
				if !bytes.Equal(r.Value, recs[i].Value) {
					t.Fatalf("record %d differs", i)
				}
			}
		})
	}
}

func TestE2ELogAppendTime(t *testing.T) {
	b := testbroker.Start(t)
	createTopic(t, b, "lat", 1, map[string]*string{"message.timestamp.type": str("LogAppendTime")})
	cl := b.Client(t, kgo.DefaultProduceTopic("lat"))
	before := time.Now().Add(-time.Second)
	produceSync(t, cl, &kgo.Record{Value: []byte("x"), Timestamp: time.UnixMilli(1000)})
	r := consumeN(t, b, "lat", 1)[0]
	if r.Timestamp.Before(before) || r.Attrs.TimestampType() != 1 {
		t.Fatalf("timestamp %v type %d: want the broker's append time", r.Timestamp, r.Attrs.TimestampType())
	}
}

func TestE2EMessageTooLarge(t *testing.T) {
	b := testbroker.Start(t)
	createTopic(t, b, "small", 1, map[string]*string{"max.message.bytes": str("1000")})
	cl := b.Client(t, kgo.DefaultProduceTopic("small"), kgo.RecordRetries(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
	err := cl.ProduceSync(testCtx(t), &kgo.Record{Value: make([]byte, 5000)}).FirstErr()
	if !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("got %v, want MESSAGE_TOO_LARGE", err)
	}
	produceSync(t, cl, &kgo.Record{Value: make([]byte, 100)})
}

func TestE2ELongPollWokenByProduce(t *testing.T) {
	b := testbroker.Start(t)
	createTopic(t, b, "poll", 1, nil)
	cl := b.Client(t, kgo.DefaultProduceTopic("poll"))
	req := fetchFromStart("poll", topicID(t, b, "poll"))
	req.MaxWaitMillis, req.MinBytes = 30_000, 1

	type result struct {
		resp *kmsg.FetchResponse
		err  error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		resp, err := req.RequestWith(testCtx(t), cl)
		done <- result{resp, err}
	}()
	produceSync(t, cl, &kgo.Record{Value: []byte("wake up")})
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("long poll returned after %v: not woken by the produce", d)
	}
	if p := res.resp.Topics[0].Partitions[0]; len(p.RecordBatches) == 0 {
		t.Fatalf("no records: %+v", p)
	}
}

func TestE2EFetchSessionsWithConsumer(t *testing.T) {
	b := testbroker.Start(t)
	createTopic(t, b, "sess", 3, nil)
	pcl := b.Client(t, kgo.DefaultProduceTopic("sess"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ccl := b.Client(t, kgo.ConsumeTopics("sess"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	ctx := testCtx(t)
	seen := map[int32]int64{}
	total := 0
	for round := 0; round < 5; round++ {
		var recs []*kgo.Record
		for i := 0; i < 30; i++ {
			recs = append(recs, &kgo.Record{Partition: int32(i % 3), Value: []byte(fmt.Sprintf("%d-%d", round, i))})
		}
		produceSync(t, pcl, recs...)
		want := total + 30
		for total < want {
			fs := ccl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatal(ctx.Err())
			}
			fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
			fs.EachRecord(func(r *kgo.Record) {
				if next := seen[r.Partition]; r.Offset != next {
					t.Fatalf("partition %d: offset %d, want %d", r.Partition, r.Offset, next)
				}
				seen[r.Partition] = r.Offset + 1
				total++
			})
		}
	}
}

func TestE2EListOffsetsAndDeleteRecords(t *testing.T) {
	b := testbroker.Start(t)
	createTopic(t, b, "lo", 1, nil)
	cl := b.Client(t, kgo.DefaultProduceTopic("lo"), kgo.ProducerLinger(0))
	adm := kadm.NewClient(cl)
	ctx := testCtx(t)
	for i := 0; i < 10; i++ {
		produceSync(t, cl, &kgo.Record{Value: []byte("x"), Timestamp: time.UnixMilli(int64(1000 * (i + 1)))})
	}
	start, err := adm.ListStartOffsets(ctx, "lo")
	if err != nil {
		t.Fatal(err)
	}
	end, err := adm.ListEndOffsets(ctx, "lo")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := start.Lookup("lo", 0); o.Offset != 0 || o.Err != nil {
		t.Fatalf("start %+v", o)
	}
	if o, _ := end.Lookup("lo", 0); o.Offset != 10 || o.Err != nil {
		t.Fatalf("end %+v", o)
	}
	after, err := adm.ListOffsetsAfterMilli(ctx, 4500, "lo")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := after.Lookup("lo", 0); o.Offset != 4 || o.Timestamp != 5000 {
		t.Fatalf("after 4500ms: %+v", o)
	}
	for _, tc := range []struct {
		name    string
		list    func(context.Context, ...string) (kadm.ListedOffsets, error)
		off, ts int64
	}{
		{"max timestamp (-3)", adm.ListMaxTimestampOffsets, 9, 10_000},
		{"earliest local (-4)", adm.ListLocalLogStartOffsets, 0, -1},
		{"latest tiered (-5)", adm.ListLatestRemoteOffsets, -1, -1},
		{"after every record", func(ctx context.Context, topics ...string) (kadm.ListedOffsets, error) {
			return adm.ListOffsetsAfterMilli(ctx, 99_999, topics...)
		}, 10, -1},
	} {
		l, err := tc.list(ctx, "lo")
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if o, _ := l.Lookup("lo", 0); o.Err != nil || o.Offset != tc.off || o.Timestamp != tc.ts {
			t.Fatalf("%s: %+v", tc.name, o)
		}
	}

	dres, err := adm.DeleteRecords(ctx, kadm.Offsets{"lo": {0: {Topic: "lo", Partition: 0, At: 4}}})
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := dres.Lookup("lo", 0); r.Err != nil || r.LowWatermark != 4 {
		t.Fatalf("delete records: %+v", r)
	}
	start, _ = adm.ListStartOffsets(ctx, "lo")
	if o, _ := start.Lookup("lo", 0); o.Offset != 4 {
		t.Fatalf("start after delete: %+v", o)
	}
	dres, _ = adm.DeleteRecords(ctx, kadm.Offsets{"lo": {0: {Topic: "lo", Partition: 0, At: 11}}})
	if r, _ := dres.Lookup("lo", 0); !errors.Is(r.Err, kerr.OffsetOutOfRange) {
		t.Fatalf("delete past HW: %+v", r)
	}
}

func TestE2EOffsetOutOfRangeReset(t *testing.T) {
	b := testbroker.Start(t)
	createTopic(t, b, "oor", 1, nil)
	cl := b.Client(t, kgo.DefaultProduceTopic("oor"))
	produceSync(t, cl, &kgo.Record{Value: []byte("a")}, &kgo.Record{Value: []byte("b")})
	got := consumeN(t, b, "oor", 2, kgo.ConsumeTopics(), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"oor": {0: kgo.NewOffset().At(1000)}}))
	if got[0].Offset != 0 {
		t.Fatalf("reset went to %d, want the start", got[0].Offset)
	}
}

// TestE2EBytesMatchSegment: what a consumer receives is byte for byte what is in the
// segment file (zero copy, no re-encoding).
func TestE2EBytesMatchSegment(t *testing.T) {
	b := testbroker.Start(t)
	createTopic(t, b, "bytes", 1, nil)
	cl := b.Client(t, kgo.DefaultProduceTopic("bytes"), kgo.ProducerBatchCompression(kgo.SnappyCompression()))
	for i := 0; i < 5; i++ {
		produceSync(t, cl, &kgo.Record{Key: []byte("k"), Value: bytes.Repeat([]byte("v"), 100*i)})
	}
	req := fetchFromStart("bytes", topicID(t, b, "bytes"))
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	got := resp.Topics[0].Partitions[0].RecordBatches
	seg, err := os.ReadFile(filepath.Join(b.DataDir, "bytes-0", "00000000000000000000.log"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || !bytes.Equal(got, seg) {
		t.Fatalf("fetched %d bytes, segment has %d; equal=%v", len(got), len(seg), bytes.Equal(got, seg))
	}
}

// fetchFromStart is a sessionless Fetch of topic-0 from offset 0, up to 1 MiB, naming
// the topic by name and id (the request's version puts one on the wire).
func fetchFromStart(topic string, id [16]byte) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.MaxBytes, req.SessionEpoch = 1<<20, -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = topic, id
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	return req
}

// rawRequest sends one request over a fresh connection and decodes the response.
func rawRequest(t *testing.T, addr string, req kmsg.Request, v int16) kmsg.Response {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	req.SetVersion(v)
	buf := kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw")).AppendRequest(nil, req, 7)
	if _, err := conn.Write(buf); err != nil {
		t.Fatal(err)
	}
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(conn, body); err != nil {
		t.Fatal(err)
	}
	if cid := int32(binary.BigEndian.Uint32(body)); cid != 7 {
		t.Fatalf("correlation id %d", cid)
	}
	body = body[4:]
	resp := req.ResponseKind()
	if resp.IsFlexible() {
		body = body[1:] // empty header tags
	}
	if err := resp.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestE2ERawProduceRejects(t *testing.T) {
	b := testbroker.Start(t)
	createTopic(t, b, "raw", 1, nil)
	good := func() []byte {
		return recordbatch.Build(recordbatch.Options{ProducerID: -1, BaseSequence: -1, ProducerEpoch: -1, BaseTimestamp: time.Now().UnixMilli()},
			recordbatch.Record{Value: []byte("a")}, recordbatch.Record{OffsetDelta: 1, Value: []byte("b")})
	}
	badCRC := good()
	badCRC[len(badCRC)-1] ^= 1
	moreRecords := good()
	binary.BigEndian.PutUint32(moreRecords[recordbatch.OffRecordCount:], 5)
	recordbatch.SetCRC(moreRecords)
	for _, tc := range []struct {
		name    string
		acks    int16
		records []byte
		want    *kerr.Error
	}{
		{"bad acks", 3, good(), kerr.InvalidRequiredAcks},
		{"corrupt crc", -1, badCRC, kerr.CorruptMessage},
		{"more records than held", 1, moreRecords, kerr.InvalidRecord},
		{"good", -1, good(), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, v := range []int16{3, 9, 12} {
				req := kmsg.NewPtrProduceRequest()
				req.Acks, req.TimeoutMillis = tc.acks, 10_000
				rt := kmsg.NewProduceRequestTopic()
				rt.Topic = "raw"
				rp := kmsg.NewProduceRequestTopicPartition()
				rp.Records = tc.records
				rt.Partitions = append(rt.Partitions, rp)
				req.Topics = append(req.Topics, rt)
				resp := rawRequest(t, b.Addr, req, v).(*kmsg.ProduceResponse)
				code := resp.Topics[0].Partitions[0].ErrorCode
				if tc.want == nil && code != 0 || tc.want != nil && code != tc.want.Code {
					t.Fatalf("v%d: got %v want %v", v, kerr.ErrorForCode(code), tc.want)
				}
			}
		})
	}
}

// TestE2ERestart: records survive a restart and the HW comes back at the log end.
func TestE2ERestart(t *testing.T) {
	b := testbroker.Start(t)
	createTopic(t, b, "durable", 2, nil)
	cl := b.Client(t, kgo.DefaultProduceTopic("durable"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := 0; i < 20; i++ {
		produceSync(t, cl, &kgo.Record{Partition: int32(i % 2), Value: []byte(strconv.Itoa(i))})
	}
	cl.Close()
	b.Restart(t)
	got := consumeN(t, b, "durable", 20)
	if len(got) != 20 {
		t.Fatalf("%d records after restart", len(got))
	}
	end, err := b.Admin(t).ListEndOffsets(testCtx(t), "durable")
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 2; p++ {
		if o, _ := end.Lookup("durable", p); o.Offset != 10 {
			t.Fatalf("partition %d end offset %d after restart", p, o.Offset)
		}
	}
	cl = b.Client(t, kgo.DefaultProduceTopic("durable"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceSync(t, cl, &kgo.Record{Partition: 0, Value: []byte("after")})
}

// TestE2ERawFetchAllVersions: every Fetch version over a real socket (the kernel's
// header and sendfile path with this module's encoder) returns the same bytes.
func TestE2ERawFetchAllVersions(t *testing.T) {
	b := testbroker.Start(t)
	createTopic(t, b, "versions", 1, nil)
	cl := b.Client(t, kgo.DefaultProduceTopic("versions"))
	produceSync(t, cl, &kgo.Record{Value: []byte("one")}, &kgo.Record{Value: []byte("two")})
	id := topicID(t, b, "versions")
	var first []byte
	for v := int16(4); v <= (&kmsg.FetchRequest{}).MaxVersion(); v++ {
		req := fetchFromStart("versions", id)
		resp := rawRequest(t, b.Addr, req, v).(*kmsg.FetchResponse)
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.HighWatermark != 2 || len(p.RecordBatches) == 0 {
			t.Fatalf("v%d: %+v", v, p)
		}
		if first == nil {
			first = p.RecordBatches
		} else if !bytes.Equal(first, p.RecordBatches) {
			t.Fatalf("v%d: records differ from v4's", v)
		}
	}
}
