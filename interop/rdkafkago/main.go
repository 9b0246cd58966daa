// Command rdkafkago is the interop suite's librdkafka client of a version Debian does
// not ship (confluent-kafka-go bundles librdkafka 2.11): a producer with KIP-714
// client metrics on. It produces -n records to -topic, then keeps the client open,
// pushing its metrics at the interval the broker asks, until its stdin closes; it
// then flushes and closes (a terminating push) and exits 0. Errors exit 1.
//
// With -txn ID it is a transactional producer instead: -rounds transactions of -n
// records each ("<round>-<i>"), committing the even rounds and aborting the odd
// ones, then it exits.
//
// It is its own Go module so that the broker's module does not need cgo.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

func main() {
	bootstrap := flag.String("bootstrap", "127.0.0.1:9092", "bootstrap servers")
	topic := flag.String("topic", "t", "topic to produce to")
	clientID := flag.String("client-id", "rdkafkago", "client.id")
	n := flag.Int("n", 10, "records to produce")
	txnID := flag.String("txn", "", "transactional.id: run transactions instead")
	rounds := flag.Int("rounds", 4, "transactions to run with -txn")
	flag.Parse()
	run := run
	if *txnID != "" {
		run = func(bootstrap, topic, clientID string, n int) error {
			return runTxn(bootstrap, topic, clientID, *txnID, n, *rounds)
		}
	}
	if err := run(*bootstrap, *topic, *clientID, *n); err != nil {
		fmt.Fprintln(os.Stderr, "rdkafkago:", err)
		os.Exit(1)
	}
}

func run(bootstrap, topic, clientID string, n int) error {
	p, err := kafka.NewProducer(&kafka.ConfigMap{
		"bootstrap.servers":   bootstrap,
		"client.id":           clientID,
		"enable.metrics.push": true,
		"acks":                "all",
	})
	if err != nil {
		return err
	}
	defer p.Close()
	v, s := kafka.LibraryVersion()
	fmt.Printf("librdkafka %s (0x%x)\n", s, v)
	done := make(chan kafka.Event, n)
	for i := range n {
		if err := p.Produce(&kafka.Message{
			TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: kafka.PartitionAny},
			Value:          fmt.Appendf(nil, "v%d", i),
		}, done); err != nil {
			return err
		}
	}
	for range n {
		if m := (<-done).(*kafka.Message); m.TopicPartition.Error != nil {
			return m.TopicPartition.Error
		}
	}
	fmt.Println("produced", n)
	// Serve librdkafka's events (logs, errors) until stdin closes.
	go func() {
		for range p.Events() {
		}
	}()
	_, _ = io.Copy(io.Discard, os.Stdin)
	p.Flush(10_000)
	return nil
}

func runTxn(bootstrap, topic, clientID, txnID string, n, rounds int) error {
	p, err := kafka.NewProducer(&kafka.ConfigMap{
		"bootstrap.servers": bootstrap,
		"client.id":         clientID,
		"transactional.id":  txnID,
		"linger.ms":         5,
	})
	if err != nil {
		return err
	}
	defer p.Close()
	v, s := kafka.LibraryVersion()
	fmt.Printf("librdkafka %s (0x%x)\n", s, v)
	ctx := context.Background()
	if err := p.InitTransactions(ctx); err != nil {
		return fmt.Errorf("init: %w", err)
	}
	done := make(chan kafka.Event, n)
	for r := range rounds {
		if err := p.BeginTransaction(); err != nil {
			return fmt.Errorf("begin %d: %w", r, err)
		}
		for i := range n {
			if err := p.Produce(&kafka.Message{
				TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: kafka.PartitionAny},
				Value:          fmt.Appendf(nil, "%d-%d", r, i),
			}, done); err != nil {
				return err
			}
		}
		for range n {
			if m := (<-done).(*kafka.Message); m.TopicPartition.Error != nil {
				return fmt.Errorf("round %d: %w", r, m.TopicPartition.Error)
			}
		}
		if r%2 == 0 {
			err = p.CommitTransaction(ctx)
		} else {
			err = p.AbortTransaction(ctx)
		}
		if err != nil {
			return fmt.Errorf("end %d: %w", r, err)
		}
		fmt.Printf("round %d ended (commit=%v)\n", r, r%2 == 0)
	}
	return nil
}
