package quotas_test

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluicehq/sluice/internal/kclient"
	"github.com/sluicehq/sluice/internal/metricstest"
	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/internal/testbroker"
)

// fastWindow makes the rate window short (2 samples of 1 s), so a client's burst
// allowance before the first throttle is one second's worth and a test measures the
// steady state after a couple of seconds (Kafka's default window, 11 samples, allows
// ten seconds' worth first).
const fastWindow = "configs: {quota.window.num: \"2\", quota.window.size.seconds: \"1\"}\n"

// throttleCount is a kgo hook counting the throttles brokers told the client.
type throttleCount struct{ n atomic.Int64 }

func (h *throttleCount) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	if d > 0 {
		h.n.Add(1)
	}
}

// rateMeter counts bytes and measures their rate between two marks.
type rateMeter struct {
	bytes atomic.Int64
	mu    sync.Mutex
	from  time.Time
	at    int64
}

func (r *rateMeter) mark() {
	r.mu.Lock()
	r.from, r.at = time.Now(), r.bytes.Load()
	r.mu.Unlock()
}

func (r *rateMeter) rate() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return float64(r.bytes.Load()-r.at) / time.Since(r.from).Seconds()
}

// produceFlatOut produces 1 KiB records to topic as fast as cl lets it until ctx ends,
// counting acknowledged bytes in m.
func produceFlatOut(ctx context.Context, cl *kgo.Client, topic string, m *rateMeter) {
	value := make([]byte, 1024)
	for ctx.Err() == nil {
		cl.Produce(ctx, &kgo.Record{Topic: topic, Value: value}, func(r *kgo.Record, err error) {
			if err == nil {
				m.bytes.Add(int64(len(r.Value)))
			}
		})
	}
}

func setQuota(t *testing.T, adm *kadm.Client, key string, v float64, kv ...string) {
	t.Helper()
	if errs := alter(t, adm, false, kadm.AlterClientQuotaEntry{Entity: entity(kv...), Ops: []kadm.AlterClientQuotaOp{set(key, v)}}); errs[0] != nil {
		t.Fatalf("set %s on %v: %v", key, kv, errs[0])
	}
}

func within(t *testing.T, what string, got, want, tolerance float64) {
	t.Helper()
	if got < want*(1-tolerance) || got > want*(1+tolerance) {
		t.Errorf("%s: %.0f B/s, want %.0f ± %.0f%%", what, got, want, tolerance*100)
	} else {
		t.Logf("%s: %.0f B/s (quota %.0f)", what, got, want)
	}
}

// TestProduceQuota: a kgo producer with a client-id quota is held within 10% of it
// over 10 s and is told it was throttled, while a producer beside it without a quota
// runs free.
func TestProduceQuota(t *testing.T) {
	t.Parallel()
	const quota = 256 << 10
	b := testbroker.Start(t, testbroker.WithConfig(fastWindow))
	adm := b.Admin(t)
	if _, err := adm.CreateTopic(context.Background(), 3, 1, nil, "produce-quota"); err != nil {
		t.Fatal(err)
	}
	setQuota(t, adm, "producer_byte_rate", quota, "client-id", "limited")
	var hook throttleCount
	// Uncompressed, so the bytes counted here are the bytes the broker charges.
	limited := b.Client(t, kgo.ClientID("limited"), kgo.WithHooks(&hook), kgo.MaxBufferedRecords(1000),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(64<<10))
	free := b.Client(t, kgo.ClientID("free"), kgo.MaxBufferedRecords(1000), kgo.ProducerBatchCompression(kgo.NoCompression()))

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var lm, fm rateMeter
	for _, p := range []struct {
		cl *kgo.Client
		m  *rateMeter
	}{{limited, &lm}, {free, &fm}} {
		wg.Add(1)
		go func() { defer wg.Done(); produceFlatOut(ctx, p.cl, "produce-quota", p.m) }()
	}
	time.Sleep(3 * time.Second) // measure the steady state, not the first burst
	lm.mark()
	fm.mark()
	time.Sleep(10 * time.Second)
	lr, fr := lm.rate(), fm.rate()
	// The busiest quota'd clients' rates and throttle shares are in /metrics.
	ms := metricstest.Scrape(t, b.AdminAddr)
	cancel()
	wg.Wait()
	within(t, "quota'd producer", lr, quota, 0.10)
	if r, ok := ms.Value("sluice_quota_client_rate", "quota", "produce", "client_id", "limited"); !ok {
		t.Error("no sluice_quota_client_rate series for the quota'd producer")
	} else {
		// A snapshot of a two-sample window: it swings around the quota from one
		// produce to the next (one 64 KiB batch is a quarter of a second's quota), so
		// only its order of magnitude is checked: within a factor of two.
		if r < quota/2 || r > 2*quota {
			t.Errorf("the producer's rate in /metrics: %.0f B/s, want within a factor of 2 of %d", r, quota)
		}
	}
	if r, ok := ms.Value("sluice_quota_client_throttle_ratio", "quota", "produce", "client_id", "limited"); !ok || r <= 0 {
		t.Errorf("sluice_quota_client_throttle_ratio of the throttled producer: %v (present %v)", r, ok)
	}
	if _, ok := ms.Value("sluice_quota_client_rate", "quota", "produce", "client_id", "free"); ok {
		t.Error("a client without a quota has a sluice_quota_client_rate series")
	}
	if fr < 4*quota {
		t.Errorf("the producer without a quota made %.0f B/s; want it to run free (> %d)", fr, 4*quota)
	}
	if hook.n.Load() == 0 {
		t.Error("the quota'd producer was never told it was throttled")
	}
}

// TestProduceQuotaBurst: with Kafka's default window (11 samples of 1 s), a fresh
// producer flat out gets at most about sluice.quota.burst.ms's worth ahead of its
// quota (here 1 s: 4 s of quota in its first 3 s, plus what is in flight), where
// Kafka's sampled throttle (sluice.quota.burst.ms 0) lets it send ten seconds' worth at
// once.
func TestProduceQuotaBurst(t *testing.T) {
	t.Parallel()
	const quota = 256 << 10
	for _, tc := range []struct {
		name  string
		burst string
		check func(t *testing.T, got float64)
	}{
		{"burst 1s", "1000", func(t *testing.T, got float64) {
			// 4 s of quota and a request or two in flight (up to 3 batches of 64 KiB).
			if got > 6*quota {
				t.Errorf("acknowledged %.0f B in the first 3 s, want at most 6 s of quota (%d B)", got, 6*quota)
			}
		}},
		{"kafka", "0", func(t *testing.T, got float64) {
			if got < 8*quota {
				t.Errorf("acknowledged %.0f B in the first 3 s, want the sampled window's burst of about 10 s of quota (%d B)", got, 10*quota)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := testbroker.Start(t, testbroker.WithConfig("configs: {sluice.quota.burst.ms: \""+tc.burst+"\"}\n"))
			adm := b.Admin(t)
			if _, err := adm.CreateTopic(context.Background(), 3, 1, nil, "burst"); err != nil {
				t.Fatal(err)
			}
			setQuota(t, adm, "producer_byte_rate", quota, "client-id", "limited")
			cl := b.Client(t, kgo.ClientID("limited"), kgo.MaxBufferedRecords(1000),
				kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(64<<10))
			if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "burst"}).FirstErr(); err != nil {
				t.Fatal(err) // metadata and connections are ready: the clock starts below
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			var m rateMeter
			produceFlatOut(ctx, cl, "burst", &m)
			cancel()
			got := float64(m.bytes.Load())
			t.Logf("acknowledged %.0f B (%.1f s of quota) in the first 3 s", got, got/quota)
			tc.check(t, got)
		})
	}
}

// TestFetchQuota: a kgo consumer with a consumer_byte_rate quota on its user (the
// default user: connections here are ANONYMOUS) and client id is held within 10% of it
// over 10 s while reading a backlog far larger than it may read.
func TestFetchQuota(t *testing.T) {
	t.Parallel()
	const quota = 512 << 10
	b := testbroker.Start(t, testbroker.WithConfig(fastWindow))
	adm := b.Admin(t)
	if _, err := adm.CreateTopic(context.Background(), 3, 1, nil, "fetch-quota"); err != nil {
		t.Fatal(err)
	}
	// 16 MiB of backlog: three times what the quota allows in the test.
	testbroker.ProduceFlush(t, context.Background(), b.Client(t, kgo.DefaultProduceTopic("fetch-quota"),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(64<<10)), 16<<10, make([]byte, 1024), nil)
	setQuota(t, adm, "consumer_byte_rate", quota, "user", "<default>", "client-id", "reader")

	var hook throttleCount
	cl := b.Client(t, kgo.ClientID("reader"), kgo.ConsumeTopics("fetch-quota"), kgo.WithHooks(&hook),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(256<<10))
	var m rateMeter
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) { m.bytes.Add(int64(len(r.Value))) })
		}
	}()
	time.Sleep(3 * time.Second)
	m.mark()
	time.Sleep(10 * time.Second)
	r := m.rate()
	cancel()
	<-done
	within(t, "quota'd consumer", r, quota, 0.10)
	if hook.n.Load() == 0 {
		t.Error("the consumer was never told it was throttled")
	}
}

// TestMutationQuota: CreateTopics with a controller_mutation_rate quota: the first
// request is admitted whole (KIP-599 admits a request while the client's bucket is not
// negative), the next is refused with THROTTLING_QUOTA_EXCEEDED and a throttle time, and
// after waiting it out a new topic is admitted.
func TestMutationQuota(t *testing.T) {
	t.Parallel()
	b := testbroker.Start(t)
	setQuota(t, b.Admin(t), "controller_mutation_rate", 10, "client-id", "mutator")
	adm := kadm.NewClient(b.Client(t, kgo.ClientID("mutator")))
	ctx := context.Background()
	create := func(name string, parts int32) error {
		resp, err := adm.CreateTopic(ctx, parts, 1, nil, name)
		if err != nil {
			return err
		}
		return resp.Err
	}
	// 10 partitions/s with a burst of the whole window (11 s, Kafka's default): 150
	// partitions overdraw the bucket by 40, four seconds' worth.
	if err := create("mutate-1", 150); err != nil {
		t.Fatalf("first CreateTopics: %v", err)
	}
	err := create("mutate-2", 1)
	if !errors.Is(err, kerr.ThrottlingQuotaExceeded) {
		t.Fatalf("second CreateTopics: %v, want THROTTLING_QUOTA_EXCEEDED", err)
	}
	testbroker.WaitFor(t, 30*time.Second, "the mutation quota to admit a topic again", func() string {
		if err := create("mutate-2", 1); err != nil {
			return err.Error()
		}
		return ""
	})
	// Another client id has no quota.
	other := kadm.NewClient(b.Client(t, kgo.ClientID("other")))
	if resp, err := other.CreateTopic(ctx, 40, 1, nil, "mutate-other"); err != nil || resp.Err != nil {
		t.Fatalf("a client without a quota: %v %v", err, resp.Err)
	}
}

// TestThrottleIgnoredIsMuted: a client that ignores throttle_time_ms (it sends the
// next Produce as soon as the previous answer arrives, on one connection) is held to
// its quota by the broker muting the connection (KIP-219): its rate over 10 s is
// within 10% of the quota, and the answers say how long it was throttled.
func TestThrottleIgnoredIsMuted(t *testing.T) {
	t.Parallel()
	const quota = 256 << 10
	b := testbroker.Start(t, testbroker.WithConfig(fastWindow))
	adm := b.Admin(t)
	ctx := context.Background()
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "ignorer"); err != nil {
		t.Fatal(err)
	}
	setQuota(t, adm, "producer_byte_rate", quota, "client-id", "ignorer")
	conn, err := kclient.Dial(ctx, b.Addr, kclient.Options{ClientID: "ignorer"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	value := make([]byte, 16<<10)
	batch := recordbatch.Build(recordbatch.Options{}, recordbatch.Record{Value: value})
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, 1, 10_000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "ignorer"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)

	var sent, throttled int64
	start := time.Now()
	var from time.Time
	var fromBytes int64
	for time.Since(start) < 13*time.Second {
		if from.IsZero() && time.Since(start) >= 3*time.Second {
			from, fromBytes = time.Now(), sent
		}
		resp, err := conn.Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		pr := resp.(*kmsg.ProduceResponse)
		if code := pr.Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("produce: %v", kerr.ErrorForCode(code))
		}
		if pr.ThrottleMillis > 0 {
			throttled++
		}
		sent += int64(len(batch))
	}
	within(t, "client ignoring its throttle", float64(sent-fromBytes)/time.Since(from).Seconds(), quota, 0.10)
	if throttled == 0 {
		t.Error("no answer carried a throttle time")
	}
}

// produceSome produces n records of size bytes with a client of clientID and returns
// how many times the broker throttled it.
func produceSome(t *testing.T, b *testbroker.Broker, topic, clientID string, n, size int) int64 {
	t.Helper()
	var hook throttleCount
	cl := b.Client(t, kgo.ClientID(clientID), kgo.WithHooks(&hook), kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0))
	for range n {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: make([]byte, size)}).FirstErr(); err != nil {
			t.Fatalf("produce as %s: %v", clientID, err)
		}
	}
	return hook.n.Load()
}

// TestQuotaPrecedence: the most specific entity that sets a quota applies, per quota
// type, as in Kafka: a tiny quota on (default user, client id "tight") throttles that
// client although a generous client-id=<default> quota exists; another client id gets
// the generous default; a quota of another type on the specific entity does not hide
// the default's producer quota from it.
func TestQuotaPrecedence(t *testing.T) {
	t.Parallel()
	b := testbroker.Start(t, testbroker.WithConfig(fastWindow))
	adm := b.Admin(t)
	if _, err := adm.CreateTopic(context.Background(), 1, 1, nil, "precedence"); err != nil {
		t.Fatal(err)
	}
	setQuota(t, adm, "producer_byte_rate", 100<<20, "client-id", "<default>")
	setQuota(t, adm, "producer_byte_rate", 8<<10, "user", "<default>", "client-id", "tight")
	setQuota(t, adm, "consumer_byte_rate", 1024, "client-id", "loose")
	// 40 KiB in a burst: far over 8 KiB/s, far under 100 MiB/s.
	if n := produceSome(t, b, "precedence", "tight", 10, 4096); n == 0 {
		t.Error("client tight was not throttled by its (default user, client id) quota")
	}
	if n := produceSome(t, b, "precedence", "loose", 10, 4096); n != 0 {
		t.Errorf("client loose was throttled %d times: its consumer quota must not change its producer quota", n)
	}
	if n := produceSome(t, b, "precedence", "other", 10, 4096); n != 0 {
		t.Errorf("client other was throttled %d times under the generous default", n)
	}
}

// TestRequestQuota: a request_percentage quota throttles a client that keeps the broker
// busy with requests, and not a client without one. The quota is 0.001% of a thread:
// ten microseconds of work per second, which a burst of requests exceeds many times
// over (a Metadata request of an empty cluster takes a few microseconds).
func TestRequestQuota(t *testing.T) {
	t.Parallel()
	b := testbroker.Start(t, testbroker.WithConfig(fastWindow))
	setQuota(t, b.Admin(t), "request_percentage", 0.001, "client-id", "busy")
	metadataBurst := func(clientID string) (throttled int, took time.Duration) {
		conn, err := kclient.Dial(context.Background(), b.Addr, kclient.Options{ClientID: clientID})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		start := time.Now()
		for range 50 {
			req := kmsg.NewPtrMetadataRequest()
			req.Version = 12 // v0 has no throttle_time_ms: the broker would delay the answer instead
			resp, err := conn.Request(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.(*kmsg.MetadataResponse).ThrottleMillis > 0 {
				// One throttled answer is the proof; the next request
				// would wait out the mute, which is the muting test's job.
				throttled++
				break
			}
		}
		return throttled, time.Since(start)
	}
	if n, took := metadataBurst("busy"); n == 0 {
		t.Errorf("a client over its request quota was never throttled (50 requests in %v)", took)
	} else {
		t.Logf("busy: throttled after %v", took)
	}
	if n, _ := metadataBurst("idle"); n != 0 {
		t.Errorf("a client without a request quota was throttled %d times", n)
	}
}

// apiVersionsOver opens a connection from local (nil: any address), sends ApiVersions
// and reports whether an answer came, and how long until the answer or the close.
func apiVersionsOver(t *testing.T, addr string, local net.Addr) (answered bool, took time.Duration) {
	t.Helper()
	d := net.Dialer{LocalAddr: local, Timeout: 5 * time.Second}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	start := time.Now()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "quota-test", "1"
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("conn-test")).AppendRequest(nil, req, 1)
	if _, err := nc.Write(frame); err != nil {
		return false, time.Since(start)
	}
	_ = nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(nc, size[:]); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatal("neither an answer nor a close within 20 s")
		}
		return false, time.Since(start)
	}
	return true, time.Since(start)
}

// TestConnectionCreationQuota: connections from an address over its
// connection_creation_rate quota (KIP-612) are held unanswered for the throttle time,
// then closed; another address is not affected.
func TestConnectionCreationQuota(t *testing.T) {
	t.Parallel()
	b := testbroker.Start(t, testbroker.WithConfig(fastWindow))
	setQuota(t, b.Admin(t), "connection_creation_rate", 2, "ip", "127.0.0.1")
	local := &net.TCPAddr{IP: net.ParseIP("127.0.0.1")}
	var answered, throttled int
	for range 8 {
		ok, took := apiVersionsOver(t, b.Addr, local)
		if ok {
			answered++
			continue
		}
		throttled++
		if took < 100*time.Millisecond {
			t.Errorf("a throttled connection was closed after %v: it must be held for its throttle time", took)
		}
	}
	t.Logf("8 connections at once with a quota of 2/s: %d answered, %d throttled", answered, throttled)
	if answered == 0 || throttled == 0 {
		t.Errorf("8 connections at once with a quota of 2/s: %d answered, %d throttled; want some of each", answered, throttled)
	}
	// 127.0.0.2 (the loopback network) has no quota of its own and there is no default.
	other := &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}
	for i := range 8 {
		if ok, _ := apiVersionsOver(t, b.Addr, other); !ok {
			t.Fatalf("connection %d from an address without a quota was throttled", i)
		}
	}
	ms := metricstest.Scrape(t, b.AdminAddr)
	if n, _ := ms.Value("sluice_connections_quota_throttled_total"); n != float64(throttled) {
		t.Errorf("sluice_connections_quota_throttled_total = %v, want %d", n, throttled)
	}
}

// TestUserQuota (KIP-546): on a SASL listener the quota's user is the authenticated
// principal's name. A producer logged in as alice, whose user has a producer quota,
// is held within 10% of it; bob beside her, with no quota, runs free although both
// use the same client id.
func TestUserQuota(t *testing.T) {
	t.Parallel()
	const quota = 256 << 10
	b := testbroker.Start(t, testbroker.WithConfig(`
listeners:
  - {name: SASL_PLAINTEXT}
configs:
  sasl.enabled.mechanisms: "SCRAM-SHA-512"
  super.users: "User:admin;User:alice;User:bob"
  quota.window.num: "2"
  quota.window.size.seconds: "1"
modules:
  auth: {use: acl, users: [{name: admin, password: admin-secret}, {name: alice, password: alice-secret}, {name: bob, password: bob-secret}]}
`))
	login := func(user string) kgo.Opt {
		return kgo.SASL(scram.Auth{User: user, Pass: user + "-secret"}.AsSha512Mechanism())
	}
	adm := kadm.NewClient(b.Client(t, login("admin")))
	if _, err := adm.CreateTopic(context.Background(), 2, 1, nil, "user-quota"); err != nil {
		t.Fatal(err)
	}
	setQuota(t, adm, "producer_byte_rate", quota, "user", "alice")
	opts := func(user string) []kgo.Opt {
		return []kgo.Opt{login(user), kgo.ClientID("shared"), kgo.MaxBufferedRecords(1000),
			kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(64 << 10)}
	}
	alice, bob := b.Client(t, opts("alice")...), b.Client(t, opts("bob")...)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var am, bm rateMeter
	for _, p := range []struct {
		cl *kgo.Client
		m  *rateMeter
	}{{alice, &am}, {bob, &bm}} {
		wg.Add(1)
		go func() { defer wg.Done(); produceFlatOut(ctx, p.cl, "user-quota", p.m) }()
	}
	time.Sleep(3 * time.Second) // measure the steady state, not the first burst
	am.mark()
	bm.mark()
	time.Sleep(10 * time.Second)
	ar, br := am.rate(), bm.rate()
	cancel()
	wg.Wait()
	within(t, "alice's producer", ar, quota, 0.10)
	if br < 4*quota {
		t.Errorf("bob's producer (no quota, same client id) made %.0f B/s; want it to run free (> %d)", br, 4*quota)
	}
}
