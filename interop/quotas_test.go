package interop

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/time/rate"
)

// Client quotas (modules/quotas) held by broker processes against real clients: a
// librdkafka producer, a kafkajs producer, kgo producers and a kgo consumer, each with a
// client-id quota, beside a client without one, on one broker; and a kgo producer whose
// client-id quota each broker of a three-broker cluster enforces on its own.
//
// Rates are measured on the broker: the bytes it appended to each partition (the
// partition sizes DescribeLogDirs reports: a segment holds the batches exactly as
// produced, so with uncompressed producers they are the bytes the quota charges), over
// quotaMeasure, after quotaWarmup in which the first burst a fresh rate window allows
// is spent and the throttling settles. The consumer's rate is the batch bytes it
// received (kgo's fetch hook), the bytes the broker charged it.

const (
	// The rate window is short, two samples of 1 s: a client's
	// first burst is a second's worth, so the steady state comes after a few seconds
	// (Kafka's default, 11 samples, allows ten seconds' worth first).
	quotaWindowNum            = "2"
	quotaWindowSizeSecs       = "1"
	quotaWarmup               = 3 * time.Second
	quotaMeasure              = 10 * time.Second
	quotaTolerance            = 0.10
	quotaValueBytes           = 1024
	quotaBatchBytes     int32 = 64 << 10 // producers' batch bound: the logs grow in small steps
)

var quotaBrokerConfig = fmt.Sprintf("configs: {quota.window.num: %q, quota.window.size.seconds: %q}\n",
	quotaWindowNum, quotaWindowSizeSecs)

// requester sends a request to one broker.
type requester func(ctx context.Context, req kmsg.Request) (kmsg.Response, error)

// brokerRequester returns a requester to the broker at addr alone (a kgo client seeded
// with it, closed in t.Cleanup).
func brokerRequester(t *testing.T, addr string) requester {
	t.Helper()
	return newClient(t, addr).SeedBrokers()[0].Request
}

// alterClientQuota sets quota key to value on the entity client-id=clientID through
// send; the answer must carry no error.
func alterClientQuota(ctx context.Context, send requester, clientID, key string, value float64) error {
	req := kmsg.NewPtrAlterClientQuotasRequest()
	e := kmsg.NewAlterClientQuotasRequestEntry()
	ec := kmsg.NewAlterClientQuotasRequestEntryEntity()
	ec.Type, ec.Name = "client-id", kmsg.StringPtr(clientID)
	e.Entity = append(e.Entity, ec)
	op := kmsg.NewAlterClientQuotasRequestEntryOp()
	op.Key, op.Value = key, value
	e.Ops = append(e.Ops, op)
	req.Entries = append(req.Entries, e)
	resp, err := send(ctx, req)
	if err != nil {
		return err
	}
	ar := resp.(*kmsg.AlterClientQuotasResponse)
	if len(ar.Entries) != 1 {
		return fmt.Errorf("AlterClientQuotas answered %d entries", len(ar.Entries))
	}
	if err := kerr.ErrorForCode(ar.Entries[0].ErrorCode); err != nil {
		msg := ""
		if m := ar.Entries[0].ErrorMessage; m != nil {
			msg = ": " + *m
		}
		return fmt.Errorf("AlterClientQuotas %s=%g on client-id %q: %w%s", key, value, clientID, err, msg)
	}
	return nil
}

// mustAlterClientQuota is alterClientQuota failing the test on an error.
func mustAlterClientQuota(t *testing.T, send requester, clientID, key string, value float64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := alterClientQuota(ctx, send, clientID, key, value); err != nil {
		t.Fatal(err)
	}
}

// describeClientQuotas returns the quotas one broker describes for the entity
// client-id=clientID (strict: that entity alone), key → value.
func describeClientQuotas(ctx context.Context, send requester, clientID string) (map[string]float64, error) {
	req := kmsg.NewPtrDescribeClientQuotasRequest()
	c := kmsg.NewDescribeClientQuotasRequestComponent()
	c.EntityType, c.MatchType, c.Match = "client-id", 0, kmsg.StringPtr(clientID) // 0: exact match
	req.Components = append(req.Components, c)
	req.Strict = true
	resp, err := send(ctx, req)
	if err != nil {
		return nil, err
	}
	dr := resp.(*kmsg.DescribeClientQuotasResponse)
	if err := kerr.ErrorForCode(dr.ErrorCode); err != nil {
		return nil, fmt.Errorf("DescribeClientQuotas: %w", err)
	}
	out := map[string]float64{}
	for _, e := range dr.Entries {
		if len(e.Entity) != 1 || e.Entity[0].Type != "client-id" || e.Entity[0].Name == nil || *e.Entity[0].Name != clientID {
			return nil, fmt.Errorf("DescribeClientQuotas for client-id %q answered entity %+v", clientID, e.Entity)
		}
		for _, v := range e.Values {
			out[v.Key] = v.Value
		}
	}
	return out, nil
}

// logSizes returns the size of every partition one broker holds (DescribeLogDirs).
func logSizes(ctx context.Context, send requester) (map[string]map[int32]int64, error) {
	req := kmsg.NewPtrDescribeLogDirsRequest()
	req.Topics = nil // every partition
	resp, err := send(ctx, req)
	if err != nil {
		return nil, err
	}
	dr := resp.(*kmsg.DescribeLogDirsResponse)
	if err := kerr.ErrorForCode(dr.ErrorCode); err != nil {
		return nil, fmt.Errorf("DescribeLogDirs: %w", err)
	}
	out := map[string]map[int32]int64{}
	for _, d := range dr.Dirs {
		if err := kerr.ErrorForCode(d.ErrorCode); err != nil {
			return nil, fmt.Errorf("DescribeLogDirs %s: %w", d.Dir, err)
		}
		for _, tp := range d.Topics {
			if out[tp.Topic] == nil {
				out[tp.Topic] = map[int32]int64{}
			}
			for _, p := range tp.Partitions {
				out[tp.Topic][p.Partition] += p.Size
			}
		}
	}
	return out, nil
}

// sizeMark is what the brokers held at one time: sizes[i] is broker i's logSizes,
// counters the values of client-side byte counters.
type sizeMark struct {
	at       time.Time
	sizes    []map[string]map[int32]int64
	counters []int64
}

// markSizes asks each broker for its partition sizes and reads counters; the time is
// the middle of the calls.
func markSizes(t *testing.T, brokers []requester, counters ...*atomic.Int64) sizeMark {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	var m sizeMark
	for _, c := range counters {
		m.counters = append(m.counters, c.Load())
	}
	for i, send := range brokers {
		s, err := logSizes(ctx, send)
		if err != nil {
			t.Fatalf("broker %d: %v", i, err)
		}
		m.sizes = append(m.sizes, s)
	}
	m.at = start.Add(time.Since(start) / 2)
	return m
}

// growth is the rate (bytes/s) at which partition p of topic on broker i grew from a to b.
func growth(a, b sizeMark, i int, topic string, p int32) float64 {
	return float64(b.sizes[i][topic][p]-a.sizes[i][topic][p]) / b.at.Sub(a.at).Seconds()
}

// counterRate is the rate (per second) at which counter j grew from a to b.
func counterRate(a, b sizeMark, j int) float64 {
	return float64(b.counters[j]-a.counters[j]) / b.at.Sub(a.at).Seconds()
}

// checkWithin fails the test unless got is within quotaTolerance of want; it logs the
// figures either way.
func checkWithin(t *testing.T, what string, got, want float64) {
	t.Helper()
	dev := (got - want) / want * 100
	if got < want*(1-quotaTolerance) || got > want*(1+quotaTolerance) {
		t.Errorf("%s: %.0f B/s (%.1f KiB/s), want %.0f ± %.0f%% (off by %+.1f%%)", what, got, got/1024, want,
			quotaTolerance*100, dev)
		return
	}
	t.Logf("%s: %.0f B/s (%.1f KiB/s), quota %.0f (%+.1f%%)", what, got, got/1024, want, dev)
}

// throttleHook counts the throttles brokers told a kgo client.
type throttleHook struct{ n atomic.Int64 }

func (h *throttleHook) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	if d > 0 {
		h.n.Add(1)
	}
}

// fetchBytesHook counts the batch bytes a kgo consumer received (as sent: the bytes a
// consumer_byte_rate quota charges).
type fetchBytesHook struct{ n atomic.Int64 }

func (h *fetchBytesHook) OnFetchBatchRead(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	h.n.Add(int64(m.CompressedBytes))
}

// flatOut is a producer running flat out (start); errs counts the records that failed
// while it ran, first is the first of their errors.
type flatOut struct {
	errs  atomic.Int64
	mu    sync.Mutex
	first error
	wg    sync.WaitGroup
	// pace, when set, caps the rate (bytes/s) on the client: the unquota'd producer
	// needs only to run far past the quotas, not to take the CI machine's disk and CPU
	// from the tests beside it.
	pace *rate.Limiter
}

// start produces quotaValueBytes records to each of parts of topic with cl as fast as
// it lets it, at most inflight undelivered per partition (so a partition whose broker
// throttles harder does not fill the client's buffer and hold up the others), until
// ctx ends; wg waits for its goroutines. Records failed by the end of ctx are not
// errors.
func (f *flatOut) start(ctx context.Context, cl *kgo.Client, topic string, parts []int32, inflight int) {
	value := make([]byte, quotaValueBytes)
	for _, p := range parts {
		sem := make(chan struct{}, inflight)
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			for {
				if f.pace != nil && f.pace.WaitN(ctx, len(value)) != nil {
					return
				}
				select {
				case sem <- struct{}{}:
				case <-ctx.Done():
					return
				}
				cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: p, Value: value}, func(_ *kgo.Record, err error) {
					<-sem
					if err != nil && ctx.Err() == nil && !errors.Is(err, context.Canceled) {
						f.errs.Add(1)
						f.mu.Lock()
						if f.first == nil {
							f.first = err
						}
						f.mu.Unlock()
					}
				})
			}
		}()
	}
}

// check fails the test if a record failed while ctx was live.
func (f *flatOut) check(t *testing.T, who string) {
	t.Helper()
	if n := f.errs.Load(); n > 0 {
		f.mu.Lock()
		defer f.mu.Unlock()
		t.Errorf("%s: %d records failed, first: %v", who, n, f.first)
	}
}

// quotaProducer returns a kgo producer for the quota tests: uncompressed (the quota
// counts the bytes appended), batches of at most quotaBatchBytes, records placed by
// their Partition field.
func quotaProducer(t *testing.T, seeds []string, clientID string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ClientID(clientID),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(quotaBatchBytes),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MaxBufferedRecords(10_000)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// producerReport is the report of quotas_librdkafka_test.py and of
// quotas_kafkajs_test.js (Sends is kafkajs's alone; its Undelivered is always 0, it waits
// for every send it started).
type producerReport struct {
	Sends         int64 `json:"sends,omitempty"`
	Acked         int64 `json:"acked"`
	AckedBytes    int64 `json:"acked_bytes"`
	Failed        int64 `json:"failed"`
	Throttles     int64 `json:"throttles"`
	ThrottleMsMax int64 `json:"throttle_ms_max"`
	Undelivered   int64 `json:"undelivered"`
}

// TestQuotaClients: on one broker process, a librdkafka producer (client.id limited,
// producer_byte_rate 1 MiB/s), a kafkajs producer (clientId limited-js, 512 KiB/s), a
// kgo producer (limited-kgo, 512 KiB/s) and a kgo consumer (limited-reader,
// consumer_byte_rate 512 KiB/s, reading a backlog) run at once for 10 s, each as fast
// as it can, beside a kgo producer without a quota (free). Each quota'd client stays
// within 10% of its quota and was told it was throttled; the free producer is never
// throttled and makes more than three times the largest quota.
//
// kafkajs (2.2.4) honours throttle_time_ms itself: Produce v6 and later responses
// (it speaks up to v7) carry it as KIP-219's client-side throttle, and the
// connection's request queue holds every further request to that broker until it has
// passed (logging "Client side throttling in effect for Nms" at debug level, which
// quotas_kafkajs_test.js counts); the broker's muting of the connection would hold it
// all the same.
func TestQuotaClients(t *testing.T) {
	t.Parallel()
	needLibrdkafka(t)
	node := needKafkajs(t)
	const (
		lrkQuota      = 1 << 20
		kjsQuota      = 512 << 10
		kgoQuota      = 512 << 10
		consumerQuota = 512 << 10
		backlog       = 12 << 20 // more than the consumer may read in the test
	)
	b := startBrokerConfig(t, quotaBrokerConfig)
	for _, topic := range []string{"quota-lrk", "quota-kjs", "quota-kgo", "quota-free", "quota-backlog"} {
		createTopic(t, b.addr, topic, 1)
	}
	send := brokerRequester(t, b.addr)
	mustAlterClientQuota(t, send, "limited", "producer_byte_rate", lrkQuota)
	mustAlterClientQuota(t, send, "limited-js", "producer_byte_rate", kjsQuota)
	mustAlterClientQuota(t, send, "limited-kgo", "producer_byte_rate", kgoQuota)
	mustAlterClientQuota(t, send, "limited-reader", "consumer_byte_rate", consumerQuota)

	// The consumer's backlog, written before anything is measured.
	fill := quotaProducer(t, []string{b.addr}, "filler")
	recs := make([]*kgo.Record, backlog/quotaValueBytes)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "quota-backlog", Value: make([]byte, quotaValueBytes)}
	}
	fillStart := time.Now()
	{
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		err := fill.ProduceSync(ctx, recs...).FirstErr()
		cancel()
		if err != nil {
			t.Fatalf("fill the backlog: %v", err)
		}
	}
	fill.Close()
	t.Logf("backlog of %d MiB written in %s", backlog>>20, time.Since(fillStart).Round(time.Millisecond))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var kgoThrottles, freeThrottles, readerThrottles throttleHook
	var limitedOut, freeOut flatOut
	limitedOut.start(ctx, quotaProducer(t, []string{b.addr}, "limited-kgo", kgo.WithHooks(&kgoThrottles)),
		"quota-kgo", []int32{0}, 1000)
	freeOut.pace = rate.NewLimiter(8<<20, 64<<10) // 8 MiB/s: eight times the largest quota
	freeOut.start(ctx, quotaProducer(t, []string{b.addr}, "free", kgo.WithHooks(&freeThrottles),
		kgo.ProducerBatchMaxBytes(1<<20)), "quota-free", []int32{0}, 5000)

	var read fetchBytesHook
	reader := newClient(t, b.addr, kgo.ClientID("limited-reader"), kgo.WithHooks(&readerThrottles, &read),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"quota-backlog": {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxBytes(quotaBatchBytes), kgo.FetchMaxPartitionBytes(quotaBatchBytes))
	var readErr atomic.Value
	var readWG sync.WaitGroup
	readWG.Add(1)
	go func() {
		defer readWG.Done()
		for ctx.Err() == nil {
			fs := reader.PollFetches(ctx)
			for _, fe := range fs.Errors() {
				if ctx.Err() == nil && !errors.Is(fe.Err, context.Canceled) {
					readErr.CompareAndSwap(nil, fmt.Errorf("partition %d: %w", fe.Partition, fe.Err))
				}
			}
		}
	}()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			limitedOut.wg.Wait()
			freeOut.wg.Wait()
			readWG.Wait()
		}
	}
	defer stop()

	lrk := startPython(t, "quotas_librdkafka_test.py", b.addr, "quota-lrk", "limited", fmt.Sprint(quotaValueBytes))
	kjs := startNode(t, node, "quotas_kafkajs_test.js", b.addr, "quota-kjs", "limited-js", fmt.Sprint(quotaValueBytes))
	lrk.waitEvent("delivered", 30*time.Second)
	kjs.waitEvent("delivered", 30*time.Second)

	brokers := []requester{send}
	var last sizeMark
	if !pollUntil(20*time.Second, func() bool {
		last = markSizes(t, brokers, &read.n)
		s := last.sizes[0]
		return s["quota-lrk"][0] > 0 && s["quota-kjs"][0] > 0 && s["quota-kgo"][0] > 0 && s["quota-free"][0] > 0 &&
			last.counters[0] > 0
	}) {
		t.Fatalf("not every client made progress within 20s: sizes %v, consumer read %d bytes", last.sizes[0], last.counters[0])
	}
	time.Sleep(quotaWarmup) // the warm-up: the first burst is spent before measuring
	from := markSizes(t, brokers, &read.n)
	time.Sleep(quotaMeasure)
	to := markSizes(t, brokers, &read.n)

	var rep, kjsRep producerReport
	lrk.stopReport(&rep)
	kjs.stopReport(&kjsRep)
	stop()
	t.Logf("measured over %s: librdkafka report %+v; kafkajs report %+v", to.at.Sub(from.at).Round(time.Millisecond),
		rep, kjsRep)

	checkWithin(t, "librdkafka producer, client.id limited", growth(from, to, 0, "quota-lrk", 0), lrkQuota)
	checkWithin(t, "kafkajs producer, clientId limited-js", growth(from, to, 0, "quota-kjs", 0), kjsQuota)
	checkWithin(t, "kgo producer, client id limited-kgo", growth(from, to, 0, "quota-kgo", 0), kgoQuota)
	checkWithin(t, "kgo consumer, client id limited-reader", counterRate(from, to, 0), consumerQuota)
	free := growth(from, to, 0, "quota-free", 0)
	t.Logf("kgo producer without a quota: %.0f B/s (%.1f MiB/s, %.1fx the librdkafka quota)", free, free/(1<<20), free/lrkQuota)
	if free <= 3*lrkQuota {
		t.Errorf("the producer without a quota made %.0f B/s; want it to run free (> %d, 3x the largest quota)", free, 3*lrkQuota)
	}
	if rep.Throttles == 0 {
		t.Error("librdkafka never reported a throttle (throttle_cb)")
	}
	if kjsRep.Throttles == 0 {
		t.Error("kafkajs never logged a client-side throttle")
	}
	if kgoThrottles.n.Load() == 0 {
		t.Error("the quota'd kgo producer was never told it was throttled")
	}
	if readerThrottles.n.Load() == 0 {
		t.Error("the quota'd kgo consumer was never told it was throttled")
	}
	if n := freeThrottles.n.Load(); n != 0 {
		t.Errorf("the producer without a quota was throttled %d times", n)
	}
	limitedOut.check(t, "kgo producer limited-kgo")
	freeOut.check(t, "kgo producer free")
	if err, _ := readErr.Load().(error); err != nil {
		t.Errorf("kgo consumer limited-reader: %v", err)
	}
}

// TestQuotaCluster: three broker processes; a producer_byte_rate quota Q on client-id
// limited is set once, through a broker that is not the controller, and every broker
// describes it. A kgo producer with that client id writes as fast as it can to a
// 3-partition topic whose leaders are one per broker: each broker holds it to Q on its
// own (quotas are per broker, as in Kafka), so each partition grows at Q (within 10%)
// and the client makes 3Q in all (within 10%).
func TestQuotaCluster(t *testing.T) {
	t.Parallel()
	const (
		q     = 512 << 10
		topic = "quota-spread"
	)
	c := newClusterWith(t, 3, 3, nil, clusterOpt{configs: map[string]string{
		"quota.window.num": quotaWindowNum, "quota.window.size.seconds": quotaWindowSizeSecs}})
	c.startAll()
	c.waitAllSeeAll(30*time.Second, allThree)
	ctrl := c.agreedController(20 * time.Second)

	c.node(1).mustCreateTopic(30*time.Second, topic, 3, 1, nil)
	leaders := map[int32]int32{}
	for _, n := range c.nodes {
		v := n.waitView(20*time.Second, "3 partitions, each with a leader", func(v *view) bool {
			return allLed(v, topic, 3)
		}, topic)
		if counts := v.leaderCounts(topic); counts[1] != 1 || counts[2] != 1 || counts[3] != 1 {
			t.Fatalf("broker %d: leaders %v, want one partition led by each broker", n.id, v.leaders[topic])
		}
		leaders = v.leaders[topic]
	}
	t.Logf("leaders of %s: %v (controller %d)", topic, leaders, ctrl)

	via := c.node(ctrl%3 + 1) // not the controller: the write is forwarded
	mustAlterClientQuota(t, via.request, "limited", "producer_byte_rate", q)
	for _, n := range c.nodes {
		last, lastErr, ok := pollLatest(20*time.Second, func(ctx context.Context) (map[string]float64, error) {
			return describeClientQuotas(ctx, n.request, "limited")
		}, func(qs map[string]float64) bool { return len(qs) == 1 && qs["producer_byte_rate"] == q })
		if !ok {
			t.Fatalf("broker %d: DescribeClientQuotas client-id limited: %v (error %v), want producer_byte_rate=%d (set through broker %d)",
				n.id, last, lastErr, q, via.id)
		}
	}

	var seeds []string
	brokers := make([]requester, len(c.nodes))
	for i, n := range c.nodes {
		seeds = append(seeds, n.addr)
		brokers[i] = n.request
	}
	var throttles throttleHook
	cl := quotaProducer(t, seeds, "limited", kgo.WithHooks(&throttles))
	ctx, cancel := context.WithCancel(context.Background())
	var out flatOut
	out.start(ctx, cl, topic, partitionsOf(3), 1000)
	defer out.wg.Wait() // after cancel (deferred later, run first)
	defer cancel()

	// sizeOn is partition p's size in m, as its leader reports it.
	sizeOn := func(m sizeMark, p int32) int64 { return m.sizes[leaders[p]-1][topic][p] }
	var last sizeMark
	if !pollUntil(20*time.Second, func() bool {
		last = markSizes(t, brokers)
		return sizeOn(last, 0) > 0 && sizeOn(last, 1) > 0 && sizeOn(last, 2) > 0
	}) {
		t.Fatalf("the producer did not reach every partition within 20s: sizes %v", last.sizes)
	}
	time.Sleep(quotaWarmup)
	from := markSizes(t, brokers)
	time.Sleep(quotaMeasure)
	to := markSizes(t, brokers)
	cancel()
	out.wg.Wait()

	var total float64
	for p := range int32(3) {
		l := leaders[p]
		r := growth(from, to, int(l-1), topic, p)
		total += r
		checkWithin(t, fmt.Sprintf("broker %d (partition %d, %d bytes appended in %s)", l, p,
			sizeOn(to, p)-sizeOn(from, p), to.at.Sub(from.at).Round(time.Millisecond)), r, q)
	}
	checkWithin(t, "the client in all, three brokers", total, 3*q)
	if throttles.n.Load() == 0 {
		t.Error("the producer was never told it was throttled")
	}
	out.check(t, "kgo producer limited")
}
