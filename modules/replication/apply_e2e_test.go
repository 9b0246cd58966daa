package replication_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/internal/testbroker"
)

// TestE2EOpenFailureStorageError: a partition whose directory cannot be created (a
// file is in its place) answers produce with KAFKA_STORAGE_ERROR, not the retriable
// NOT_LEADER_OR_FOLLOWER; once the file is gone the retry opens it, without a restart.
func TestE2EOpenFailureStorageError(t *testing.T) {
	b := testbroker.Start(t)
	block := filepath.Join(b.DataDir, "blocked-0")
	if err := os.WriteFile(block, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	createTopic(t, b, "blocked", 1, nil)
	cl := b.Client(t, kgo.DefaultProduceTopic("blocked"))
	ctx := testCtx(t)
	id := topicID(t, b, "blocked")

	produce := func() int16 {
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = 1, 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic, rt.TopicID = "blocked", id // v13+ names topics by ID
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = oneBatch()
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	if c := produce(); c != kerr.KafkaStorageError.Code {
		t.Fatalf("produce to an unopenable partition: %v, want KAFKA_STORAGE_ERROR", kerr.ErrorForCode(c))
	}
	// kgo surfaces it (after its retries).
	short := b.Client(t, kgo.DefaultProduceTopic("blocked"), kgo.RecordRetries(1))
	if err := short.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("kgo produce: %v, want KAFKA_STORAGE_ERROR", err)
	}
	if err := os.Remove(block); err != nil {
		t.Fatal(err)
	}
	produceSync(t, cl, &kgo.Record{Value: []byte("after")}) // kgo retries until the reopen
	if c := produce(); c != 0 {
		t.Fatalf("produce after the cause went: %v", kerr.ErrorForCode(c))
	}
	if got := consumeN(t, b, "blocked", 2); string(got[0].Value) != "after" {
		t.Fatalf("consumed %q first", got[0].Value)
	}
}

// oneBatch is a valid one-record batch.
func oneBatch() []byte {
	return recordbatch.Build(recordbatch.Options{ProducerID: -1, BaseSequence: -1, ProducerEpoch: -1, BaseTimestamp: time.Now().UnixMilli()},
		recordbatch.Record{Value: []byte("v")})
}

// TestE2EManyTopics: 2,000 topics created in one CreateTopics are each writable and
// readable; deleting them all in one DeleteTopics removes their directories.
func TestE2EManyTopics(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	const n = 2000
	b := testbroker.Start(t)
	adm := b.Admin(t)
	ctx := testCtx(t)
	names := make([]string, n)
	for i := range names {
		names[i] = "many-" + strconv.Itoa(i)
	}
	start := time.Now()
	res, err := adm.CreateTopics(ctx, 1, 1, nil, names...)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Sorted() {
		if r.Err != nil {
			t.Fatalf("create %s: %v", r.Topic, r.Err)
		}
	}
	cl := b.Client(t)
	recs := make([]*kgo.Record, n)
	for i, name := range names {
		recs[i] = &kgo.Record{Topic: name, Value: []byte(name)}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	t.Logf("created %d topics and produced to each in %v", n, time.Since(start))
	for _, i := range []int{0, n / 2, n - 1} {
		if got := consumeN(t, b, names[i], 1); string(got[0].Value) != names[i] {
			t.Fatalf("%s: consumed %q", names[i], got[0].Value)
		}
	}
	for _, name := range names {
		if _, err := os.Stat(filepath.Join(b.DataDir, name+"-0")); err != nil {
			t.Fatalf("partition directory of %s: %v", name, err)
		}
	}
	dres, err := adm.DeleteTopics(ctx, names...)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range dres.Sorted() {
		if r.Err != nil {
			t.Fatalf("delete %s: %v", r.Topic, r.Err)
		}
	}
	// (Generous: segmentlog rewrites its checkpoints at every Remove, so a bulk
	// deletion costs O(partitions²) there, slow under -race.)
	testbroker.WaitFor(t, 5*time.Minute, "partition directories removed", func() string {
		left := 0
		for _, name := range names {
			if _, err := os.Stat(filepath.Join(b.DataDir, name+"-0")); err == nil {
				left++
			}
		}
		if left > 0 {
			return strconv.Itoa(left) + " left"
		}
		return ""
	})
}
