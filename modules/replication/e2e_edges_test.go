package replication_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/testbroker"
)

// ofle sends one OffsetForLeaderEpoch (the newest version both speak) for
// topic/partition to broker 1 (a client would route it by leader, and knows none for
// what does not exist) and returns its answer.
func ofle(t *testing.T, cl *kgo.Client, topic string, partition, current, epoch int32) kmsg.OffsetForLeaderEpochResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = -1
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = partition, current, epoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := cl.Broker(1).Request(testCtx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]
}

// leaderEpochOf is the partition's leader epoch, once Metadata and the leader's own
// answer (ListOffsets) agree on it: a restarted broker's partition may be elected
// more than once while it comes back.
func leaderEpochOf(t *testing.T, b *testbroker.Broker, topic string) int32 {
	t.Helper()
	adm := b.Admin(t)
	var epoch int32
	testbroker.WaitFor(t, 20*time.Second, "a settled leader epoch", func() string {
		td, err := adm.ListTopics(testCtx(t), topic)
		if err != nil {
			return err.Error()
		}
		ends, err := adm.ListEndOffsets(testCtx(t), topic)
		if err != nil {
			return err.Error()
		}
		end, _ := ends.Lookup(topic, 0)
		if m := td[topic].Partitions[0].LeaderEpoch; m != end.LeaderEpoch || end.Err != nil {
			return fmt.Sprintf("metadata epoch %d, leader's %d (%v)", m, end.LeaderEpoch, end.Err)
		}
		epoch = end.LeaderEpoch
		return ""
	})
	return epoch
}

// TestE2EOffsetForLeaderEpochEdgeCases walks Kafka's OffsetForLeaderEpoch answers
// (LeaderEpochFileCache.endOffsetFor and the partition's checks) over real sockets:
// an empty partition, the current epoch, an epoch between two, one below every
// entry after the log start moved past it, an unknown epoch and one newer than the
// leader's, the current-epoch fence both ways, and unknown topics and partitions.
func TestE2EOffsetForLeaderEpochEdgeCases(t *testing.T) {
	b := testbroker.Start(t)
	const topic = "ofle"
	createTopic(t, b, topic, 1, nil)
	cl := b.Client(t, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
	e0 := leaderEpochOf(t, b, topic)

	check := func(what string, got kmsg.OffsetForLeaderEpochResponseTopicPartition, code int16, epoch int32, end int64) {
		t.Helper()
		if got.ErrorCode != code || got.LeaderEpoch != epoch || got.EndOffset != end {
			t.Errorf("%s: code %v epoch %d end %d; want %v %d %d", what,
				kerr.ErrorForCode(got.ErrorCode), got.LeaderEpoch, got.EndOffset, kerr.ErrorForCode(code), epoch, end)
		}
	}
	// Empty: the current epoch ends at the log end, 0.
	check("empty, current epoch", ofle(t, cl, topic, 0, e0, e0), 0, e0, 0)
	check("undefined epoch", ofle(t, cl, topic, 0, -1, -1), 0, -1, -1)
	check("epoch newer than the leader's", ofle(t, cl, topic, 0, -1, e0+5), 0, -1, -1)

	for range 10 {
		produceSync(t, cl, &kgo.Record{Value: []byte("a")})
	}
	check("current epoch", ofle(t, cl, topic, 0, -1, e0), 0, e0, 10)

	// A restart makes the partition leaderless and elects it again: a new epoch.
	b.Restart(t)
	cl = b.Client(t, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
	e1 := leaderEpochOf(t, b, topic)
	if e1 <= e0 {
		t.Fatalf("leader epoch %d after a restart, was %d", e1, e0)
	}
	for range 10 {
		produceSync(t, cl, &kgo.Record{Value: []byte("b")})
	}
	check("old epoch", ofle(t, cl, topic, 0, e1, e0), 0, e0, 10)
	if e1 > e0+1 {
		check("epoch between", ofle(t, cl, topic, 0, e1, e0+1), 0, e0, 10)
	}
	check("new epoch", ofle(t, cl, topic, 0, e1, e1), 0, e1, 20)
	if e0 > 0 {
		check("epoch below every entry", ofle(t, cl, topic, 0, e1, e0-1), 0, e0-1, 0)
	}
	// The fence on the caller's current leader epoch.
	check("fenced", ofle(t, cl, topic, 0, e1-1, e1), kerr.FencedLeaderEpoch.Code, -1, -1)
	check("unknown leader epoch", ofle(t, cl, topic, 0, e1+1, e1), kerr.UnknownLeaderEpoch.Code, -1, -1)

	// DeleteRecords past epoch e0's records: the cache starts at the new log start,
	// and an older epoch answers its own number at that start (Kafka's rule for an
	// epoch below every entry).
	adm := b.Admin(t)
	del := kadm.Offsets{}
	del.Add(kadm.Offset{Topic: topic, Partition: 0, At: 15})
	if res, err := adm.DeleteRecords(testCtx(t), del); err != nil || res.Error() != nil {
		t.Fatalf("delete records: %v %v", err, res.Error())
	}
	check("epoch gone below the log start", ofle(t, cl, topic, 0, e1, e0), 0, e0, 15)
	check("current epoch after the delete", ofle(t, cl, topic, 0, e1, e1), 0, e1, 20)

	// What is not there.
	check("unknown partition", ofle(t, cl, topic, 7, -1, 0), kerr.UnknownTopicOrPartition.Code, -1, -1)
	check("unknown topic", ofle(t, cl, "no-such-topic", 0, -1, 0), kerr.UnknownTopicOrPartition.Code, -1, -1)
}

// fetchOne sends one Fetch of topic/partition at offset with the options set by
// edit, over the newest version, and returns the partition's answer.
func fetchOne(t *testing.T, cl *kgo.Client, id [16]byte, topic string, offset int64, edit func(*kmsg.FetchRequest, *kmsg.FetchRequestTopicPartition)) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := fetchFromStart(topic, id)
	fp := &req.Topics[0].Partitions[0]
	fp.FetchOffset, fp.CurrentLeaderEpoch, fp.LastFetchedEpoch = offset, -1, -1
	if edit != nil {
		edit(req, fp)
	}
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) == 0 || len(resp.Topics[0].Partitions) == 0 {
		t.Fatalf("fetch answered no partition: error %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	return resp.Topics[0].Partitions[0]
}

// TestE2EFetchEdgeCases walks Kafka's Fetch answers at the edges of a log: an empty
// partition, the log end, past it, below the log start, a first batch larger than
// every byte limit (KIP-74), the current-epoch fence both ways, a last fetched epoch
// that diverges (KIP-320, the answer a consumer truncates by), an unknown topic id,
// and a long poll on nothing that answers empty at max wait.
func TestE2EFetchEdgeCases(t *testing.T) {
	b := testbroker.Start(t)
	const topic = "fedges"
	createTopic(t, b, topic, 1, nil)
	id := topicID(t, b, topic)
	cl := b.Client(t, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))

	p := fetchOne(t, cl, id, topic, 0, nil)
	if p.ErrorCode != 0 || p.HighWatermark != 0 || p.LastStableOffset != 0 || p.LogStartOffset != 0 || len(p.RecordBatches) != 0 {
		t.Fatalf("empty partition: %+v", p)
	}
	if p := fetchOne(t, cl, id, topic, 1, nil); p.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("past the end of an empty partition: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	// Long poll on nothing: empty at max wait, not an error, not early.
	start := time.Now()
	p = fetchOne(t, cl, id, topic, 0, func(r *kmsg.FetchRequest, _ *kmsg.FetchRequestTopicPartition) {
		r.MinBytes, r.MaxWaitMillis = 1, 300
	})
	if took := time.Since(start); p.ErrorCode != 0 || len(p.RecordBatches) != 0 || took < 250*time.Millisecond {
		t.Fatalf("long poll on nothing: %v, %d bytes after %v", kerr.ErrorForCode(p.ErrorCode), len(p.RecordBatches), time.Since(start))
	}
	t.Logf("long poll of 300 ms answered after %v", time.Since(start))

	big := make([]byte, 4096)
	produceSync(t, cl, &kgo.Record{Value: big})
	for range 9 {
		produceSync(t, cl, &kgo.Record{Value: []byte("small")})
	}
	if p := fetchOne(t, cl, id, topic, 10, nil); p.ErrorCode != 0 || len(p.RecordBatches) != 0 || p.HighWatermark != 10 {
		t.Fatalf("at the log end: %v, %d bytes, HW %d", kerr.ErrorForCode(p.ErrorCode), len(p.RecordBatches), p.HighWatermark)
	}
	if p := fetchOne(t, cl, id, topic, 11, nil); p.ErrorCode != kerr.OffsetOutOfRange.Code || p.HighWatermark != 10 {
		t.Fatalf("past the log end: %v HW %d", kerr.ErrorForCode(p.ErrorCode), p.HighWatermark)
	}
	// KIP-74: the first batch comes whole even over both limits, and nothing more.
	p = fetchOne(t, cl, id, topic, 0, func(r *kmsg.FetchRequest, fp *kmsg.FetchRequestTopicPartition) {
		r.MaxBytes, fp.PartitionMaxBytes = 100, 100
	})
	if p.ErrorCode != 0 || len(p.RecordBatches) < 4096 || len(p.RecordBatches) > 4096+200 {
		t.Fatalf("first batch over the limits: %v, %d bytes", kerr.ErrorForCode(p.ErrorCode), len(p.RecordBatches))
	}

	e0 := leaderEpochOf(t, b, topic)
	if p := fetchOne(t, cl, id, topic, 0, func(_ *kmsg.FetchRequest, fp *kmsg.FetchRequestTopicPartition) {
		fp.CurrentLeaderEpoch = e0 + 1
	}); p.ErrorCode != kerr.UnknownLeaderEpoch.Code {
		t.Fatalf("newer current epoch: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	// A new epoch (restart), then a fetch that claims epoch e0 went on to 20: the
	// leader answers where e0 really ended, and sends no records.
	b.Restart(t)
	cl = b.Client(t, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
	e1 := leaderEpochOf(t, b, topic)
	for range 15 {
		produceSync(t, cl, &kgo.Record{Value: []byte("after")})
	}
	if p := fetchOne(t, cl, id, topic, 0, func(_ *kmsg.FetchRequest, fp *kmsg.FetchRequestTopicPartition) {
		fp.CurrentLeaderEpoch = e1 - 1
	}); p.ErrorCode != kerr.FencedLeaderEpoch.Code {
		t.Fatalf("older current epoch: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	p = fetchOne(t, cl, id, topic, 20, func(_ *kmsg.FetchRequest, fp *kmsg.FetchRequestTopicPartition) {
		fp.CurrentLeaderEpoch, fp.LastFetchedEpoch = e1, e0
	})
	if p.ErrorCode != 0 || p.DivergingEpoch.Epoch != e0 || p.DivergingEpoch.EndOffset != 10 || len(p.RecordBatches) != 0 {
		t.Fatalf("diverging epoch: %v %+v, %d bytes", kerr.ErrorForCode(p.ErrorCode), p.DivergingEpoch, len(p.RecordBatches))
	}
	// A last fetched epoch that agrees: records, no divergence.
	p = fetchOne(t, cl, id, topic, 5, func(_ *kmsg.FetchRequest, fp *kmsg.FetchRequestTopicPartition) {
		fp.CurrentLeaderEpoch, fp.LastFetchedEpoch = e1, e0
	})
	if p.ErrorCode != 0 || p.DivergingEpoch.Epoch != -1 || len(p.RecordBatches) == 0 {
		t.Fatalf("agreeing epoch: %v %+v, %d bytes", kerr.ErrorForCode(p.ErrorCode), p.DivergingEpoch, len(p.RecordBatches))
	}

	// Below the log start: out of range, with the new log start.
	del := kadm.Offsets{}
	del.Add(kadm.Offset{Topic: topic, Partition: 0, At: 12})
	if res, err := b.Admin(t).DeleteRecords(testCtx(t), del); err != nil || res.Error() != nil {
		t.Fatalf("delete records: %v %v", err, res.Error())
	}
	if p := fetchOne(t, cl, id, topic, 3, nil); p.ErrorCode != kerr.OffsetOutOfRange.Code || p.LogStartOffset != 12 {
		t.Fatalf("below the log start: %v, log start %d", kerr.ErrorForCode(p.ErrorCode), p.LogStartOffset)
	}
	if p := fetchOne(t, cl, id, topic, 12, nil); p.ErrorCode != 0 || p.LogStartOffset != 12 || len(p.RecordBatches) == 0 {
		t.Fatalf("at the log start: %v, log start %d", kerr.ErrorForCode(p.ErrorCode), p.LogStartOffset)
	}

	// A topic id the broker does not know.
	if p := fetchOne(t, cl, [16]byte{0xee}, topic, 0, nil); p.ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("unknown topic id: %v", kerr.ErrorForCode(p.ErrorCode))
	}
}

// TestE2EFetchInCompactedGap: a consumer that asks for an offset the cleaner removed
// gets the next record kept, with no error (Kafka's answer: the batch at or after
// the offset), through a whole compacted log with its gaps; ListOffsets by timestamp
// lands on a kept record too.
func TestE2EFetchInCompactedGap(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig("configs:\n  log.cleaner.backoff.ms: \"50\"\n"))
	const topic = "gaps"
	createTopic(t, b, topic, 1, map[string]*string{
		"cleanup.policy": str("compact"), "segment.bytes": str("1024"),
		"min.cleanable.dirty.ratio": str("0.01"), "delete.retention.ms": str("100000"),
	})
	cl := b.Client(t, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
	// Keys k0..k4, eight rounds: only the last round (offsets 35-39) survives a clean,
	// and the active segment's records.
	for round := range 8 {
		for k := range 5 {
			produceSync(t, cl, &kgo.Record{Key: []byte(fmt.Sprintf("k%d", k)), Value: []byte(fmt.Sprintf("%d-%d", round, k)),
				Timestamp: time.UnixMilli(int64(1000 + round*10 + k))})
		}
	}
	readFrom := func(from int64) []*kgo.Record {
		c := b.Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(from)}}))
		var out []*kgo.Record
		for len(out) == 0 || out[len(out)-1].Offset < 39 {
			fs := c.PollFetches(testCtx(t))
			if err := fs.Err(); err != nil {
				t.Fatalf("consume from %d: %v", from, err)
			}
			fs.EachRecord(func(r *kgo.Record) { out = append(out, r) })
		}
		return out
	}
	testbroker.WaitFor(t, 30*time.Second, "a clean", func() string {
		if n := len(readFrom(0)); n > 20 {
			return fmt.Sprintf("%d records", n)
		}
		return ""
	})
	all := readFrom(0)
	kept := map[int64]bool{}
	for _, r := range all {
		kept[r.Offset] = true
	}
	gap := int64(-1)
	for o := int64(0); o < 35; o++ {
		if !kept[o] {
			gap = o
			break
		}
	}
	if gap < 0 {
		t.Fatalf("no gap in %d records", len(all))
	}
	next := gap
	for !kept[next] {
		next++
	}
	got := readFrom(gap)
	if got[0].Offset != next {
		t.Fatalf("from the removed offset %d: first record at %d, want the next kept %d", gap, got[0].Offset, next)
	}
	// ListOffsets by the removed record's timestamp: the first kept record at or after it.
	off, _ := listOffset(t, cl, topic, 0, 1000, 0)
	if !kept[off] {
		t.Fatalf("ListOffsets at the first timestamp: offset %d was removed", off)
	}
}

// TestE2ETopicCompressionType: a topic's compression.type other than producer makes
// the broker store (and serve) its batches in that codec, whatever the producer
// sent, with every record, key, header and producer sequence intact; a level too.
func TestE2ETopicCompressionType(t *testing.T) {
	b := testbroker.Start(t)
	// Long and repetitive, so that every codec shrinks it (clients send a batch
	// uncompressed when compressing would not).
	value := func(i int) string { return strings.Repeat(fmt.Sprintf("value %d ", i), 40) }
	for _, tc := range []struct {
		topic, ctype, level string
		producer            kgo.CompressionCodec
		want                int8
	}{
		{"to-zstd", "zstd", "7", kgo.SnappyCompression(), 4},
		{"to-gzip", "gzip", "9", kgo.NoCompression(), 1},
		{"to-lz4", "lz4", "12", kgo.ZstdCompression(), 3},
		{"to-none", "uncompressed", "", kgo.GzipCompression(), 0},
		{"as-sent", "producer", "", kgo.Lz4Compression(), 3},
	} {
		t.Run(tc.ctype, func(t *testing.T) {
			cfgs := map[string]*string{"compression.type": str(tc.ctype)}
			if tc.level != "" {
				cfgs["compression."+tc.ctype+".level"] = str(tc.level)
			}
			createTopic(t, b, tc.topic, 1, cfgs)
			cl := b.Client(t, kgo.DefaultProduceTopic(tc.topic), kgo.ProducerBatchCompression(tc.producer), kgo.ProducerLinger(0))
			for i := range 20 {
				produceSync(t, cl, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(value(i)),
					Headers: []kgo.RecordHeader{{Key: "n", Value: []byte(fmt.Sprint(i))}}})
			}
			p := fetchOne(t, cl, topicID(t, b, tc.topic), tc.topic, 0, nil)
			if p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
				t.Fatalf("fetch: %v", kerr.ErrorForCode(p.ErrorCode))
			}
			for rest := p.RecordBatches; len(rest) >= 61; {
				size := int(uint32(rest[8])<<24|uint32(rest[9])<<16|uint32(rest[10])<<8|uint32(rest[11])) + 12
				if codec := int8(rest[22] & 7); codec != tc.want {
					t.Fatalf("stored codec %d, want %d", codec, tc.want)
				}
				rest = rest[size:]
			}
			got := consumeN(t, b, tc.topic, 20)
			for i, r := range got {
				if string(r.Key) != fmt.Sprint(i) || string(r.Value) != value(i) ||
					len(r.Headers) != 1 || string(r.Headers[0].Value) != fmt.Sprint(i) || r.Offset != int64(i) {
					t.Fatalf("record %d: %+v", i, r)
				}
			}
		})
	}
}
