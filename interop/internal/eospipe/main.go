// Command eospipe is the consume-transform-produce pipeline of the interop exactly-once
// tests (interop/txn_eos_test.go): a franz-go GroupTransactSession that reads records
// from an input topic in a consumer group, writes "out-" + value to the same partition of
// an output topic and commits the consumed offsets in the same transaction. The tests
// SIGKILL it (or the broker) mid-stream and start it again with the same transactional
// id and group instance id.
//
//	eospipe -brokers ADDR -group G -in IN -out OUT -txn-id ID [-chunk N] [-pace D]
//
// It prints one JSON line per ended transaction on stdout ({"event":"txn",...}) and runs
// until its stdin is closed, then leaves cleanly (exit 0). Any error a
// GroupTransactSession reports as final makes it exit 1; the test starts it again.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "eospipe: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		brokers = flag.String("brokers", "", "bootstrap address")
		group   = flag.String("group", "", "consumer group")
		in      = flag.String("in", "", "input topic")
		out     = flag.String("out", "", "output topic (at least as many partitions as the input)")
		txnID   = flag.String("txn-id", "", "transactional id (also the group instance id)")
		chunk   = flag.Int("chunk", 100, "most records per transaction")
		pace    = flag.Duration("pace", 0, "pause between producing and ending each transaction (keeps transactions open long enough to be killed in)")
	)
	flag.Parse()
	if *brokers == "" || *group == "" || *in == "" || *out == "" || *txnID == "" {
		flag.Usage()
		return errors.New("missing flags")
	}

	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(*brokers),
		kgo.ClientID("sluice-interop-eospipe"),
		kgo.TransactionalID(*txnID),
		kgo.TransactionTimeout(20*time.Second),
		kgo.ConsumerGroup(*group),
		kgo.InstanceID(*txnID), // a restarted pipeline takes its predecessor's place at once
		kgo.SessionTimeout(10*time.Second),
		kgo.ConsumeTopics(*in),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.FetchMaxWait(200*time.Millisecond),
	)
	if err != nil {
		return err
	}
	defer sess.Close()

	// Initialise the producer id first, as Java's initTransactions does: it fences a
	// killed predecessor and aborts its open transaction. Otherwise the group's offset
	// fetch (require_stable) would wait on that transaction's pending offsets until its
	// timeout, since franz-go initialises lazily, on the first produce.
	initStart := time.Now()
	initCtx, cancelInit := context.WithTimeout(context.Background(), 60*time.Second)
	pid, epoch, err := sess.Client().ProducerID(initCtx)
	cancelInit()
	if err != nil {
		return fmt.Errorf("initialise the producer id: %w", err)
	}
	fmt.Fprintf(os.Stderr, "eospipe: producer id %d epoch %d (%s)\n", pid, epoch, time.Since(initStart).Round(time.Millisecond))

	// Closing stdin asks for a clean stop between transactions.
	pollCtx, stopPolling := context.WithCancel(context.Background())
	defer stopPolling()
	var stopping atomic.Bool
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		stopping.Store(true)
		stopPolling()
	}()

	enc := json.NewEncoder(os.Stdout)
	ctx := context.Background()
	total := 0
	for !stopping.Load() {
		fs := sess.PollRecords(pollCtx, *chunk)
		if pollCtx.Err() != nil {
			break
		}
		if fs.IsClientClosed() {
			return errors.New("client closed")
		}
		fs.EachError(func(topic string, p int32, err error) {
			fmt.Fprintf(os.Stderr, "eospipe: fetch %s/%d: %v\n", topic, p, err)
		})
		if fs.NumRecords() == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		var produceErr atomic.Value
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			n++
			outRec := &kgo.Record{Topic: *out, Partition: r.Partition, Key: r.Key, Value: append([]byte("out-"), r.Value...)}
			sess.Produce(ctx, outRec, func(_ *kgo.Record, err error) {
				if err != nil {
					produceErr.CompareAndSwap(nil, err)
				}
			})
		})
		if *pace > 0 {
			time.Sleep(*pace)
		}
		try := kgo.TryCommit
		if err := sess.Client().Flush(ctx); err != nil {
			return fmt.Errorf("flush: %w", err)
		}
		if err, _ := produceErr.Load().(error); err != nil {
			fmt.Fprintf(os.Stderr, "eospipe: produce failed, aborting: %v\n", err)
			try = kgo.TryAbort
		}
		committed, err := sess.End(ctx, try)
		if err != nil {
			return fmt.Errorf("end transaction (%d records): %w", n, err)
		}
		if committed {
			total += n
		}
		_ = enc.Encode(map[string]any{"event": "txn", "records": n, "committed": committed, "total": total})
	}
	_ = enc.Encode(map[string]any{"event": "stopped", "total": total})
	return nil
}
