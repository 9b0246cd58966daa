package txn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
)

// fakeCluster is a one-broker world for unit tests: the metadata image, topic
// creation, producer-id blocks, the partitions of internal topics (an in-memory log)
// and a marker writer.
type fakeCluster struct {
	mu      sync.Mutex
	image   *kernel.Image
	logs    map[kernel.TopicPartition][][]byte // committed batches, offsets assigned
	ends    map[kernel.TopicPartition]int64
	epochs  map[kernel.TopicPartition]int32
	notLead map[kernel.TopicPartition]bool
	nextPID int64
	allocs  int
	failApp atomic.Int32                 // fail the next n appends
	created map[string]map[string]string // configs each CreateTopic call created a topic with

	markersMu  sync.Mutex
	markers    []markerCall
	markerErrs map[kernel.TopicPartition][]error // errors returned before success
	markerHold chan struct{}                     // non-nil: WriteTxnMarker waits for it
	readHold   chan struct{}                     // non-nil: ReadCommitted waits for it
	inFlight   atomic.Int32                      // WriteTxnMarker calls running
	maxFlight  atomic.Int32
}

type markerCall struct {
	tp kernel.TopicPartition
	m  kernel.TxnMarker
}

func newFakeCluster() *fakeCluster {
	c := &fakeCluster{
		logs:       map[kernel.TopicPartition][][]byte{},
		ends:       map[kernel.TopicPartition]int64{},
		epochs:     map[kernel.TopicPartition]int32{},
		notLead:    map[kernel.TopicPartition]bool{},
		markerErrs: map[kernel.TopicPartition][]error{},
		image:      &kernel.Image{Brokers: map[int32]*kernel.BrokerImage{1: {ID: 1}}},
	}
	c.addTopic("t", 3)
	c.addTopic("u", 2)
	return c
}

func (c *fakeCluster) addTopic(name string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	im := *c.image
	t := &kernel.TopicImage{Name: name, ID: [16]byte{byte(len(name)), name[0]}}
	for p := range n {
		t.Partitions = append(t.Partitions, kernel.PartitionImage{Partition: int32(p), Leader: 1})
	}
	im.PutTopic(t)
	c.image = &im
}

func (c *fakeCluster) deleteTopic(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	im := *c.image
	im.RemoveTopic(name)
	c.image = &im
}

// Metadata.
func (c *fakeCluster) Image() *kernel.Image { c.mu.Lock(); defer c.mu.Unlock(); return c.image }
func (c *fakeCluster) Subscribe(fn func(*kernel.Image)) func() {
	fn(c.Image())
	return func() {}
}
func (c *fakeCluster) Ready() bool { return true }

// TopicCreator.
func (c *fakeCluster) CreateTopic(_ context.Context, name string, partitions int32, _ int16, configs map[string]string) (*kernel.TopicImage, error) {
	if t := c.Image().Topic(name); t != nil {
		return t, nil
	}
	c.mu.Lock()
	if c.created == nil {
		c.created = map[string]map[string]string{}
	}
	c.created[name] = configs
	c.mu.Unlock()
	c.addTopic(name, int(partitions))
	return c.Image().Topic(name), nil
}

// ProducerIDAllocator.
func (c *fakeCluster) AllocateProducerIDs(_ context.Context, count int32) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	first := c.nextPID
	c.nextPID += int64(count)
	c.allocs++
	return first, nil
}

// Partitions.
func (c *fakeCluster) Append(_ context.Context, tp kernel.TopicPartition, records []byte) (kernel.AppendResult, error) {
	if n := c.failApp.Load(); n > 0 && c.failApp.CompareAndSwap(n, n-1) {
		return kernel.AppendResult{}, errors.New("fake: injected append failure")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.notLead[tp] {
		return kernel.AppendResult{}, kernel.ErrNotLeader
	}
	b := append([]byte(nil), records...)
	h, err := recordbatch.ParseHeader(b)
	if err != nil {
		return kernel.AppendResult{}, err
	}
	base := c.ends[tp]
	recordbatch.SetBaseOffset(b, base)
	c.logs[tp] = append(c.logs[tp], b)
	c.ends[tp] = base + int64(h.LastOffsetDelta) + 1
	return kernel.AppendResult{BaseOffset: base, LastOffset: c.ends[tp] - 1}, nil
}

// ReadStable is not used by these tests.
func (c *fakeCluster) ReadStable(context.Context, kernel.TopicPartition, int64, func([]byte) error) (int64, error) {
	return 0, errors.New("fake: ReadStable not implemented")
}

func (c *fakeCluster) ReadCommitted(ctx context.Context, tp kernel.TopicPartition, offset int64, fn func([]byte) error) error {
	if err := waitHold(ctx, &c.mu, &c.readHold); err != nil {
		return err
	}
	c.mu.Lock()
	if c.notLead[tp] {
		c.mu.Unlock()
		return kernel.ErrNotLeader
	}
	batches := append([][]byte(nil), c.logs[tp]...)
	c.mu.Unlock()
	for _, b := range batches {
		if err := fn(b); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// waitHold waits while the test holds a call: until *hold (read under mu) closes, or
// ctx ends (its error). A nil *hold lets the call through at once.
func waitHold(ctx context.Context, mu *sync.Mutex, hold *chan struct{}) error {
	mu.Lock()
	h := *hold
	mu.Unlock()
	if h == nil {
		return nil
	}
	select {
	case <-h:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *fakeCluster) Leader(tp kernel.TopicPartition) (int32, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.epochs[tp], !c.notLead[tp]
}

func (c *fakeCluster) setLeader(tp kernel.TopicPartition, leads bool, epoch int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.notLead[tp] = !leads
	c.epochs[tp] = epoch
}

// TxnMarkerWriter.
func (c *fakeCluster) WriteTxnMarker(ctx context.Context, tp kernel.TopicPartition, m kernel.TxnMarker) error {
	n := c.inFlight.Add(1)
	defer c.inFlight.Add(-1)
	for {
		mx := c.maxFlight.Load()
		if n <= mx || c.maxFlight.CompareAndSwap(mx, n) {
			break
		}
	}
	if err := waitHold(ctx, &c.markersMu, &c.markerHold); err != nil {
		return err
	}
	c.markersMu.Lock()
	defer c.markersMu.Unlock()
	if errs := c.markerErrs[tp]; len(errs) > 0 {
		c.markerErrs[tp] = errs[1:]
		return errs[0]
	}
	c.markers = append(c.markers, markerCall{tp, m})
	return nil
}

func (c *fakeCluster) markerCalls() []markerCall {
	c.markersMu.Lock()
	defer c.markersMu.Unlock()
	return append([]markerCall(nil), c.markers...)
}

// failMarkers makes tp's next marker writes fail with errs, one each in order; none
// clears it.
func (c *fakeCluster) failMarkers(tp kernel.TopicPartition, errs ...error) {
	c.markersMu.Lock()
	defer c.markersMu.Unlock()
	c.markerErrs[tp] = errs
}

func (c *fakeCluster) holdMarkers() func() {
	ch := make(chan struct{})
	c.markersMu.Lock()
	c.markerHold = ch
	c.markersMu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			c.markersMu.Lock()
			c.markerHold = nil
			c.markersMu.Unlock()
			close(ch)
		})
	}
}

// records decodes every record of a __transaction_state partition: id and state (or
// nil for a tombstone).
func (c *fakeCluster) records(t *testing.T, tp kernel.TopicPartition) []struct {
	id string
	d  *txnData
} {
	t.Helper()
	var out []struct {
		id string
		d  *txnData
	}
	c.mu.Lock()
	batches := append([][]byte(nil), c.logs[tp]...)
	c.mu.Unlock()
	for _, b := range batches {
		_, err := recordbatch.Records(b, nil, func(r *recordbatch.Record) error {
			id, err := decodeKey(r.Key)
			if err != nil {
				return err
			}
			var d *txnData
			if r.Value != nil {
				v, err := decodeValue(r.Value)
				if err != nil {
					return err
				}
				d = &v
			}
			out = append(out, struct {
				id string
				d  *txnData
			}{id, d})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// clock is a settable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

// Advance moves the clock ms milliseconds on.
func (c *clock) Advance(ms int64) {
	c.mu.Lock()
	c.t = c.t.Add(time.Duration(ms) * time.Millisecond)
	c.mu.Unlock()
}

type testEnv struct {
	t     *testing.T
	m     *Module
	c     *fakeCluster
	clock *clock
}

type envOpt func(*Module, *fakeCluster)

func withConfigs(kv ...string) envOpt {
	return func(m *Module, _ *fakeCluster) {
		for i := 0; i+1 < len(kv); i += 2 {
			m.broker.StaticConfigs[kv[i]] = kv[i+1]
		}
	}
}

func newEnv(t *testing.T, opts ...envOpt) *testEnv {
	t.Helper()
	c := newFakeCluster()
	return startEnv(t, c, opts...)
}

// startEnv starts a coordinator on cluster c (a restart when c already has state).
func startEnv(t *testing.T, c *fakeCluster, opts ...envOpt) *testEnv {
	t.Helper()
	clk := &clock{t: time.UnixMilli(1_700_000_000_000)}
	m := New()
	m.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		m.log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	m.broker = kernel.BrokerInfo{NodeID: 1, StaticConfigs: map[string]string{
		"transaction.state.log.num.partitions": "3",
		"offsets.topic.num.partitions":         "5",
	}}
	m.meta, m.creator, m.parts, m.markers = c, c, c, c
	m.pids = &pidBlocks{alloc: c}
	m.now = clk.Now
	m.completed, m.timedOut = &kernel.Counter{}, &kernel.Counter{}
	m.SweepIntervalMs = 5
	m.MarkerRetryBackoffMs = 1
	m.ConcurrentWaitMs = 0 // Kafka's behaviour; TestConcurrentWait sets it
	for _, o := range opts {
		o(m, c)
	}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	m.coord = m.newCoordinator()
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	e := &testEnv{t: t, m: m, c: c, clock: clk}
	t.Cleanup(e.stop)
	if _, err := m.ensureTxnTopic(context.Background()); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *testEnv) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.m.Stop(ctx); err != nil {
		e.t.Errorf("stop: %v", err)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

func (e *testEnv) req(body kmsg.Request, version int16) *kernel.Request {
	body.SetVersion(version)
	return &kernel.Request{Key: body.Key(), Version: version, Body: body, Conn: &kernel.ConnInfo{}, Authorizer: kernel.AllowAll{}}
}

func (e *testEnv) call(body kmsg.Request, version int16) kmsg.Response {
	e.t.Helper()
	r := e.req(body, version)
	var h kernel.Handler
	for _, c := range e.m.claims() {
		if c.Key.Int16() == body.Key() {
			h = c.Handler
		}
	}
	if h == nil {
		e.t.Fatalf("no claim of key %d", body.Key())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := h(ctx, r)
	if err != nil {
		e.t.Fatalf("handler: %v", err)
	}
	return resp.Msg
}

func (e *testEnv) initPID(id string, timeoutMs int32, pid int64, epoch int16) (int64, int16, *kerr.Error) {
	e.t.Helper()
	r := kmsg.NewPtrInitProducerIDRequest()
	if id != "" {
		r.TransactionalID = &id
	}
	r.TransactionTimeoutMillis = timeoutMs
	r.ProducerID, r.ProducerEpoch = pid, epoch
	resp := e.call(r, 5).(*kmsg.InitProducerIDResponse)
	return resp.ProducerID, resp.ProducerEpoch, codeErr(resp.ErrorCode)
}

// initOK inits id (retrying CONCURRENT_TRANSACTIONS, as clients do) and returns its
// producer id and epoch.
func (e *testEnv) initOK(id string) (int64, int16) {
	e.t.Helper()
	var pid int64
	var epoch int16
	e.waitFor(func() bool {
		var err *kerr.Error
		pid, epoch, err = e.initPID(id, 60_000, -1, -1)
		if err == kerr.ConcurrentTransactions || err == kerr.CoordinatorLoadInProgress {
			return false
		}
		if err != nil {
			e.t.Fatalf("init %s: %v", id, err)
		}
		return true
	})
	return pid, epoch
}

func (e *testEnv) addParts(id string, pid int64, epoch int16, version int16, tps ...kernel.TopicPartition) map[kernel.TopicPartition]*kerr.Error {
	e.t.Helper()
	r := kmsg.NewPtrAddPartitionsToTxnRequest()
	r.TransactionalID, r.ProducerID, r.ProducerEpoch = id, pid, epoch
	for _, tp := range tps {
		t := kmsg.NewAddPartitionsToTxnRequestTopic()
		t.Topic, t.Partitions = tp.Topic, []int32{tp.Partition}
		r.Topics = append(r.Topics, t)
	}
	resp := e.call(r, version).(*kmsg.AddPartitionsToTxnResponse)
	out := map[kernel.TopicPartition]*kerr.Error{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[kernel.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = codeErr(p.ErrorCode)
		}
	}
	return out
}

// addOne adds tps and returns the code they all got (failing if they differ).
func (e *testEnv) addOne(id string, pid int64, epoch int16, tps ...kernel.TopicPartition) *kerr.Error {
	e.t.Helper()
	res := e.addParts(id, pid, epoch, 3, tps...)
	var first *kerr.Error
	for i, tp := range tps {
		if i == 0 {
			first = res[tp]
		} else if res[tp] != first {
			e.t.Fatalf("mixed codes: %v", res)
		}
	}
	return first
}

func (e *testEnv) endTxn(id string, pid int64, epoch int16, commit bool, version int16) *kerr.Error {
	e.t.Helper()
	r := kmsg.NewPtrEndTxnRequest()
	r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Commit = id, pid, epoch, commit
	return codeErr(e.call(r, version).(*kmsg.EndTxnResponse).ErrorCode)
}

func (e *testEnv) describe(id string) kmsg.DescribeTransactionsResponseTransactionState {
	e.t.Helper()
	r := kmsg.NewPtrDescribeTransactionsRequest()
	r.TransactionalIDs = []string{id}
	return e.call(r, 0).(*kmsg.DescribeTransactionsResponse).TransactionStates[0]
}

func (e *testEnv) state(id string) string {
	e.t.Helper()
	d := e.describe(id)
	if d.ErrorCode != 0 {
		return kerr.ErrorForCode(d.ErrorCode).Error()
	}
	return d.State
}

func (e *testEnv) waitState(id, want string) {
	e.t.Helper()
	e.waitFor(func() bool { return e.state(id) == want })
}

func (e *testEnv) waitFor(fn func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !fn() {
		if time.Now().After(deadline) {
			e.t.Fatal("condition not met within 15s")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func codeErr(code int16) *kerr.Error {
	if code == 0 {
		return nil
	}
	if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
		return e
	}
	panic(fmt.Sprintf("unknown code %d", code))
}

func tp(topic string, p int32) kernel.TopicPartition {
	return kernel.TopicPartition{Topic: topic, Partition: p}
}

// txnTP is the __transaction_state partition of id in the test env.
func (e *testEnv) txnTP(id string) kernel.TopicPartition {
	return tp(TxnTopic, partitionFor(id, 3))
}
