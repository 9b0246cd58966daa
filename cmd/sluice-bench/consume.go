package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// consumeTarget decides when a consume run is done: after --records records, after
// --duration, or (neither) once every partition is read up to the end offset it had
// when the run started.
type consumeTarget struct {
	records  int64
	deadline time.Time
	end      map[int32]int64 // "everything" mode: partition -> end offset at the start
	start    map[int32]int64 // and its start offset (both fixed once loaded)

	mu        sync.Mutex
	next      map[int32]int64 // partition -> next offset to read
	remaining int             // partitions not yet read up to end
	done      chan struct{}
	closeOnce sync.Once
}

func (t *consumeTarget) finish() { t.closeOnce.Do(func() { close(t.done) }) }

// observe records what one fetch partition delivered; it may end the run.
func (t *consumeTarget) observe(total int64, partition int32, lastOffset int64) {
	if t.records > 0 && total >= t.records {
		t.finish()
		return
	}
	if t.end == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	end, ok := t.end[partition]
	if !ok {
		return
	}
	before := t.next[partition]
	t.next[partition] = max(before, lastOffset+1)
	if before < end && t.next[partition] >= end {
		t.remaining--
		if t.remaining == 0 {
			t.finish()
		}
	}
}

func runConsume(ctx context.Context, c *consumeConfig, stderr io.Writer) (*result, error) {
	parts, err := setupTopic(ctx, &c.common)
	if err != nil {
		return nil, err
	}
	tg := &consumeTarget{done: make(chan struct{})}
	switch {
	case c.recordsSet:
		tg.records = c.records
	case c.durationSet:
	default:
		if err := tg.loadEnds(ctx, &c.common); err != nil {
			return nil, err
		}
	}
	st := &counters{}
	var assigned atomic.Int64 // group: unix ns of the first assignment, 0 before

	members := c.members
	clients := make([]*kgo.Client, members)
	for i := range clients {
		opts := append(c.clientOpts(),
			kgo.ConsumeTopics(c.topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		)
		if c.group != "" {
			opts = append(opts, kgo.ConsumerGroup(c.group),
				kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) {
					assigned.CompareAndSwap(0, time.Now().UnixNano())
				}))
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			for _, cl := range clients[:i] {
				cl.Close()
			}
			return nil, err
		}
		clients[i] = cl
	}
	defer func() {
		for _, cl := range clients {
			cl.Close()
		}
	}()

	before, err := takeSample(c.brokerPID)
	if err != nil {
		return nil, err
	}
	stopProgress := progress(ctx, stderr, c.progress, "consume", st)
	start := time.Now()
	if c.durationSet {
		tg.deadline = start.Add(c.duration)
	}
	if tg.end != nil && tg.remaining == 0 {
		tg.finish() // nothing to read
	}
	runCtx, cancel := context.WithCancel(ctx)
	if !tg.deadline.IsZero() {
		runCtx, cancel = context.WithDeadline(ctx, tg.deadline)
	}
	defer cancel()
	go func() {
		select {
		case <-tg.done:
			cancel()
		case <-runCtx.Done():
		}
	}()
	var wg sync.WaitGroup
	for _, cl := range clients {
		wg.Go(func() {
			for runCtx.Err() == nil {
				fs := cl.PollFetches(runCtx)
				fs.EachError(func(topic string, p int32, err error) {
					if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
						st.fail(fmt.Errorf("fetch %s/%d: %w", topic, p, err))
					}
				})
				fs.EachPartition(func(p kgo.FetchTopicPartition) {
					if len(p.Records) == 0 {
						return
					}
					var n int64
					for _, r := range p.Records {
						n += int64(len(r.Key) + len(r.Value))
					}
					st.bytes.Add(n)
					total := st.records.Add(int64(len(p.Records)))
					tg.observe(total, p.Partition, p.Records[len(p.Records)-1].Offset)
				})
			}
		})
	}
	wg.Wait()
	end := time.Now()
	stopProgress()
	after, err := takeSample(c.brokerPID)
	if err != nil {
		return nil, err
	}
	select {
	case <-tg.done:
	default:
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("consume: %w after %d records", err, st.records.Load())
		}
	}
	// A group's throughput counts from its first assignment, as Kafka's consumer perf
	// test reports fetch time apart from the group join. (Not from the first record: its
	// fetch may already carry much of a small topic.)
	first := start
	if a := assigned.Load(); a != 0 && c.group != "" {
		first = time.Unix(0, a)
	}
	cfg := c.configMap()
	cfg["members"] = c.members
	if c.group != "" {
		cfg["group"] = c.group
	}
	if tg.end != nil {
		var want int64
		for p, e := range tg.end {
			want += e - tg.start[p]
		}
		cfg["end_offsets_total"] = want
	}
	r := &result{
		Mode: "consume", Brokers: brokersString(c.brokers), Topic: c.topic, Partitions: parts, Config: cfg,
		Records: st.records.Load(), Bytes: st.bytes.Load(), Errors: st.errors.Load(), FirstError: st.firstError(),
		StartupSeconds: round(first.Sub(start).Seconds(), 6),
	}
	r.finish(end.Sub(first), before, after)
	return r, nil
}

// loadEnds snapshots the start and end offsets of every partition ("consume
// everything").
func (t *consumeTarget) loadEnds(ctx context.Context, c *common) error {
	cl, err := kgo.NewClient(c.clientOpts()...)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	starts, err := adm.ListStartOffsets(ctx, c.topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return fmt.Errorf("list start offsets: %w", err)
	}
	ends, err := adm.ListEndOffsets(ctx, c.topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Errorf("list end offsets: %w", err)
	}
	t.end = map[int32]int64{}
	t.next = map[int32]int64{}
	t.start = map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		s, _ := starts.Lookup(o.Topic, o.Partition)
		t.end[o.Partition] = o.Offset
		t.next[o.Partition] = s.Offset
		t.start[o.Partition] = s.Offset
		if s.Offset < o.Offset {
			t.remaining++
		}
	})
	return nil
}
