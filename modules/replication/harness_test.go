package replication

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/storage/memory"
)

// fakeMeta is a kernel.Metadata whose images the test publishes; subscribers are
// called synchronously by publish, unless hold is set (to simulate a lagging
// subscription).
type fakeMeta struct {
	mu   sync.Mutex
	img  *kernel.Image
	subs []func(*kernel.Image)
}

func (f *fakeMeta) Image() *kernel.Image { f.mu.Lock(); defer f.mu.Unlock(); return f.img }
func (f *fakeMeta) Ready() bool          { return true }
func (f *fakeMeta) Subscribe(fn func(*kernel.Image)) func() {
	f.mu.Lock()
	f.subs = append(f.subs, fn)
	img := f.img
	f.mu.Unlock()
	fn(img)
	return func() {
		f.mu.Lock()
		f.subs = nil
		f.mu.Unlock()
	}
}

// set replaces the image without notifying subscribers.
func (f *fakeMeta) set(img *kernel.Image) { f.mu.Lock(); f.img = img; f.mu.Unlock() }

// publish replaces the image and notifies subscribers.
func (f *fakeMeta) publish(img *kernel.Image) {
	f.mu.Lock()
	f.img = img
	subs := slices.Clone(f.subs)
	f.mu.Unlock()
	for _, fn := range subs {
		fn(img)
	}
}

type handlerClaim struct {
	min, max int16
	h        kernel.Handler
}

// fakeCtx is a kernel.Context over a memory store and a fakeMeta.
type fakeCtx struct {
	node     int32
	static   map[string]string
	storage  kernel.Storage
	meta     *fakeMeta
	metaMod  kernel.Module // what Lookup("metadata") returns (nil: meta)
	handlers map[int16]handlerClaim
	metrics  *kernel.Metrics
}

func (c *fakeCtx) Logger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
func (c *fakeCtx) Broker() kernel.BrokerInfo {
	return kernel.BrokerInfo{NodeID: c.node, StaticConfigs: c.static}
}
func (c *fakeCtx) Lookup(role string) (kernel.Module, error) {
	switch role {
	case "storage":
		return c.storage, nil
	case "metadata":
		if c.metaMod != nil {
			return c.metaMod, nil
		}
		return c.meta, nil
	}
	return nil, io.EOF
}
func (c *fakeCtx) Handle(key, minV, maxV int16, h kernel.Handler) error {
	c.handlers[key] = handlerClaim{minV, maxV, h}
	return nil
}
func (c *fakeCtx) HandleHTTP(string, http.Handler) {}
func (c *fakeCtx) Metrics() *kernel.Metrics        { return c.metrics }

// topicSpec describes a test topic.
type topicSpec struct {
	name     string
	id       byte
	parts    int
	leader   int32 // default: node 1
	configs  map[string]string
	internal bool
}

func image(version uint64, topics ...topicSpec) *kernel.Image {
	im := &kernel.Image{
		Version:       version,
		Brokers:       map[int32]*kernel.BrokerImage{1: {ID: 1, Endpoints: []kernel.ListenerInfo{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9092}}}, 2: {ID: 2, Endpoints: []kernel.ListenerInfo{{Name: "PLAINTEXT", Host: "127.0.0.2", Port: 9092}}}},
		BrokerConfigs: map[string]map[string]string{},
	}
	for _, ts := range topics {
		leader := ts.leader
		if leader == 0 {
			leader = 1
		}
		t := &kernel.TopicImage{Name: ts.name, ID: [16]byte{ts.id}, Configs: ts.configs, Internal: ts.internal}
		for i := 0; i < max(ts.parts, 1); i++ {
			t.Partitions = append(t.Partitions, kernel.PartitionImage{Partition: int32(i), Leader: leader, LeaderEpoch: 5, Replicas: []int32{leader}, ISR: []int32{leader}})
		}
		im.PutTopic(t)
	}
	return im
}

type harness struct {
	t     testing.TB
	m     *Module
	ctx   *fakeCtx
	meta  *fakeMeta
	store *memory.Store
}

func newHarness(t testing.TB, cfg func(*Module), topics ...topicSpec) *harness {
	t.Helper()
	meta := &fakeMeta{img: image(1, topics...)}
	return newHarnessMeta(t, nil, meta, nil, cfg)
}

// newHarnessMeta is newHarness with a metadata module of the test's (mod, e.g. one that
// changes ISRs) around meta (nil mod: meta itself) and static broker configs.
func newHarnessMeta(t testing.TB, mod kernel.Module, meta *fakeMeta, static map[string]string, cfg func(*Module)) *harness {
	t.Helper()
	store := memory.NewStore()
	fc := &fakeCtx{node: 1, static: static, storage: store, meta: meta, metaMod: mod, handlers: map[int16]handlerClaim{}, metrics: kernel.NewMetrics()}
	m := New()
	if cfg != nil {
		cfg(m)
	}
	if err := m.Provision(fc); err != nil {
		t.Fatal(err)
	}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, m: m, ctx: fc, meta: meta, store: store}
	t.Cleanup(func() {
		if err := m.Stop(context.Background()); err != nil {
			t.Error(err)
		}
		_ = m.Cleanup()
	})
	return h
}

// do runs a request through the claimed handler at version v.
func (h *harness) do(ctx context.Context, v int16, body kmsg.Request) (kernel.Response, error) {
	return h.doAs(ctx, v, body, kernel.AllowAll{})
}

// produceAsync sends r as client version 9 in the background; the channel gets the
// answer of its first partition (an acks=all produce that waits for followers).
func (h *harness) produceAsync(r *kmsg.ProduceRequest) <-chan kmsg.ProduceResponseTopicPartition {
	got := make(chan kmsg.ProduceResponseTopicPartition, 1)
	go func() {
		resp, err := h.do(context.Background(), 9, r)
		if err != nil {
			h.t.Error(err)
		}
		got <- resp.Msg.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	}()
	return got
}

// waitingProduce is produceAsync that returns once the produce waits in the
// purgatory: its one partition has one watcher.
func (h *harness) waitingProduce(r *kmsg.ProduceRequest) <-chan kmsg.ProduceResponseTopicPartition {
	h.t.Helper()
	tp := kernel.TopicPartition{Topic: r.Topics[0].Topic, Partition: r.Topics[0].Partitions[0].Partition}
	got := h.produceAsync(r)
	waitFor(h.t, func() bool { return h.m.pg.watching(tp) == 1 })
	return got
}

func (h *harness) doAs(ctx context.Context, v int16, body kmsg.Request, az kernel.Authorizer) (kernel.Response, error) {
	h.t.Helper()
	return h.call(h.t, ctx, v, body, az)
}

// call is doAs reporting to tb (inside a fuzz target, the target's *testing.T).
func (h *harness) call(tb testing.TB, ctx context.Context, v int16, body kmsg.Request, az kernel.Authorizer) (kernel.Response, error) {
	tb.Helper()
	claim, ok := h.ctx.handlers[body.Key()]
	if !ok {
		tb.Fatalf("key %d not claimed", body.Key())
	}
	if v < claim.min || v > claim.max {
		tb.Fatalf("key %d v%d outside claimed %d-%d", body.Key(), v, claim.min, claim.max)
	}
	body.SetVersion(v)
	req := &kernel.Request{Key: body.Key(), Version: v, Body: body, ClientID: "test",
		Conn: &kernel.ConnInfo{Listener: "PLAINTEXT", Principal: kernel.Anonymous}, Authorizer: az}
	return h.ctx.handlers[body.Key()].h(ctx, req)
}

// bodyBytes flattens a kernel.Body, reading file chunks at their offsets, and
// releases it.
func bodyBytes(t testing.TB, b *kernel.Body) []byte {
	t.Helper()
	defer func() {
		if b.Release != nil {
			b.Release()
		}
	}()
	out := make([]byte, 0, b.Size())
	for i := range b.Chunks {
		c := &b.Chunks[i]
		if c.File == nil {
			out = append(out, c.Bytes...)
			continue
		}
		buf := make([]byte, c.N)
		if _, err := c.File.ReadAt(buf, c.Off); err != nil {
			t.Fatal(err)
		}
		out = append(out, buf...)
	}
	return out
}

// denyTopic denies every operation on one topic.
type denyTopic string

func (d denyTopic) Authorize(_ context.Context, _ kernel.Principal, _ string, _ kernel.Operation, r kernel.Resource) bool {
	return !(r.Type == kernel.ResTopic && r.Name == string(d))
}
