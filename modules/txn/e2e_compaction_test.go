package txn_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/testbroker"
)

var longCompaction = flag.Bool("compaction.long", false, "run at least 200,000 transactions in TestTxnStateTopicStaysSmall (the CI form runs at least 1,200)")

// txnStateBytes is the size of __transaction_state on the broker (DescribeLogDirs).
func txnStateBytes(ctx context.Context, adm *kadm.Client) (int64, error) {
	dirs, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		return 0, err
	}
	var n int64
	dirs.Each(func(d kadm.DescribedLogDir) {
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			if p.Topic == "__transaction_state" {
				n += p.Size
			}
		})
	})
	return n, nil
}

// runTxn runs one transaction of cl that produces value to partition 0 of "out" and
// ends it with how (a kgo.TryCommit or kgo.TryAbort). Safe off the test goroutine.
func runTxn(ctx context.Context, cl *kgo.Client, value string, how kgo.TransactionEndTry) error {
	if err := cl.BeginTransaction(); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(value)}).FirstErr(); err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	if err := cl.EndTransaction(ctx, how); err != nil {
		return fmt.Errorf("end: %w", err)
	}
	return nil
}

// listedIDs returns the transactional ids ListTransactions reports.
func listedIDs(ctx context.Context, adm *kadm.Client) ([]string, error) {
	ls, err := adm.ListTransactions(ctx, nil, nil)
	if err != nil {
		return nil, err
	}
	return ls.TransactionalIDs(), nil
}

// TestTxnStateTopicStaysSmall: a few transactional ids running many transactions
// (committed and aborted) and ids that expire keep __transaction_state proportional to
// their live keys (the cleaner compacts it). After a restart, replayed from the
// compacted log, the live ids resume (InitProducerId bumps the epoch; the previous
// instance is fenced) and the expired ids stay forgotten (their tombstones survive the
// clean).
func TestTxnStateTopicStaysSmall(t *testing.T) {
	minTxns := 1200
	if *longCompaction {
		minTxns = 200000
	}
	b := testbroker.Start(t, testbroker.WithConfig(`
configs:
  offsets.topic.num.partitions: "1"
  transaction.state.log.num.partitions: "1"
  transaction.state.log.segment.bytes: "65536"
  transactional.id.expiration.ms: "6000"
  log.cleaner.backoff.ms: "50"
modules:
  txn: {use: coordinator, sweep_interval_ms: 50}
`))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	createTopic(t, b, "out", 1)
	adm := b.Admin(t)

	// Ids that run one transaction each and then fall idle: they expire
	// (transactional.id.expiration.ms) while the live ids carry on.
	const expiring = 20
	var expIDs []string
	for i := range expiring {
		id := fmt.Sprintf("tx-exp-%d", i)
		expIDs = append(expIDs, id)
		cl := txnClient(t, b, id)
		if err := runTxn(ctx, cl, id, kgo.TryCommit); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		cl.Close()
	}

	// The live ids: one client each, transactions back to back, every third aborted,
	// until the expired ids are gone and the topic is small. They never idle longer
	// than the expiration, so they stay.
	const live = 4
	clients := make([]*kgo.Client, live)
	liveIDs := make([]string, live)
	for i := range live {
		liveIDs[i] = fmt.Sprintf("tx-live-%d", i)
		clients[i] = txnClient(t, b, liveIDs[i])
	}
	var stop atomic.Bool
	var done atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, live)
	for i, cl := range clients {
		wg.Go(func() {
			for n := 0; !stop.Load(); n++ {
				how := kgo.TryCommit
				if n%3 == 2 {
					how = kgo.TryAbort
				}
				if err := runTxn(ctx, cl, fmt.Sprintf("%s-%d", liveIDs[i], n), how); err != nil {
					errs <- fmt.Errorf("%s transaction %d: %w", liveIDs[i], n, err)
					stop.Store(true)
					return
				}
				done.Add(1)
			}
		})
	}

	// Uncompacted, the log holds three records per transaction (Ongoing, Prepare*,
	// Complete*: well over 100 bytes each in its own batch); compacted, 24 keys plus
	// the uncleaned head (a couple of 64 KiB segments).
	const bound = 384 << 10
	var size int64
	deadline := time.Now().Add(2 * time.Minute)
	for !stop.Load() {
		time.Sleep(100 * time.Millisecond) // the cleaner runs every 50 ms
		if time.Now().After(deadline) {
			stop.Store(true)
			wg.Wait()
			t.Fatalf("after %d transactions: __transaction_state is %d bytes (want < %d) or expired ids are still listed", done.Load(), size, bound)
		}
		if done.Load() < int64(minTxns) {
			continue
		}
		var err error
		if size, err = txnStateBytes(ctx, adm); err != nil {
			t.Fatal(err)
		}
		ids, err := listedIDs(ctx, adm)
		if err != nil {
			t.Fatal(err)
		}
		gone := !slices.ContainsFunc(ids, func(id string) bool { return slices.Contains(expIDs, id) })
		if gone && size < bound {
			stop.Store(true)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("__transaction_state: %d bytes after %d transactions of %d ids and %d expired ids", size, done.Load(), live, expiring)

	// EndTxn answers once Prepare* is written; the markers and Complete* follow, so
	// the states to compare are the settled ones (a restart completes a Prepare*).
	before := map[string]kadm.DescribedTransaction{}
	for _, id := range liveIDs {
		testbroker.WaitFor(t, 20*time.Second, id+" settled before the restart", func() string {
			d := describeTxn(t, b, id)
			before[id] = d
			if strings.HasPrefix(d.State, "Prepare") {
				return d.State
			}
			return ""
		})
	}

	b.Restart(t)
	adm = b.Admin(t)
	for _, id := range liveIDs {
		var after kadm.DescribedTransaction
		testbroker.WaitFor(t, 20*time.Second, id+" loaded after the restart", func() string {
			ds, err := adm.DescribeTransactions(ctx, id)
			if err != nil {
				return err.Error()
			}
			after = ds[id]
			if after.Err != nil {
				return after.Err.Error()
			}
			return ""
		})
		bf := before[id]
		if after.ProducerID != bf.ProducerID || after.ProducerEpoch != bf.ProducerEpoch || after.State != bf.State {
			t.Fatalf("%s after the restart %+v, before %+v", id, after, bf)
		}
	}
	ds, err := adm.DescribeTransactions(ctx, expIDs...)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range expIDs {
		if d := ds[id]; !errors.Is(d.Err, kerr.TransactionalIDNotFound) {
			t.Fatalf("expired %s after the restart: %+v, want TRANSACTIONAL_ID_NOT_FOUND", id, d)
		}
	}
	ids, err := listedIDs(ctx, adm)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, liveIDs) {
		t.Fatalf("listed after the restart: %v, want %v", ids, liveIDs)
	}

	// New instances of the live ids: InitProducerId bumps the epoch, and the previous
	// instance (still holding the old epoch) is fenced.
	for i, id := range liveIDs {
		fresh := txnClient(t, b, id)
		if err := runTxn(ctx, fresh, id+"-fresh", kgo.TryCommit); err != nil {
			t.Fatalf("%s new instance: %v", id, err)
		}
		// InitProducerId bumps the epoch; under transaction version 2 the commit bumps
		// it again. A fresh kgo client was seen to end its first transaction with
		// EndTxn v4 although every ApiVersions answer listed transaction.version 2
		// (kgo reads the features from the answers it has when it decides), so
		// either is right here.
		if d := describeTxn(t, b, id); d.ProducerID != before[id].ProducerID ||
			(d.ProducerEpoch != before[id].ProducerEpoch+1 && d.ProducerEpoch != before[id].ProducerEpoch+2) {
			t.Fatalf("%s new instance %+v, before the restart %+v", id, d, before[id])
		}
		err := runTxn(ctx, clients[i], id+"-zombie", kgo.TryCommit)
		if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
			t.Fatalf("%s previous instance: %v, want fenced", id, err)
		}
	}
}
