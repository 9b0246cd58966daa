package txn_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/internal/testbroker"
	"github.com/sluicehq/sluice/kernel"
)

func internalAPIs(t *testing.T, b *testbroker.Broker) (kernel.InternalTxns, kernel.Partitions) {
	t.Helper()
	it, ok := b.Kernel.Module("txn").(kernel.InternalTxns)
	if !ok {
		t.Fatalf("txn module %T does not implement kernel.InternalTxns", b.Kernel.Module("txn"))
	}
	parts, ok := b.Kernel.Module("replication").(kernel.Partitions)
	if !ok {
		t.Fatal("replication module does not implement kernel.Partitions")
	}
	return it, parts
}

func txnBatch(pe kernel.ProducerIDEpoch, vals ...string) []byte {
	recs := make([]recordbatch.Record, len(vals))
	for i, v := range vals {
		recs[i] = recordbatch.Record{Value: []byte(v), OffsetDelta: int32(i)}
	}
	return recordbatch.Build(recordbatch.Options{
		BaseTimestamp: time.Now().UnixMilli(), Transactional: true,
		ProducerID: pe.ID, ProducerEpoch: pe.Epoch, BaseSequence: -1,
	}, recs...)
}

// TestInternalTxnsCommitAbortFence drives transactions through kernel.InternalTxns
// with coordinator writes (base sequence -1): a committed transaction's records are
// visible to read_committed, an aborted one's are not, and a second InitProducerID
// fences the first producer (its open transaction is aborted, its epoch refused).
func TestInternalTxnsCommitAbortFence(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "out", 1)
	it, parts := internalAPIs(t, b)
	ctx := ctxT(t, 60*time.Second)
	const id = "internal-1"
	tp := kernel.TopicPartition{Topic: "out", Partition: 0}

	var pe kernel.ProducerIDEpoch
	if err := testbroker.RetryCoordinator(t, ctx, "init", func() (err error) { pe, err = it.InitProducerID(ctx, id, 10_000); return err }); err != nil {
		t.Fatalf("InitProducerID: %v", err)
	}
	txn := func(pe kernel.ProducerIDEpoch, commit bool, vals ...string) {
		t.Helper()
		if err := testbroker.RetryCoordinator(t, ctx, "add", func() error { return it.AddPartitionsToTxn(ctx, id, pe, []kernel.TopicPartition{tp}) }); err != nil {
			t.Fatalf("AddPartitionsToTxn: %v", err)
		}
		if _, err := parts.Append(ctx, tp, txnBatch(pe, vals...)); err != nil {
			t.Fatalf("append: %v", err)
		}
		if err := it.EndTxn(ctx, id, pe, commit); err != nil {
			t.Fatalf("EndTxn(commit=%v): %v", commit, err)
		}
	}
	txn(pe, true, "c1", "c2")
	txn(pe, false, "a1")
	txn(pe, true, "c3")

	// A second producer for the same id while the first has a transaction open.
	if err := testbroker.RetryCoordinator(t, ctx, "add", func() error { return it.AddPartitionsToTxn(ctx, id, pe, []kernel.TopicPartition{tp}) }); err != nil {
		t.Fatalf("AddPartitionsToTxn: %v", err)
	}
	if _, err := parts.Append(ctx, tp, txnBatch(pe, "zombie")); err != nil {
		t.Fatalf("append: %v", err)
	}
	var pe2 kernel.ProducerIDEpoch
	if err := testbroker.RetryCoordinator(t, ctx, "re-init", func() (err error) { pe2, err = it.InitProducerID(ctx, id, 10_000); return err }); err != nil {
		t.Fatalf("second InitProducerID: %v", err)
	}
	if pe2.ID == pe.ID && pe2.Epoch <= pe.Epoch {
		t.Fatalf("second InitProducerID = %+v, not past %+v", pe2, pe)
	}
	if err := it.EndTxn(ctx, id, pe, true); !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("EndTxn with the fenced epoch = %v, want PRODUCER_FENCED", err)
	}
	txn(pe2, true, "c4")

	// Bad input gets the request's error codes.
	if err := it.AddPartitionsToTxn(ctx, id, pe2, []kernel.TopicPartition{{Topic: "nope", Partition: 0}}); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("AddPartitionsToTxn(unknown topic) = %v", err)
	}
	if _, err := it.InitProducerID(ctx, id, -5); !errors.Is(err, kerr.InvalidTransactionTimeout) {
		t.Fatalf("InitProducerID(timeout -5) = %v", err)
	}
	if _, err := it.InitProducerID(ctx, "", 1000); !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("InitProducerID(\"\") = %v", err)
	}
	if err := it.EndTxn(ctx, "never-initialised", pe2, true); !errors.Is(err, kerr.InvalidProducerIDMapping) {
		t.Fatalf("EndTxn(unknown id) = %v", err)
	}

	got := readUntil(t, b, "out", "c4")
	if want := []string{"c1", "c2", "c3", "c4"}; !slices.Equal(got, want) {
		t.Fatalf("read_committed sees %q, want %q", got, want)
	}
}

// readUntil reads topic partition 0 with read_committed until it sees last.
func readUntil(t *testing.T, b *testbroker.Broker, topic, last string) []string {
	t.Helper()
	ctx := ctxT(t, 30*time.Second)
	cl := b.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(100*time.Millisecond))
	var vals []string
	for !slices.Contains(vals, last) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s: saw %q before the deadline", topic, vals)
		}
		fs.EachRecord(func(r *kgo.Record) { vals = append(vals, string(r.Value)) })
	}
	return vals
}
