package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

const produceUsage = `usage: sluice produce TOPIC [flags] < lines

Each line of standard input is one record's value (without its newline).
  -k, --key-delim SEP   split each line at the first SEP: key before, value after
  -H, --header K=V      a header on every record (repeatable)
  -p, --partition N     write to partition N (default: by key, else spread)
  --acks all|1|0        acknowledgements to wait for (default all)
  --max-line BYTES      longest line accepted (default 1048576)
A summary goes to standard error; with --json, one JSON line per record to standard
output ({"partition":..,"offset":..}).

` + kafkaHelp

// progressEvery is how often long runs print a progress line to stderr.
const progressEvery = 2 * time.Second

func produceCmd(args []string, stdout, stderr io.Writer) int {
	return exitCode(stderr, "sluice produce", produceRun(args, os.Stdin, stdout, stderr))
}

func produceRun(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs, kf := newKafkaFlagSet("sluice produce", produceUsage, stderr)
	var delim, acks string
	var headers keyValues
	partition := fs.Int("partition", -1, "partition (-1: by key, else spread)")
	fs.IntVar(partition, "p", -1, "shorthand for --partition")
	fs.StringVar(&delim, "key-delim", "", "split each line into key and value at the first SEP")
	fs.StringVar(&delim, "k", "", "shorthand for --key-delim")
	fs.Var(&headers, "header", "header K=V on every record (repeatable)")
	fs.Var(&headers, "H", "shorthand for --header")
	fs.StringVar(&acks, "acks", "all", "all, 1 or 0")
	maxLine := fs.Int("max-line", 1<<20, "longest line accepted, in bytes")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs(pos, 1, 1, "topic"); err != nil {
		return err
	}
	topic := pos[0]
	hdrs, err := headers.pairs("--header")
	if err != nil {
		return err
	}
	var opts []kgo.Opt
	switch acks {
	case "all", "-1":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	default:
		return usageError{fmt.Sprintf("--acks %q: want all, 1 or 0", acks)}
	}
	if *partition >= 0 {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	// The broker decides whether a missing topic is created
	// (auto.create.topics.enable), as for kcat and the Java client.
	opts = append(opts, kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic(topic), kgo.ProducerBatchMaxBytes(int32(min(*maxLine+1024, 16<<20))))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cl, err := kf.client(ctx, opts...)
	if err != nil {
		return err
	}
	defer cl.Close()

	var sent, acked, failedN atomic.Int64
	var firstErr error
	var mu sync.Mutex
	var outMu sync.Mutex
	done := func(r *kgo.Record, err error) {
		if err != nil {
			failedN.Add(1)
			mu.Lock()
			if firstErr == nil {
				firstErr = err
			}
			mu.Unlock()
			return
		}
		acked.Add(1)
		if kf.json {
			outMu.Lock()
			fmt.Fprintf(stdout, "{\"partition\":%d,\"offset\":%d}\n", r.Partition, r.Offset)
			outMu.Unlock()
		}
	}
	var headerList []kgo.RecordHeader
	for _, h := range hdrs {
		headerList = append(headerList, kgo.RecordHeader{Key: h[0], Value: []byte(h[1])})
	}
	sc := bufio.NewScanner(stdin)
	sc.Buffer(make([]byte, 64<<10), *maxLine)
	start := time.Now()
	lastProgress := start
	for sc.Scan() {
		if ctx.Err() != nil {
			break
		}
		line := bytes.Clone(sc.Bytes()) // the scanner reuses its buffer
		r := &kgo.Record{Value: line}
		if k, v, ok := bytes.Cut(line, []byte(delim)); ok && delim != "" {
			r.Key, r.Value = k, v
		}
		r.Headers = headerList // shared: the client only reads them
		if *partition >= 0 {
			r.Partition = int32(*partition)
		}
		sent.Add(1)
		cl.Produce(ctx, r, done)
		if now := time.Now(); now.Sub(lastProgress) >= progressEvery {
			lastProgress = now
			fmt.Fprintf(stderr, "produced %d records so far (%d acknowledged)\n", sent.Load(), acked.Load())
		}
	}
	scanErr := sc.Err()
	if err := cl.Flush(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "produced %d records to %s in %v", acked.Load(), topic, time.Since(start).Round(time.Millisecond))
	if n := failedN.Load(); n > 0 {
		mu.Lock()
		fmt.Fprintf(stderr, "; %d failed: %v", n, firstErr)
		mu.Unlock()
	}
	fmt.Fprintln(stderr)
	if scanErr != nil {
		if errors.Is(scanErr, bufio.ErrTooLong) {
			return fmt.Errorf("line %d is longer than --max-line %d bytes; stopped there", sent.Load()+1, *maxLine)
		}
		return scanErr
	}
	if failedN.Load() > 0 {
		return fmt.Errorf("%d of %d records were not written", failedN.Load(), sent.Load())
	}
	return ctx.Err()
}
