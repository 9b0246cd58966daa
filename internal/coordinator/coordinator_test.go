package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
)

const topic = "__test_state"

// fakeLog is kernel.Partitions and kernel.Metadata over in-memory partitions whose
// leadership a test moves.
type fakeLog struct {
	mu      sync.Mutex
	parts   map[int32][][]byte // committed batches, base offsets set
	next    map[int32]int64
	leader  map[int32]int32 // partition -> leader epoch; absent: not led here
	fail    map[int32]error // the next Append to the partition fails with it
	block   chan struct{}   // non-nil: Append waits for it to close (after appending)
	appends atomic.Int64
	image   *kernel.Image
}

func newFakeLog(partitions int) *fakeLog {
	f := &fakeLog{parts: map[int32][][]byte{}, next: map[int32]int64{}, leader: map[int32]int32{}, fail: map[int32]error{}}
	f.image = &kernel.Image{}
	f.image.PutTopic(&kernel.TopicImage{Name: topic, Partitions: make([]kernel.PartitionImage, partitions)})
	for p := range partitions {
		f.leader[int32(p)] = 1
	}
	return f
}

// hold makes appends wait (after appending) until release is called.
func (f *fakeLog) hold() (release func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	block := make(chan struct{})
	f.block = block
	return func() {
		f.mu.Lock()
		f.block = nil
		f.mu.Unlock()
		close(block)
	}
}

func (f *fakeLog) Image() *kernel.Image                 { return f.image }
func (f *fakeLog) Subscribe(func(*kernel.Image)) func() { return func() {} }
func (f *fakeLog) Ready() bool                          { return true }

func (f *fakeLog) setLeader(p int32, epoch int32, leads bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if leads {
		f.leader[p] = epoch
	} else {
		delete(f.leader, p)
	}
}

func (f *fakeLog) Leader(tp kernel.TopicPartition) (int32, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.leader[tp.Partition]
	return e, ok
}

func (f *fakeLog) Append(ctx context.Context, tp kernel.TopicPartition, records []byte) (kernel.AppendResult, error) {
	f.appends.Add(1)
	f.mu.Lock()
	if err := f.fail[tp.Partition]; err != nil {
		delete(f.fail, tp.Partition)
		f.mu.Unlock()
		return kernel.AppendResult{}, err
	}
	if _, ok := f.leader[tp.Partition]; !ok {
		f.mu.Unlock()
		return kernel.AppendResult{}, kernel.ErrNotLeader
	}
	h, err := recordbatch.ParseHeader(records)
	if err != nil {
		f.mu.Unlock()
		return kernel.AppendResult{}, err
	}
	b := slices.Clone(records)
	base := f.next[tp.Partition]
	recordbatch.SetBaseOffset(b, base)
	f.parts[tp.Partition] = append(f.parts[tp.Partition], b)
	f.next[tp.Partition] = base + int64(h.LastOffsetDelta) + 1
	block := f.block
	f.mu.Unlock()
	if block != nil {
		<-block
	}
	return kernel.AppendResult{BaseOffset: base, LastOffset: base + int64(h.LastOffsetDelta)}, nil
}

func (f *fakeLog) ReadCommitted(ctx context.Context, tp kernel.TopicPartition, offset int64, fn func([]byte) error) error {
	f.mu.Lock()
	batches := slices.Clone(f.parts[tp.Partition])
	f.mu.Unlock()
	for _, b := range batches {
		h, _ := recordbatch.ParseHeader(b)
		if h.LastOffset() < offset {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(b); err != nil {
			return err
		}
	}
	return nil
}

func (f *fakeLog) ReadStable(context.Context, kernel.TopicPartition, int64, func([]byte) error) (int64, error) {
	return 0, errors.New("not used")
}

// fakeState is a state machine that keeps the value of each key, and records what
// the skeleton called on it.
type fakeState struct {
	*Shard
	t *testing.T

	mu       sync.Mutex
	kv       map[string]string
	replayed int
	appended []Record
	txnBatch int // transactional writes appended
	loadedAt time.Time
	sweeps   int
	woken    int
	unloads  int
	code     *kerr.Error
	failLoad error // Loaded fails with it
	failAppl error // Appended fails with it (once)
}

func (s *fakeState) ReplayFrom() int64 { return 0 }

func (s *fakeState) Replay(b Batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range b.Records {
		s.replayed++
		if r.Value == nil {
			delete(s.kv, string(r.Key))
		} else {
			s.kv[string(r.Key)] = string(r.Value)
		}
	}
	return nil
}

func (s *fakeState) Loaded() ([]any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loadedAt = time.Now()
	return []any{"keys", len(s.kv)}, s.failLoad
}

func (s *fakeState) Appended(recs []Record, p *Producer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.failAppl; err != nil {
		s.failAppl = nil
		return err
	}
	if p != nil {
		s.txnBatch++
	}
	for _, r := range recs {
		s.appended = append(s.appended, r)
		s.kv[string(r.Key)] = string(r.Value)
	}
	return nil
}

func (s *fakeState) Sweep(time.Time) { s.mu.Lock(); s.sweeps++; s.mu.Unlock() }
func (s *fakeState) Woken()          { s.mu.Lock(); s.woken++; s.mu.Unlock() }

func (s *fakeState) Unload(code *kerr.Error) {
	if s.Context().Err() == nil {
		s.t.Error("Unload before the shard's context was cancelled")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unloads++
	s.code = code
}

func (s *fakeState) get(k string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.kv[k]
	return v, ok
}

type rig struct {
	t   *testing.T
	log *fakeLog
	c   *Shards[*fakeState]

	mu     sync.Mutex
	states []*fakeState // every state made, in order
	onNew  func(*fakeState)
}

func newRig(t *testing.T, partitions int, mod ...func(*Config)) *rig {
	r := &rig{t: t, log: newFakeLog(partitions)}
	cfg := Config{
		Topic: topic, Log: slog.New(slog.DiscardHandler), Meta: r.log, Parts: r.log,
		SweepIntervalMs: 1, LoadWaitMs: 5000, MaxBatchRecords: 4,
		NoTopic: kerr.CoordinatorNotAvailable,
	}
	for _, m := range mod {
		m(&cfg)
	}
	r.c = New(cfg, func(sh *Shard) *fakeState {
		s := &fakeState{Shard: sh, t: t, kv: map[string]string{}}
		r.mu.Lock()
		r.states = append(r.states, s)
		if r.onNew != nil {
			r.onNew(s)
		}
		r.mu.Unlock()
		return s
	})
	t.Cleanup(func() { r.stop() })
	return r
}

// openRig returns an opened one-partition rig and the loaded shard of key "a".
func openRig(t *testing.T) (*rig, *fakeState) {
	r := newRig(t, 1)
	r.c.Open()
	return r, r.lookup("a")
}

func (r *rig) stop() {
	r.c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.c.Wait(ctx); err != nil {
		r.t.Fatalf("wait: %v", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, s := range r.states {
		s.mu.Lock()
		n := s.unloads
		s.mu.Unlock()
		if n != 1 {
			r.t.Errorf("state %d (partition %d, epoch %d) unloaded %d times, want 1", i, s.TP().Partition, s.Epoch(), n)
		}
	}
}

func (r *rig) lookup(key string) *fakeState {
	r.t.Helper()
	s, e := r.c.Lookup(context.Background(), key)
	if e != nil {
		r.t.Fatalf("lookup %q: %v", key, e)
	}
	return s
}

// keyFor returns a key that hashes to partition p.
func (r *rig) keyFor(p int32) string {
	for i := 0; ; i++ {
		k := fmt.Sprintf("k%d", i)
		if q, _ := r.c.PartitionOf(k); q == p {
			return k
		}
	}
}

func waitFor(t *testing.T, what string, fn func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !fn() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func kv(k, v string) []KV { return []KV{{Key: []byte(k), Value: []byte(v)}} }

func TestLookupBeforeOpenAndWithoutTopic(t *testing.T) {
	r := newRig(t, 2)
	if _, e := r.c.Lookup(context.Background(), "a"); e != kerr.CoordinatorNotAvailable {
		t.Fatalf("before Open: %v", e)
	}
	r.c.Open()
	r.log.image = &kernel.Image{}
	if _, e := r.c.Lookup(context.Background(), "a"); e != kerr.CoordinatorNotAvailable {
		t.Fatalf("no topic: %v, want Config.NoTopic", e)
	}
}

func TestWriteReplayReload(t *testing.T) {
	r, s := openRig(t)
	if e := s.Write(context.Background(), kv("a", "1")); e != nil {
		t.Fatal(e)
	}
	if e := s.Write(context.Background(), kv("a", "2")); e != nil {
		t.Fatal(e)
	}
	if e := s.WriteTxn(context.Background(), Producer{ID: 7, Epoch: 1}, kv("b", "t")); e != nil {
		t.Fatal(e)
	}
	if v, _ := s.get("a"); v != "2" || s.txnBatch != 1 || len(s.appended) != 3 || s.appended[2].Offset != 2 {
		t.Fatalf("after writes: a=%q, txn batches %d, appended %+v", v, s.txnBatch, s.appended)
	}
	// A new leader epoch: a new shard replays the log.
	r.log.setLeader(0, 2, true)
	s2 := r.lookup("a")
	if s2 == s || s2.Epoch() != 2 {
		t.Fatalf("new epoch: same shard or epoch %d", s2.Epoch())
	}
	if v, _ := s2.get("a"); v != "2" || s2.replayed != 3 {
		t.Fatalf("replayed a=%q, %d records", v, s2.replayed)
	}
	waitFor(t, "the old shard's unload", func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.unloads == 1 })
	if s.code != kerr.NotCoordinator {
		t.Fatalf("old shard unloaded with %v", s.code)
	}
	if e := s.Write(context.Background(), kv("a", "3")); e != kerr.NotCoordinator {
		t.Fatalf("write to an unloaded shard: %v", e)
	}
	// Leadership lost.
	r.log.setLeader(0, 0, false)
	if _, e := r.c.Lookup(context.Background(), "a"); e != kerr.NotCoordinator {
		t.Fatalf("not led: %v", e)
	}
	waitFor(t, "the unload", func() bool { s2.mu.Lock(); defer s2.mu.Unlock(); return s2.unloads == 1 })
	if _, ok := r.c.Get(0); ok {
		t.Fatal("an unled partition kept its shard")
	}
}

// A shard replays only after the shard it replaced stopped writing: the record the
// old writer was appending when the epoch changed is in the new shard's state.
func TestLoadWaitsForPreviousWriter(t *testing.T) {
	r, s := openRig(t)
	release := r.log.hold()
	done := make(chan *kerr.Error, 1)
	go func() { done <- s.Write(context.Background(), kv("a", "late")) }()
	waitFor(t, "the append", func() bool { return r.log.appends.Load() == 1 })
	r.log.setLeader(0, 2, true)
	s2, e := r.c.Shard(0)
	if e != nil {
		t.Fatal(e)
	}
	time.Sleep(20 * time.Millisecond)
	if s2.Loading().IsReady() || s2.Loading().Failed() {
		t.Fatal("the new shard loaded while the old writer was appending")
	}
	release()
	if e := <-done; e != nil {
		t.Fatalf("the old writer's committed append: %v", e)
	}
	s2 = r.lookup("a")
	if v, _ := s2.get("a"); v != "late" {
		t.Fatalf("the new shard replayed a=%q, want the old writer's record", v)
	}
}

func TestAppendFailureDropsShard(t *testing.T) {
	r, s := openRig(t)
	r.log.mu.Lock()
	r.log.fail[0] = errors.New("disk on fire")
	r.log.mu.Unlock()
	if e := s.Write(context.Background(), kv("a", "1")); e != kerr.CoordinatorNotAvailable {
		t.Fatalf("failed append: %v", e)
	}
	waitFor(t, "the drop", func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.unloads == 1 })
	if s.code != kerr.CoordinatorNotAvailable {
		t.Fatalf("dropped with %v", s.code)
	}
	if s2 := r.lookup("a"); s2 == s {
		t.Fatal("the dropped shard is still served")
	}
	// A producer refusal answers its write and keeps the shard.
	s3 := r.lookup("a")
	r.log.mu.Lock()
	r.log.fail[0] = fmt.Errorf("append: %w", kernel.ErrInvalidProducerEpoch)
	r.log.mu.Unlock()
	if e := s3.WriteTxn(context.Background(), Producer{ID: 1}, kv("a", "t")); e != kerr.InvalidProducerEpoch {
		t.Fatalf("fenced producer: %v", e)
	}
	if s4 := r.lookup("a"); s4 != s3 {
		t.Fatal("a producer refusal dropped the shard")
	}
	// A state that misses a committed write: the write succeeds, the shard reloads
	// and replays it.
	s3.mu.Lock()
	s3.failAppl = errors.New("store full")
	s3.mu.Unlock()
	if e := s3.Write(context.Background(), kv("c", "kept")); e != nil {
		t.Fatalf("committed write: %v", e)
	}
	waitFor(t, "the reload", func() bool { s, _ := r.c.Shard(0); return s != s3 })
	if v, _ := r.lookup("a").get("c"); v != "kept" {
		t.Fatalf("reloaded c=%q", v)
	}
}

func TestFailedLoadIsRetried(t *testing.T) {
	r := newRig(t, 1)
	first := true
	r.onNew = func(s *fakeState) {
		if first {
			s.failLoad = errors.New("bad record")
			first = false
		}
	}
	r.c.Open()
	if _, e := r.c.Lookup(context.Background(), "a"); e != kerr.CoordinatorNotAvailable {
		t.Fatalf("failed load: %v", e)
	}
	if s := r.lookup("a"); s == r.states[0] {
		t.Fatal("the failed shard was not replaced")
	}
}

func TestBatchesAndTxnAlone(t *testing.T) {
	r, s := openRig(t)
	release := r.log.hold()
	// The first write holds the writer in its append; the ones queued meanwhile go
	// out together, the transactional one alone, the limit of 4 records splitting.
	var wg sync.WaitGroup
	codes := make([]*kerr.Error, 8)
	first, e := s.Enqueue(context.Background(), kv("x", "0"))
	if e != nil {
		t.Fatal(e)
	}
	waitFor(t, "the first append", func() bool { return r.log.appends.Load() == 1 })
	var ps []*Pending
	for i := range 6 {
		p, e := s.Enqueue(context.Background(), kv(fmt.Sprint("k", i), "v"))
		if e != nil {
			t.Fatal(e)
		}
		ps = append(ps, p)
		if i == 2 {
			p, e := s.EnqueueTxn(context.Background(), Producer{ID: 3}, kv("t", "v"))
			if e != nil {
				t.Fatal(e)
			}
			ps = append(ps, p)
		}
	}
	release()
	codes[0] = first.Wait(context.Background())
	for i, p := range ps {
		wg.Add(1)
		go func() { defer wg.Done(); codes[i+1] = p.Wait(context.Background()) }()
	}
	wg.Wait()
	for i, c := range codes {
		if c != nil {
			t.Fatalf("write %d: %v", i, c)
		}
	}
	// x | k0 k1 k2 | t (alone) | k3 k4 k5
	r.log.mu.Lock()
	defer r.log.mu.Unlock()
	var sizes []int
	var txn []bool
	for _, b := range r.log.parts[0] {
		h, _ := recordbatch.ParseHeader(b)
		sizes = append(sizes, int(h.RecordCount))
		txn = append(txn, h.IsTransactional())
	}
	if !slices.Equal(sizes, []int{1, 3, 1, 3}) || !slices.Equal(txn, []bool{false, false, true, false}) {
		t.Fatalf("batches of %v records, transactional %v", sizes, txn)
	}
}

func TestSweeperFollowsLeadershipAndWakes(t *testing.T) {
	var before, after atomic.Int64
	r := newRig(t, 3, func(c *Config) {
		c.BeforeSweep = func(*kernel.Image) { before.Add(1) }
		c.AfterSweep = func(context.Context, time.Time) { after.Add(1) }
	})
	r.log.setLeader(2, 0, false)
	r.c.Start()
	waitFor(t, "the sweeper's loads", func() bool { return len(r.c.Ready()) == 2 })
	for _, p := range []int32{0, 1} {
		s, ok := r.c.Get(p)
		if !ok {
			t.Fatalf("partition %d not loaded", p)
		}
		waitFor(t, "sweeps", func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.sweeps > 2 })
		s.Wake()
		waitFor(t, "Woken", func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.woken > 0 })
	}
	if _, ok := r.c.Get(2); ok {
		t.Fatal("a partition led elsewhere was loaded")
	}
	if before.Load() == 0 || after.Load() == 0 {
		t.Fatal("sweep hooks not called")
	}
	r.log.setLeader(1, 0, false)
	waitFor(t, "the sweeper's unload", func() bool { _, ok := r.c.Get(1); return !ok })
	if r.c.Loading() {
		t.Fatal("Loading with every shard loaded")
	}
}

func TestCloseUnloadsAndStopsGoroutines(t *testing.T) {
	r := newRig(t, 2)
	r.c.Start()
	ended := make(chan struct{})
	r.c.Go(func(ctx context.Context) { <-ctx.Done(); close(ended) })
	s := r.lookup(r.keyFor(0))
	r.c.Close()
	<-ended
	if _, e := r.c.Lookup(context.Background(), "a"); e != kerr.CoordinatorNotAvailable {
		t.Fatalf("after Close: %v", e)
	}
	if s.code != kerr.NotCoordinator || s.Context().Err() == nil {
		t.Fatalf("closed shard: code %v, ctx %v", s.code, s.Context().Err())
	}
	s.Drop(kerr.NotCoordinator) // after Close: nothing more to unload
}

// Hammer: writers, leadership changes, drops and the sweeper at once. Every write
// acknowledged is in the log, every state is unloaded exactly once (rig.stop), and
// the race detector sees the lock discipline.
func TestHammer(t *testing.T) {
	const partitions, writers, loops = 3, 8, 200
	r := newRig(t, partitions)
	r.c.Start()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var acked sync.Map // "key=value" -> true
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range loops {
				k := fmt.Sprintf("w%d-%d", w, i%7)
				v := fmt.Sprint(i)
				lctx, lcancel := context.WithTimeout(ctx, time.Second)
				s, e := r.c.Lookup(lctx, k)
				if e == nil {
					if e = s.Write(lctx, kv(k, v)); e == nil {
						acked.Store(k+"="+v, true)
					}
					if i%50 == 0 {
						s.Wake()
					}
				}
				lcancel()
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range loops {
			p := int32(i % partitions)
			switch i % 5 {
			case 0:
				r.log.setLeader(p, int32(i), true) // a new epoch
			case 1:
				r.log.setLeader(p, 0, false)
			case 2:
				r.log.setLeader(p, int32(i), true)
			case 3:
				if s, ok := r.c.Get(p); ok {
					s.Drop(kerr.NotCoordinator)
				}
			}
			_ = r.c.Ready()
			_ = r.c.Loading()
			time.Sleep(100 * time.Microsecond)
		}
		for p := range int32(partitions) {
			r.log.setLeader(p, 1000, true)
		}
	}()
	wg.Wait()
	inLog := map[string]bool{}
	r.log.mu.Lock()
	var d recordbatch.Decoder
	for _, bs := range r.log.parts {
		for _, b := range bs {
			_, _ = d.Records(b, func(rec *recordbatch.Record) error {
				inLog[string(rec.Key)+"="+string(rec.Value)] = true
				return nil
			})
		}
	}
	r.log.mu.Unlock()
	n := 0
	acked.Range(func(k, _ any) bool {
		n++
		if !inLog[k.(string)] {
			t.Errorf("acknowledged write %s is not in the log", k)
		}
		return true
	})
	if n == 0 {
		t.Fatal("no write was acknowledged")
	}
}
