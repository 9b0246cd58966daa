package txn_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkInitProducerID measures InitProducerId round trips over a real socket:
// idempotent (a fresh id each, from the current block) and transactional (an epoch
// bump of one id each: one __transaction_state append).
func BenchmarkInitProducerID(b *testing.B) {
	br := startBroker(b)
	cl := br.Client(b)
	ctx := context.Background()
	b.Run("idempotent", func(b *testing.B) {
		for b.Loop() {
			r := kmsg.NewPtrInitProducerIDRequest()
			resp, err := r.RequestWith(ctx, cl)
			if err != nil || resp.ErrorCode != 0 {
				b.Fatalf("%v %v", err, kerr.ErrorForCode(resp.ErrorCode))
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "inits/s")
	})
	b.Run("transactional", func(b *testing.B) {
		id := "bench-init"
		// Find the coordinator first (and create __transaction_state).
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.CoordinatorType, fc.CoordinatorKey = 1, id
		if _, err := fc.RequestWith(ctx, cl); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			r := kmsg.NewPtrInitProducerIDRequest()
			r.TransactionalID, r.TransactionTimeoutMillis = &id, 60000
			resp, err := r.RequestWith(ctx, cl)
			if err != nil {
				b.Fatal(err)
			}
			if resp.ErrorCode != 0 && resp.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
				b.Fatal(kerr.ErrorForCode(resp.ErrorCode))
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "inits/s")
	})
}

// BenchmarkSmallTransactions measures transactions of one record to one partition
// (InitProducerId once; then AddPartitionsToTxn, Produce, EndTxn, markers and
// Complete* per transaction), with one producer and with 8 producers on separate
// transactional ids and partitions.
func BenchmarkSmallTransactions(b *testing.B) {
	for _, producers := range []int{1, 8} {
		b.Run(fmt.Sprintf("producers=%d", producers), func(b *testing.B) {
			br := startBroker(b)
			createTopic(b, br, "out", int32(producers))
			clients := make([]*kgo.Client, producers)
			for i := range clients {
				clients[i] = txnClient(b, br, fmt.Sprintf("bench-%d", i),
					kgo.RetryBackoffFn(func(int) time.Duration { return time.Millisecond }))
				oneTxn(b, clients[i], int32(i)) // warm up: init, coordinator lookup
			}
			var next atomic.Int64
			b.ResetTimer()
			var wg sync.WaitGroup
			for i, cl := range clients {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						oneTxn(b, cl, int32(i))
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "txns/s")
		})
	}
}

func oneTxn(b *testing.B, cl *kgo.Client, partition int32) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		b.Error(err)
		return
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Partition: partition, Value: []byte("v")}).FirstErr(); err != nil {
		b.Error(err)
		return
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		b.Error(err)
	}
}
