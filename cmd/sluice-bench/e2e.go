package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// e2eHeader is the part of an e2e record's value the tool owns:
//
//	| send time, unix ns, int64 BE | sequence number, uint64 BE | payload ... |
//
// The consumer runs in the same process as the producer, so both read one clock.
const e2eHeader = 16

// minSleep bounds how finely the sender paces: it sends every record that is due and
// then sleeps until the next one is, but never less than this (shorter sleeps cost
// wake-ups and are rounded up by the kernel anyway). Records are stamped when they are
// handed to the client, so pacing granularity does not count as latency.
const minSleep = 500 * time.Microsecond

// drainTimeout is how long the consumer may take, after the last record was
// acknowledged, to read every acknowledged record before the rest count as lost.
const drainTimeout = 15 * time.Second

// e2eConsumer reads the records and measures their latency. Only its goroutine touches
// seen.
type e2eConsumer struct {
	cl        *kgo.Client
	lat       *hist
	warmEnd   atomic.Int64 // unix ns: records sent before are not measured
	seen      []uint64
	unique    atomic.Int64
	dups      atomic.Int64
	measured  atomic.Int64
	bytes     atomic.Int64
	malformed atomic.Int64
	st        *counters
}

func (c *e2eConsumer) run(ctx context.Context) {
	for ctx.Err() == nil {
		fs := c.cl.PollFetches(ctx)
		now := time.Now().UnixNano()
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				c.st.fail(fmt.Errorf("fetch %s/%d: %w", topic, p, err))
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			if len(r.Value) < e2eHeader {
				c.malformed.Add(1)
				return
			}
			sent := int64(binary.BigEndian.Uint64(r.Value))
			seq := binary.BigEndian.Uint64(r.Value[8:])
			w, bit := seq/64, uint64(1)<<(seq%64)
			for uint64(len(c.seen)) <= w {
				c.seen = append(c.seen, 0)
			}
			if c.seen[w]&bit != 0 {
				c.dups.Add(1)
				return
			}
			c.seen[w] |= bit
			c.unique.Add(1)
			c.bytes.Add(int64(len(r.Key) + len(r.Value)))
			if sent >= c.warmEnd.Load() {
				c.lat.Record(time.Duration(now - sent))
				c.measured.Add(1)
			}
		})
	}
}

func runE2E(ctx context.Context, c *e2eConfig, stderr io.Writer) (*result, error) {
	parts, err := setupTopic(ctx, &c.common)
	if err != nil {
		return nil, err
	}
	// The consumer starts at the current end of every partition, so it reads exactly
	// what this run sends, however long its first fetch takes.
	start, err := endOffsets(ctx, &c.common)
	if err != nil {
		return nil, err
	}
	st := &counters{}
	cons := &e2eConsumer{lat: newHist(), st: st}
	cons.warmEnd.Store(1<<63 - 1) // nothing is measured before the clock starts
	ccl, err := kgo.NewClient(append(c.clientOpts(), kgo.ConsumePartitions(start))...)
	if err != nil {
		return nil, err
	}
	defer ccl.Close()
	cons.cl = ccl

	pcl, err := kgo.NewClient(append(append(c.clientOpts(), c.producerFlags.opts()...), kgo.DefaultProduceTopic(c.topic))...)
	if err != nil {
		return nil, err
	}
	defer pcl.Close()
	if err := pcl.Ping(ctx); err != nil {
		return nil, fmt.Errorf("ping: %w", err)
	}
	ackLat := newHist()
	prod := newProducer(pcl, st, ackLat)
	pl := newPayload(c.recordSize - e2eHeader)
	ks := newKeys(c.keys)

	consCtx, stopCons := context.WithCancel(ctx)
	defer stopCons()
	consDone := make(chan struct{})
	go func() { defer close(consDone); cons.run(consCtx) }()

	before, err := takeSample(c.brokerPID)
	if err != nil {
		return nil, err
	}
	stopProgress := progress(ctx, stderr, c.progress, "e2e (acked)", st)
	t0 := time.Now()
	cons.warmEnd.Store(t0.Add(c.warmup).UnixNano())
	end := t0.Add(c.duration)
	var sent int64
	timer := time.NewTimer(0)
	<-timer.C
	for ctx.Err() == nil {
		now := time.Now()
		if !now.Before(end) {
			break
		}
		due := int64(now.Sub(t0).Seconds()*c.rate) + 1
		for ; sent < due; sent++ {
			v := make([]byte, c.recordSize)
			binary.BigEndian.PutUint64(v[8:], uint64(sent))
			copy(v[e2eHeader:], pl.value(sent))
			var key []byte
			if c.keyed {
				key = ks.key(sent)
			}
			binary.BigEndian.PutUint64(v, uint64(time.Now().UnixNano()))
			prod.send(ctx, key, v)
		}
		next := t0.Add(time.Duration(float64(sent) / c.rate * float64(time.Second)))
		timer.Reset(max(time.Until(next), minSleep))
		select {
		case <-ctx.Done():
		case <-timer.C:
		}
	}
	sendSpan := time.Since(t0)
	if err := pcl.Flush(ctx); err != nil {
		st.fail(fmt.Errorf("flush: %w", err))
	}
	acked := st.records.Load()
	// Wait for the consumer to read every acknowledged record.
	drainEnd := time.Now().Add(drainTimeout)
	for cons.unique.Load() < acked && time.Now().Before(drainEnd) && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Millisecond):
		}
	}
	elapsed := time.Since(t0)
	stopCons()
	<-consDone
	stopProgress()
	after, err := takeSample(c.brokerPID)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("e2e: %w after %d records sent", err, sent)
	}
	cfg := c.configMap()
	c.producerFlags.addConfig(cfg)
	cfg["rate"] = c.rate
	cfg["warmup"] = c.warmup.String()
	r := &result{
		Mode: "e2e", Brokers: brokersString(c.brokers), Topic: c.topic, Partitions: parts, Config: cfg,
		Records: cons.unique.Load(), Bytes: cons.bytes.Load(),
		Errors: st.errors.Load() + cons.malformed.Load(), FirstError: st.firstError(),
		Latency: cons.lat.Summary(), AckLatency: ackLat.Summary(),
		TargetRate: c.rate, Sent: sent, SentRate: round(float64(sent)/sendSpan.Seconds(), 1),
		Lost: max(0, acked-cons.unique.Load()), Duplicates: cons.dups.Load(),
		Measured: cons.measured.Load(), WarmupSecond: c.warmup.Seconds(),
	}
	if r.Lost > 0 && r.FirstError == "" {
		r.FirstError = fmt.Sprintf("%d acknowledged records not consumed within %v", r.Lost, drainTimeout)
	}
	if n := cons.malformed.Load(); n > 0 && r.FirstError == "" {
		r.FirstError = fmt.Sprintf("%d records without the e2e header (is another producer writing to the topic?)", n)
	}
	r.finish(elapsed, before, after)
	return r, nil
}

// endOffsets returns the topic's end offsets, as a ConsumePartitions map.
func endOffsets(ctx context.Context, c *common) (map[string]map[int32]kgo.Offset, error) {
	cl, err := kgo.NewClient(c.clientOpts()...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, c.topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list end offsets: %w", err)
	}
	m := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) { m[o.Partition] = kgo.NewOffset().At(o.Offset) })
	return map[string]map[int32]kgo.Offset{c.topic: m}, nil
}
