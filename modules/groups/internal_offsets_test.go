package groups_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/internal/testbroker"
	"github.com/sluicehq/sluice/kernel"
)

// TestInternalOffsetsTxn commits a group's offsets through kernel.InternalOffsets in
// transactions driven with kernel.InternalTxns: pending offsets answer
// UNSTABLE_OFFSET_COMMIT, committed ones become visible (to kadm too), aborted ones
// never do.
func TestInternalOffsetsTxn(t *testing.T) {
	b, adm := startWithTopic(t, txnGroupConfig, "in", 2)
	it, ok := b.Kernel.Module("txn").(kernel.InternalTxns)
	if !ok {
		t.Fatal("txn module does not implement kernel.InternalTxns")
	}
	io, ok := b.Kernel.Module("groups").(kernel.InternalOffsets)
	if !ok {
		t.Fatal("groups module does not implement kernel.InternalOffsets")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const id, group = "internal-offsets", "__internal-group"
	tp0, tp1 := kernel.TopicPartition{Topic: "in", Partition: 0}, kernel.TopicPartition{Topic: "in", Partition: 1}
	tps := []kernel.TopicPartition{tp0, tp1}

	var got map[kernel.TopicPartition]int64
	if err := testbroker.RetryCoordinator(t, ctx, "fetch", func() (err error) { got, err = io.StableOffsets(ctx, group, tps); return err }); err != nil {
		t.Fatalf("StableOffsets of a new group: %v", err)
	}
	if len(got) != 0 {
		t.Fatalf("a new group has offsets %v", got)
	}
	var pe kernel.ProducerIDEpoch
	if err := testbroker.RetryCoordinator(t, ctx, "init", func() (err error) { pe, err = it.InitProducerID(ctx, id, 10_000); return err }); err != nil {
		t.Fatalf("InitProducerID: %v", err)
	}
	txn := func(commit bool, offs map[kernel.TopicPartition]int64) {
		t.Helper()
		if err := testbroker.RetryCoordinator(t, ctx, "add offsets", func() error { return it.AddOffsetsToTxn(ctx, id, pe, group) }); err != nil {
			t.Fatalf("AddOffsetsToTxn: %v", err)
		}
		if err := io.TxnCommitOffsets(ctx, id, group, pe, offs); err != nil {
			t.Fatalf("TxnCommitOffsets: %v", err)
		}
		if _, err := io.StableOffsets(ctx, group, []kernel.TopicPartition{tp0}); !errors.Is(err, kerr.UnstableOffsetCommit) {
			t.Fatalf("StableOffsets with a pending commit = %v, want UNSTABLE_OFFSET_COMMIT", err)
		}
		if err := it.EndTxn(ctx, id, pe, commit); err != nil {
			t.Fatalf("EndTxn: %v", err)
		}
	}
	waitOffsets := func(want map[kernel.TopicPartition]int64) {
		t.Helper()
		waitFor(t, 20*time.Second, "stable offsets", func() string {
			got, err := io.StableOffsets(ctx, group, tps)
			if err != nil {
				return err.Error()
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				return fmt.Sprintf("offsets %v, want %v", got, want)
			}
			return ""
		})
	}
	txn(true, map[kernel.TopicPartition]int64{tp0: 10, tp1: 3})
	waitOffsets(map[kernel.TopicPartition]int64{tp0: 10, tp1: 3})
	txn(false, map[kernel.TopicPartition]int64{tp0: 99})
	waitOffsets(map[kernel.TopicPartition]int64{tp0: 10, tp1: 3})
	txn(true, map[kernel.TopicPartition]int64{tp0: 12})
	waitOffsets(map[kernel.TopicPartition]int64{tp0: 12, tp1: 3})

	// kadm sees the group's offsets as any consumer group's.
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("kadm FetchOffsets: %v", err)
	}
	if o, ok := offs.Lookup("in", 0); !ok || o.At != 12 {
		t.Fatalf("kadm sees in/0 at %+v (found %v), want 12", o, ok)
	}

	// Bad input gets the request's error codes.
	if err := io.TxnCommitOffsets(ctx, id, group, kernel.ProducerIDEpoch{ID: -1, Epoch: -1}, map[kernel.TopicPartition]int64{tp0: 1}); !errors.Is(err, kerr.InvalidProducerIDMapping) {
		t.Fatalf("TxnCommitOffsets(no producer) = %v", err)
	}
	if _, err := io.StableOffsets(ctx, "", tps); !errors.Is(err, kerr.InvalidGroupID) {
		t.Fatalf("StableOffsets(\"\") = %v", err)
	}
	// Not in a transaction that includes the offsets partition: refused by the
	// coordinator's verification, nothing left pending.
	if err := io.TxnCommitOffsets(ctx, id, group, pe, map[kernel.TopicPartition]int64{tp0: 50}); !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("TxnCommitOffsets outside a transaction = %v, want INVALID_TXN_STATE", err)
	}
	if err := io.TxnCommitOffsets(ctx, id, group, pe, map[kernel.TopicPartition]int64{{Topic: "nope", Partition: 0}: 1}); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("TxnCommitOffsets(unknown topic) = %v", err)
	}
	waitOffsets(map[kernel.TopicPartition]int64{tp0: 12, tp1: 3})
}
