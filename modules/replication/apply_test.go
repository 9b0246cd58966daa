package replication

import (
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/kernel"
)

// manyTopics is an image of n one-partition topics led by node 1.
func manyTopics(version uint64, n int) *kernel.Image {
	specs := make([]topicSpec, n)
	for i := range specs {
		specs[i] = topicSpec{name: "t" + strconv.Itoa(i), id: byte(i%250 + 1)}
	}
	return image(version, specs...)
}

// bumpEpoch returns a copy of im (sharing what it does not change, as the metadata
// module builds images) with version v and topic name's partition 0 in a new leader
// epoch.
func bumpEpoch(im *kernel.Image, v uint64, name string) *kernel.Image {
	next := *im
	next.Version = v
	t := *im.Topic(name)
	t.Partitions = slices.Clone(t.Partitions)
	t.Partitions[0].LeaderEpoch++
	next.PutTopic(&t)
	return &next
}

// TestApplyCostFollowsChange: after the first image, an image that changes one topic
// of 5,000 looks at that topic's partition only, and applies the change.
func TestApplyCostFollowsChange(t *testing.T) {
	h := newHarness(t, nil)
	im := manyTopics(2, 5000)
	h.meta.publish(im)
	if n := h.m.applyVisited.Load(); n < 5000 {
		t.Fatalf("first image visited %d partitions, want >= 5000", n)
	}
	before := h.m.applyVisited.Load()
	next := bumpEpoch(im, 3, "t4321")
	h.meta.publish(next)
	if d := h.m.applyVisited.Load() - before; d != 1 {
		t.Fatalf("one-topic change visited %d partitions, want 1", d)
	}
	p := h.m.partition(kernel.TopicPartition{Topic: "t4321"})
	if p == nil || p.LeaderEpoch() != 6 {
		t.Fatalf("change not applied: %+v", p)
	}
	// Deleting one topic removes it, visiting only it.
	gone := *next
	gone.Version = 4
	gone.RemoveTopic("t17")
	before = h.m.applyVisited.Load()
	h.meta.publish(&gone)
	if d := h.m.applyVisited.Load() - before; d != 1 {
		t.Fatalf("one-topic deletion visited %d partitions, want 1", d)
	}
	h.m.mu.RLock()
	_, still := h.m.parts[kernel.TopicPartition{Topic: "t17"}]
	n := len(h.m.parts)
	h.m.mu.RUnlock()
	if still || n != 4999 {
		t.Fatalf("after deletion: t17 still there %v, %d partitions", still, n)
	}
	// A broker config change walks everything again (topics resolve against it).
	cfg := gone
	cfg.Version = 5
	cfg.BrokerConfigs = map[string]map[string]string{"": {"log.retention.ms": "1000"}}
	before = h.m.applyVisited.Load()
	h.meta.publish(&cfg)
	if d := h.m.applyVisited.Load() - before; d < 4999 {
		t.Fatalf("broker config change visited %d partitions, want >= 4999", d)
	}
	if got := h.m.partition(kernel.TopicPartition{Topic: "t1"}).Config().RetentionMs; got != 1000 {
		t.Fatalf("retention.ms %d after the broker config change", got)
	}
}

// TestApplyFollowIncremental: the fetchers follow exactly the partitions that need
// it as images move leaders one topic at a time.
func TestApplyFollowIncremental(t *testing.T) {
	h := newHarness(t, nil)
	im := manyTopics(2, 50)
	h.meta.publish(im)
	if _, parts := h.m.Fetchers(); parts != 0 {
		t.Fatalf("leader of everything, yet %d followed", parts)
	}
	// Node 2 takes t3 and t4 (node 1 stays a replica): followed.
	next := *im
	next.Version = 3
	for _, name := range []string{"t3", "t4"} {
		tt := *im.Topic(name)
		tt.Partitions = slices.Clone(tt.Partitions)
		pi := &tt.Partitions[0]
		pi.Leader, pi.LeaderEpoch, pi.Replicas, pi.ISR = 2, 6, []int32{2, 1}, []int32{2, 1}
		next.PutTopic(&tt)
	}
	h.meta.publish(&next)
	if f, parts := h.m.Fetchers(); parts != 2 || f != 1 {
		t.Fatalf("%d fetchers, %d followed; want 1, 2", f, parts)
	}
	// t3 deleted: one left.
	del := next
	del.Version = 4
	del.RemoveTopic("t3")
	h.meta.publish(&del)
	if f, parts := h.m.Fetchers(); parts != 1 || f != 1 {
		t.Fatalf("%d fetchers, %d followed; want 1, 1", f, parts)
	}
	// t4 back to node 1: nothing followed, the fetcher stopped.
	back := bumpEpoch(&del, 5, "t4")
	tt := *back.Topic("t4")
	tt.Partitions = slices.Clone(tt.Partitions)
	tt.Partitions[0].Leader, tt.Partitions[0].LeaderEpoch = 1, 7
	back.PutTopic(&tt)
	h.meta.publish(back)
	if f, parts := h.m.Fetchers(); parts != 0 || f != 0 {
		t.Fatalf("%d fetchers, %d followed; want 0, 0", f, parts)
	}
}

// failingStorage fails Open of the partitions in fail (errors.New(cause)), counting
// the attempts.
type failingStorage struct {
	kernel.Storage
	mu    sync.Mutex
	fail  map[kernel.TopicPartition]string
	opens atomic.Int64
}

func (s *failingStorage) Open(tp kernel.TopicPartition, id [16]byte, cfg kernel.LogConfig) (kernel.Log, error) {
	s.mu.Lock()
	cause, bad := s.fail[tp]
	s.mu.Unlock()
	if bad {
		s.opens.Add(1)
		return nil, errors.New(cause)
	}
	return s.Storage.Open(tp, id, cfg)
}

func (s *failingStorage) heal(tp kernel.TopicPartition) {
	s.mu.Lock()
	delete(s.fail, tp)
	s.mu.Unlock()
}

// TestOpenFailureStorageError: a partition whose log fails to open answers
// KAFKA_STORAGE_ERROR to produce, fetch and list offsets without trying to open it per
// request; it is retried with a backoff and served once the cause is gone; deleting
// it forgets the failure.
func TestOpenFailureStorageError(t *testing.T) {
	h := newHarness(t, nil)
	bad := kernel.TopicPartition{Topic: "bad"}
	fs := &failingStorage{Storage: h.m.storage, fail: map[kernel.TopicPartition]string{bad: "too many open files"}}
	h.m.storage = fs
	h.meta.publish(image(2, topicSpec{name: "bad", id: 3}, topicSpec{name: "ok", id: 4}))
	if res := h.produce(9, 1, "ok", 0, testBatch(1, "x")); res.ErrorCode != 0 {
		t.Fatalf("healthy partition: %v", kerr.ErrorForCode(res.ErrorCode))
	}
	attempts := fs.opens.Load()
	for range 20 {
		if res := h.produce(9, 1, "bad", 0, testBatch(1, "x")); res.ErrorCode != kerr.KafkaStorageError.Code {
			t.Fatalf("produce: %v, want KAFKA_STORAGE_ERROR", kerr.ErrorForCode(res.ErrorCode))
		}
	}
	fr := h.fetch(t.Context(), 12, fetchReq("bad", 3, 0, 0))
	if c := fr.Topics[0].Partitions[0].ErrorCode; c != kerr.KafkaStorageError.Code {
		t.Fatalf("fetch: %v", kerr.ErrorForCode(c))
	}
	if got := fs.opens.Load() - attempts; got > 1 { // at most a retry that came due
		t.Fatalf("%d open attempts from 21 requests", got)
	}
	fs.heal(bad)
	waitFor(t, func() bool { return h.produce(9, 1, "bad", 0, testBatch(1, "x")).ErrorCode == 0 })
	if h.m.openFailed(bad) {
		t.Fatal("failure record kept after the open succeeded")
	}

	// A failed partition that is deleted is forgotten.
	fs.mu.Lock()
	fs.fail[kernel.TopicPartition{Topic: "bad2"}] = "permission denied"
	fs.mu.Unlock()
	h.meta.publish(image(3, topicSpec{name: "ok", id: 4}, topicSpec{name: "bad2", id: 5}))
	if !h.m.openFailed(kernel.TopicPartition{Topic: "bad2"}) {
		t.Fatal("no failure record")
	}
	h.meta.publish(image(4, topicSpec{name: "ok", id: 4}))
	if h.m.openFailed(kernel.TopicPartition{Topic: "bad2"}) {
		t.Fatal("failure record of a deleted topic kept")
	}
}

// BenchmarkApplyImage: applying an image that changes one topic, with 1k, 10k and
// 100k one-partition topics led here; "full" walks the whole image as applyImage did
// before it diffed images.
func BenchmarkApplyImage(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		for _, full := range []bool{false, true} {
			name := strconv.Itoa(n/1000) + "k/diff"
			if full {
				name = strconv.Itoa(n/1000) + "k/full"
			}
			b.Run(name, func(b *testing.B) {
				h := newHarness(b, nil)
				h.m.storage = &nullStorage{}
				im := manyTopics(2, n)
				h.meta.publish(im)
				h.m.forceFull = full
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					im = bumpEpoch(im, uint64(3+i), "t7")
					h.m.applyImage(im)
				}
			})
		}
	}
}
