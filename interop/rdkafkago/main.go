// Command rdkafkago is the interop suite's librdkafka client of a version Debian does
// not ship (confluent-kafka-go bundles librdkafka 2.11): a producer with KIP-714
// client metrics on. It produces -n records to -topic, then keeps the client open,
// pushing its metrics at the interval the broker asks, until its stdin closes; it
// then flushes and closes (a terminating push) and exits 0. Errors exit 1.
//
// It is its own Go module so that the broker's module does not need cgo.
package main

import (
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
	flag.Parse()
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
