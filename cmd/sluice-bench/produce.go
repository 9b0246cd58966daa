package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// job is one record in flight with the time it was handed to the client. Jobs are
// recycled through a pool once their promise ran (the client keeps no reference to a
// record after calling its promise), and each carries its own promise func, so the
// steady state allocates nothing per record.
type job struct {
	rec     kgo.Record
	sent    time.Time
	promise func(*kgo.Record, error)
}

// producer is one client's share of a produce run.
type producer struct {
	cl    *kgo.Client
	jobs  sync.Pool
	st    *counters
	lat   *hist
	onAck func(*job) // optional, e2e
	win   *window    // optional, produce --warmup: set before the first send
}

// window is the measured span of a produce run with --warmup: the acknowledgements in
// [from, to) count towards its rate, the records sent in it towards its latency.
type window struct {
	from, to time.Time
	st       counters
}

// throttles counts the throttle times the brokers gave a run's clients (kgo's
// OnBrokerThrottle hook).
type throttles struct {
	n, ns atomic.Int64
}

func (t *throttles) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	if d > 0 {
		t.n.Add(1)
		t.ns.Add(int64(d))
	}
}

func newProducer(cl *kgo.Client, st *counters, lat *hist) *producer {
	p := &producer{cl: cl, st: st, lat: lat}
	p.jobs.New = func() any {
		j := &job{}
		j.promise = func(_ *kgo.Record, err error) { p.done(j, err) }
		return j
	}
	return p
}

func (p *producer) done(j *job, err error) {
	if err != nil {
		p.st.fail(err)
	} else {
		n := int64(len(j.rec.Key) + len(j.rec.Value))
		if w := p.win; w == nil {
			p.lat.Record(time.Since(j.sent))
		} else {
			now := time.Now()
			if !j.sent.Before(w.from) && j.sent.Before(w.to) {
				p.lat.Record(now.Sub(j.sent))
			}
			if !now.Before(w.from) && now.Before(w.to) {
				w.st.records.Add(1)
				w.st.bytes.Add(n)
			}
		}
		p.st.records.Add(1)
		p.st.bytes.Add(n)
		if p.onAck != nil {
			p.onAck(j)
		}
	}
	j.rec = kgo.Record{}
	p.jobs.Put(j)
}

// send hands a record to the client (blocking while its buffer is full).
func (p *producer) send(ctx context.Context, key, value []byte) {
	j := p.jobs.Get().(*job)
	j.rec.Key, j.rec.Value = key, value
	j.sent = time.Now()
	p.cl.Produce(ctx, &j.rec, j.promise)
}

func runProduce(ctx context.Context, c *produceConfig, stderr io.Writer) (*result, error) {
	parts, err := setupTopic(ctx, &c.common)
	if err != nil {
		return nil, err
	}
	pl := newPayload(c.recordSize)
	ks := newKeys(c.keys)
	st := &counters{}
	lat := newHist()
	thr := &throttles{}
	prods := make([]*producer, c.producers)
	for i := range prods {
		opts := append(c.clientOpts(), c.producerFlags.opts()...)
		opts = append(opts, kgo.DefaultProduceTopic(c.topic), kgo.WithHooks(thr))
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			for _, p := range prods[:i] {
				p.cl.Close()
			}
			return nil, err
		}
		prods[i] = newProducer(cl, st, lat)
	}
	defer func() {
		for _, p := range prods {
			p.cl.Close()
		}
	}()
	// Load metadata before the clock starts, so the run does not measure the first
	// lookups.
	for _, p := range prods {
		if err := p.cl.Ping(ctx); err != nil {
			return nil, fmt.Errorf("ping: %w", err)
		}
	}

	before, err := takeSample(c.brokerPID)
	if err != nil {
		return nil, err
	}
	stopProgress := progress(ctx, stderr, c.progress, "produce", st)
	start := time.Now()
	var deadline time.Time
	if c.durationSet {
		deadline = start.Add(c.duration)
	}
	var win *window
	if c.warmup > 0 {
		win = &window{from: start.Add(c.warmup), to: deadline}
		for _, p := range prods {
			p.win = win
		}
	}
	var wg sync.WaitGroup
	for i, p := range prods {
		share := c.records / int64(c.producers)
		if int64(i) < c.records%int64(c.producers) {
			share++
		}
		base := int64(i) << 40 // distinct record indices per producer
		wg.Go(func() {
			for j := int64(0); ctx.Err() == nil; j++ {
				if c.rate > 0 {
					pace(ctx, start, j, c.rate/float64(c.producers))
				}
				if c.durationSet {
					if j%256 == 0 && time.Now().After(deadline) {
						break
					}
				} else if j >= share {
					break
				}
				var key []byte
				if c.keyed {
					key = ks.key(base + j)
				}
				p.send(ctx, key, pl.value(base+j))
			}
			if err := p.cl.Flush(ctx); err != nil {
				st.fail(fmt.Errorf("flush: %w", err))
			}
		})
	}
	var after sample
	var sampleErr error
	if win != nil {
		// The broker's CPU is sampled at both ends of the measured span.
		sleepUntil(ctx, win.from)
		before, sampleErr = takeSample(c.brokerPID)
		sleepUntil(ctx, win.to)
		if sampleErr == nil {
			after, sampleErr = takeSample(c.brokerPID)
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	stopProgress()
	if win == nil {
		after, sampleErr = takeSample(c.brokerPID)
	}
	if sampleErr != nil {
		return nil, sampleErr
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("produce: %w after %d records", err, st.records.Load())
	}
	records, bytes := st.records.Load(), st.bytes.Load()
	if win != nil {
		elapsed = win.to.Sub(win.from)
		records, bytes = win.st.records.Load(), win.st.bytes.Load()
	}
	cfg := c.configMap()
	c.producerFlags.addConfig(cfg)
	cfg["producers"] = c.producers
	if c.rate > 0 {
		cfg["rate"] = c.rate
	}
	if win != nil {
		cfg["warmup"] = c.warmup.String()
	}
	r := &result{
		Mode: "produce", Brokers: brokersString(c.brokers), Topic: c.topic, Partitions: parts, Config: cfg,
		Records: records, Bytes: bytes, Errors: st.errors.Load(), FirstError: st.firstError(),
		Latency:   lat.Summary(),
		Throttled: &throttleStats{Responses: thr.n.Load(), Seconds: round(time.Duration(thr.ns.Load()).Seconds(), 3)},
	}
	r.finish(elapsed, before, after)
	return r, nil
}

// sleepUntil waits until t or until ctx is done.
func sleepUntil(ctx context.Context, t time.Time) {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-timer.C:
	}
}

// pace waits until record j of a producer sending perSec records a second from start
// is due (--rate), or ctx is done.
func pace(ctx context.Context, start time.Time, j int64, perSec float64) {
	d := time.Until(start.Add(time.Duration(float64(j) / perSec * float64(time.Second))))
	if d < minSleep {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
