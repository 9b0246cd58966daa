package groups

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/groups/offsets"
)

// Fakes for the transactional offset commit tests: one __consumer_offsets partition
// held in memory (fakeLog: offsets assigned on Append, producer epochs checked as the
// Log contract says), a fixed image, and the module wired by hand (no sweeper: shards
// load on demand).

var offsetsTP = kernel.TopicPartition{Topic: OffsetsTopic, Partition: 0}

type fakeLog struct {
	mu      sync.Mutex
	batches [][]byte
	next    int64
	epochs  map[int64]int16
	appends int
}

func newFakeLog() *fakeLog { return &fakeLog{epochs: map[int64]int16{}} }

func (f *fakeLog) Append(ctx context.Context, tp kernel.TopicPartition, records []byte) (kernel.AppendResult, error) {
	if tp != offsetsTP {
		return kernel.AppendResult{}, kernel.ErrNotLeader
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	h, err := recordbatch.ParseHeader(records)
	if err != nil {
		return kernel.AppendResult{}, err
	}
	if h.ProducerID >= 0 {
		if cur, ok := f.epochs[h.ProducerID]; ok && h.ProducerEpoch < cur {
			return kernel.AppendResult{}, kernel.ErrInvalidProducerEpoch
		}
		f.epochs[h.ProducerID] = h.ProducerEpoch
	}
	b := append([]byte(nil), records...)
	recordbatch.SetBaseOffset(b, f.next)
	res := kernel.AppendResult{BaseOffset: f.next, LastOffset: f.next + int64(h.LastOffsetDelta)}
	f.next = res.LastOffset + 1
	f.batches = append(f.batches, b)
	f.appends++
	return res, nil
}

// ReadStable is not used by these tests.
func (f *fakeLog) ReadStable(context.Context, kernel.TopicPartition, int64, func([]byte) error) (int64, error) {
	return 0, errors.New("fake: ReadStable not implemented")
}

func (f *fakeLog) ReadCommitted(ctx context.Context, tp kernel.TopicPartition, offset int64, fn func([]byte) error) error {
	f.mu.Lock()
	bs := append([][]byte(nil), f.batches...)
	f.mu.Unlock()
	for _, b := range bs {
		h, err := recordbatch.ParseHeader(b)
		if err != nil {
			return err
		}
		if h.LastOffset() < offset {
			continue
		}
		if err := fn(b); err != nil {
			return err
		}
	}
	return nil
}

func (f *fakeLog) Leader(tp kernel.TopicPartition) (int32, bool) { return 1, tp == offsetsTP }

// marker appends a marker of producer id to the log and returns its offset.
func (f *fakeLog) marker(t *testing.T, id int64, epoch int16, commit bool) int64 {
	t.Helper()
	res, err := f.Append(context.Background(), offsetsTP, recordbatch.BuildMarker(id, epoch, recordbatch.Marker{Commit: commit}, time.Now().UnixMilli()))
	if err != nil {
		t.Fatal(err)
	}
	return res.BaseOffset
}

type fakeMeta struct{ im *kernel.Image }

func (f fakeMeta) Image() *kernel.Image                             { return f.im }
func (f fakeMeta) Subscribe(fn func(*kernel.Image)) (cancel func()) { fn(f.im); return func() {} }
func (f fakeMeta) Ready() bool                                      { return true }

func testImage() *kernel.Image {
	topic := func(name string, n int) *kernel.TopicImage {
		t := &kernel.TopicImage{Name: name, ID: [16]byte{byte(len(name))}}
		for p := range n {
			t.Partitions = append(t.Partitions, kernel.PartitionImage{Partition: int32(p), Leader: 1, Replicas: []int32{1}, ISR: []int32{1}})
		}
		return t
	}
	ts := []*kernel.TopicImage{topic(OffsetsTopic, 1), topic("t", 4), topic("__transaction_state", 2)}
	im := &kernel.Image{
		Brokers: map[int32]*kernel.BrokerImage{1: {ID: 1, Endpoints: []kernel.ListenerInfo{{Name: "PLAINTEXT", Host: "h1", Port: 9001}}}},
	}
	for _, t := range ts {
		im.PutTopic(t)
	}
	return im
}

type txnRig struct {
	t   *testing.T
	dir string
	log *fakeLog
	m   *Module
}

func newTxnRig(t *testing.T) *txnRig {
	r := &txnRig{t: t, dir: t.TempDir(), log: newFakeLog()}
	r.start()
	t.Cleanup(r.stop)
	return r
}

// start starts a module on the rig's log and store directory (a broker start).
func (r *txnRig) start() {
	m := New()
	if err := m.Validate(); err != nil {
		r.t.Fatal(err)
	}
	m.log = slog.New(slog.DiscardHandler)
	m.broker = kernel.BrokerInfo{NodeID: 1, DataDir: r.dir}
	m.meta = fakeMeta{testImage()}
	m.parts = r.log
	m.now = time.Now
	m.settings.Store(m.readSettings(nil))
	m.commits = &kernel.Counter{}
	st, err := offsets.Open(filepath.Join(r.dir, "groups", "offsets"), nil)
	if err != nil {
		r.t.Fatal(err)
	}
	m.store = st
	m.coord = m.newCoordinator()
	m.coord.Open() // no sweeper: the tests drive the shards
	r.m = m
}

// stop stops the module and closes its store (a broker stop).
func (r *txnRig) stop() {
	if r.m == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.m.Stop(ctx); err != nil {
		r.t.Error(err)
	}
	if err := r.m.Cleanup(); err != nil {
		r.t.Error(err)
	}
	r.m = nil
}

func (r *txnRig) restart() {
	r.t.Helper()
	r.stop()
	r.start()
}

func testRequest(body kmsg.Request, auth kernel.Authorizer) *kernel.Request {
	if auth == nil {
		auth = kernel.AllowAll{}
	}
	return &kernel.Request{Key: body.Key(), Version: body.GetVersion(), Body: body,
		Conn: &kernel.ConnInfo{Listener: "PLAINTEXT"}, Authorizer: auth}
}

// callHandler runs handler h on req (as authorized by auth, nil: everything) with a
// 10s deadline and returns the response body; a handler error fails the test.
func callHandler[Resp kmsg.Response, Req kmsg.Request](t testing.TB, h func(context.Context, *kernel.Request, Req) (kernel.Response, error), req Req, auth kernel.Authorizer) Resp {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := h(ctx, testRequest(req, auth), req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Msg.(Resp)
}

// txnCommit sends a TxnOffsetCommit of t/partition → offset for every pair in offs and
// returns the per-partition codes.
func (r *txnRig) txnCommit(group string, id int64, epoch int16, offs map[int32]int64, mod ...func(*kmsg.TxnOffsetCommitRequest)) map[int32]int16 {
	r.t.Helper()
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version = 4
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = "tx", group, id, epoch
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = "t"
	for p, o := range offs {
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = p, o
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	for _, f := range mod {
		f(req)
	}
	return r.sendTxnCommit(req, nil)
}

func (r *txnRig) sendTxnCommit(req *kmsg.TxnOffsetCommitRequest, auth kernel.Authorizer) map[int32]int16 {
	r.t.Helper()
	resp := callHandler[*kmsg.TxnOffsetCommitResponse](r.t, r.m.handleTxnOffsetCommit, req, auth)
	out := map[int32]int16{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[p.Partition] = p.ErrorCode
		}
	}
	return out
}

// commit sends a plain OffsetCommit (simple consumer) of t/partition → offset.
func (r *txnRig) commit(group string, offs map[int32]int64) {
	r.t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 8
	req.Group = group
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "t"
	for p, o := range offs {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = p, o
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp := callHandler[*kmsg.OffsetCommitResponse](r.t, r.m.handleOffsetCommit, req, nil)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				r.t.Fatalf("OffsetCommit %s t/%d: %v", group, p.Partition, kerr.ErrorForCode(p.ErrorCode))
			}
		}
	}
}

type fetched struct {
	offset int64
	code   int16
}

// fetch sends an OffsetFetch v8 for t/0-3 and returns offset and code per partition.
func (r *txnRig) fetch(group string, requireStable bool) map[int32]fetched {
	r.t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 8
	req.RequireStable = requireStable
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = group
	g.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0, 1, 2, 3}}}
	req.Groups = append(req.Groups, g)
	rg := callHandler[*kmsg.OffsetFetchResponse](r.t, r.m.handleOffsetFetch, req, nil).Groups[0]
	if rg.ErrorCode != 0 {
		r.t.Fatalf("OffsetFetch %s: %v", group, kerr.ErrorForCode(rg.ErrorCode))
	}
	out := map[int32]fetched{}
	for _, p := range rg.Topics[0].Partitions {
		out[p.Partition] = fetched{p.Offset, p.ErrorCode}
	}
	return out
}

// marker appends a marker and tells the module, as the replication module does.
func (r *txnRig) marker(id int64, epoch int16, commit bool) int64 {
	r.t.Helper()
	off := r.log.marker(r.t, id, epoch, commit)
	r.m.onTxnMarker(offsetsTP, kernel.TxnMarker{ProducerID: id, ProducerEpoch: epoch, Commit: commit}, off)
	return off
}

// endTxn ends producer id's transaction with a marker (see marker) and waits until
// the shard has applied it.
func (r *txnRig) endTxn(id int64, epoch int16, commit bool) {
	r.t.Helper()
	r.marker(id, epoch, commit)
	r.waitSettled(id)
}

// waitSettled waits until the shard has no pending offsets of producer id.
func (r *txnRig) waitSettled(id int64) {
	r.t.Helper()
	s, e := r.m.coordinatorFor(context.Background(), "g")
	if e != nil {
		r.t.Fatal(e)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.txnMu.Lock()
		open := s.txns.byProducer[id] != nil
		s.txnMu.Unlock()
		if !open {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("producer %d's pending offsets were not resolved", id)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// want checks the visible offsets of group (without require_stable): -1 = none.
func (r *txnRig) want(group string, want map[int32]int64) {
	r.t.Helper()
	got := r.fetch(group, false)
	for p, o := range want {
		if got[p].offset != o || got[p].code != 0 {
			r.t.Errorf("%s t/%d: offset %d code %d, want %d", group, p, got[p].offset, got[p].code, o)
		}
	}
}

func codesOK(t *testing.T, codes map[int32]int16) {
	t.Helper()
	for p, c := range codes {
		if c != 0 {
			t.Fatalf("TxnOffsetCommit t/%d: %v", p, kerr.ErrorForCode(c))
		}
	}
}

func TestTxnOffsetCommitVisibleOnlyAfterCommitMarker(t *testing.T) {
	r := newTxnRig(t)
	codesOK(t, r.txnCommit("g", 7, 0, map[int32]int64{0: 10, 1: 11}))
	r.want("g", map[int32]int64{0: -1, 1: -1})
	got := r.fetch("g", true)
	for p, want := range map[int32]int16{0: kerr.UnstableOffsetCommit.Code, 1: kerr.UnstableOffsetCommit.Code, 2: 0} {
		if got[p].code != want || got[p].offset != -1 {
			t.Errorf("require_stable t/%d: %+v, want code %d", p, got[p], want)
		}
	}
	// A second commit of the same transaction replaces t/1's offset.
	codesOK(t, r.txnCommit("g", 7, 0, map[int32]int64{1: 12}))
	r.endTxn(7, 0, true)
	r.want("g", map[int32]int64{0: 10, 1: 12, 2: -1})
	if got := r.fetch("g", true); got[0].code != 0 || got[0].offset != 10 {
		t.Errorf("require_stable after the commit: %+v", got[0])
	}
	// The next transaction of the producer.
	codesOK(t, r.txnCommit("g", 7, 0, map[int32]int64{0: 20}))
	r.endTxn(7, 0, true)
	r.want("g", map[int32]int64{0: 20, 1: 12})
}

func TestTxnOffsetCommitAbortDrops(t *testing.T) {
	r := newTxnRig(t)
	r.commit("g", map[int32]int64{0: 5})
	codesOK(t, r.txnCommit("g", 7, 0, map[int32]int64{0: 10, 1: 11}))
	r.endTxn(7, 0, false)
	r.want("g", map[int32]int64{0: 5, 1: -1})
	if got := r.fetch("g", true); got[0].code != 0 || got[1].code != 0 {
		t.Errorf("require_stable after the abort: %+v", got)
	}
	// A marker of a producer with nothing pending, and a retried marker, change nothing.
	r.marker(8, 0, true)
	r.marker(7, 0, true)
	r.commit("g", map[int32]int64{2: 1}) // goes through the writer after the markers
	r.want("g", map[int32]int64{0: 5, 1: -1, 2: 1})
}

func TestTxnOffsetCommitFencedEpoch(t *testing.T) {
	r := newTxnRig(t)
	codesOK(t, r.txnCommit("g", 7, 3, map[int32]int64{0: 10}))
	codes := r.txnCommit("g", 7, 2, map[int32]int64{0: 99})
	if codes[0] != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("old epoch: %v, want INVALID_PRODUCER_EPOCH", kerr.ErrorForCode(codes[0]))
	}
	// The shard stays loaded and the first commit stays pending.
	if got := r.fetch("g", true); got[0].code != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("after the fenced commit: %+v", got[0])
	}
	r.endTxn(7, 3, true)
	r.want("g", map[int32]int64{0: 10})
}

// Kafka's rule: the commit record latest in the log wins. A plain commit before the
// transactional batch is overwritten at COMMIT; one after it (before or after the
// marker) stays. A tombstone after the batch deletes the pending offset.
func TestTxnOffsetCommitOrderWithPlainCommits(t *testing.T) {
	r := newTxnRig(t)
	r.commit("g", map[int32]int64{0: 1, 1: 1, 2: 1})
	codesOK(t, r.txnCommit("g", 7, 0, map[int32]int64{0: 10, 1: 10, 2: 10, 3: 10}))
	r.commit("g", map[int32]int64{1: 2}) // after the batch: wins
	r.deleteOffset("g", 3)               // after the batch: deletes
	r.endTxn(7, 0, true)
	r.commit("g", map[int32]int64{2: 3}) // after the marker: wins
	want := map[int32]int64{0: 10, 1: 2, 2: 3, 3: -1}
	r.want("g", want)
	// The replay agrees, whether it resumes (restart) or rebuilds the store.
	r.restart()
	r.want("g", want)
	r.stop()
	if err := os.RemoveAll(filepath.Join(r.dir, "groups")); err != nil {
		t.Fatal(err)
	}
	r.start()
	r.want("g", want)
}

func (r *txnRig) deleteOffset(group string, p int32) {
	r.t.Helper()
	req := kmsg.NewPtrOffsetDeleteRequest()
	req.Group = group
	req.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: p}}}}
	resp, err := r.m.handleOffsetDelete(context.Background(), testRequest(req, nil), req)
	if err != nil {
		r.t.Fatal(err)
	}
	if c := resp.Msg.(*kmsg.OffsetDeleteResponse).ErrorCode; c != 0 {
		r.t.Fatalf("OffsetDelete: %v", kerr.ErrorForCode(c))
	}
}

// A restart between the TxnOffsetCommit and its marker: the offsets are pending again
// after the load, even though later plain commits moved the store's applied offset
// past the transactional batch, and the marker applies them.
func TestTxnOffsetCommitRestartBeforeMarker(t *testing.T) {
	r := newTxnRig(t)
	codesOK(t, r.txnCommit("g", 7, 0, map[int32]int64{0: 10}))
	r.commit("g", map[int32]int64{1: 5}) // the applied offset passes the batch
	r.restart()
	if got := r.fetch("g", true); got[0].code != kerr.UnstableOffsetCommit.Code || got[1].offset != 5 {
		t.Fatalf("after the first restart: %+v", got)
	}
	codesOK(t, r.txnCommit("other", 8, 0, map[int32]int64{0: 30}))
	r.endTxn(8, 0, true) // 8 ends; 7 stays open
	r.restart()
	if got := r.fetch("g", true); got[0].code != kerr.UnstableOffsetCommit.Code || got[1].offset != 5 {
		t.Fatalf("after the restart: %+v", got)
	}
	r.want("other", map[int32]int64{0: 30})
	r.restart() // twice: the replay start must survive a load that changed nothing
	if got := r.fetch("g", true); got[0].code != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("after the second restart: %+v", got)
	}
	r.endTxn(7, 0, true)
	r.want("g", map[int32]int64{0: 10, 1: 5})
	r.want("other", map[int32]int64{0: 30})
	r.restart()
	r.want("g", map[int32]int64{0: 10, 1: 5})
	if got := r.fetch("g", true); got[0].code != 0 {
		t.Fatalf("after the marker and a restart: %+v", got[0])
	}
}

// A restart after the marker was appended but before the coordinator heard of it
// (the broker was down): the replay applies it.
func TestTxnOffsetCommitRestartAfterMarker(t *testing.T) {
	r := newTxnRig(t)
	codesOK(t, r.txnCommit("g", 7, 0, map[int32]int64{0: 10}))
	codesOK(t, r.txnCommit("g", 8, 0, map[int32]int64{1: 20}))
	r.stop()
	r.log.marker(t, 7, 0, true)
	r.log.marker(t, 8, 0, false)
	r.start()
	r.want("g", map[int32]int64{0: 10, 1: -1})
	if got := r.fetch("g", true); got[0].code != 0 || got[1].code != 0 {
		t.Fatalf("require_stable after the replayed markers: %+v", got)
	}
}

// A marker reported again after the replay handled it (a stale report) changes
// nothing: not the producer's next transaction either.
func TestTxnMarkerReportedTwice(t *testing.T) {
	r := newTxnRig(t)
	codesOK(t, r.txnCommit("g", 7, 0, map[int32]int64{0: 10}))
	r.stop()
	off := r.log.marker(t, 7, 0, true)
	r.start()
	r.want("g", map[int32]int64{0: 10})
	codesOK(t, r.txnCommit("g", 7, 0, map[int32]int64{0: 20}))
	r.m.onTxnMarker(offsetsTP, kernel.TxnMarker{ProducerID: 7, Commit: true}, off)
	r.commit("g", map[int32]int64{1: 1}) // through the writer, after the queued marker
	if got := r.fetch("g", true); got[0].code != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("a stale marker ended the next transaction: %+v", got[0])
	}
	r.endTxn(7, 0, true)
	r.want("g", map[int32]int64{0: 20, 1: 1})
}

func TestTxnOffsetCommitValidation(t *testing.T) {
	r := newTxnRig(t)
	deny := func(typ kernel.ResourceType) kernel.Authorizer {
		return authFunc(func(r kernel.Resource) bool { return r.Type != typ })
	}
	for _, tc := range []struct {
		name string
		mod  func(*kmsg.TxnOffsetCommitRequest)
		auth kernel.Authorizer
		want *kerr.Error
	}{
		{"transactional id denied", nil, deny(kernel.ResTransactionalID), kerr.TransactionalIDAuthorizationFailed},
		{"group denied", nil, deny(kernel.ResGroup), kerr.GroupAuthorizationFailed},
		{"topic denied", nil, deny(kernel.ResTopic), kerr.TopicAuthorizationFailed},
		{"empty group", func(q *kmsg.TxnOffsetCommitRequest) { q.Group = "" }, nil, kerr.InvalidGroupID},
		{"no producer id", func(q *kmsg.TxnOffsetCommitRequest) { q.ProducerID = -1 }, nil, kerr.InvalidProducerIDMapping},
		{"unknown topic", func(q *kmsg.TxnOffsetCommitRequest) { q.Topics[0].Topic = "nope" }, nil, kerr.UnknownTopicOrPartition},
		{"unknown partition", func(q *kmsg.TxnOffsetCommitRequest) { q.Topics[0].Partitions[0].Partition = 9 }, nil, kerr.UnknownTopicOrPartition},
		{"metadata too large", func(q *kmsg.TxnOffsetCommitRequest) {
			md := string(make([]byte, 5000))
			q.Topics[0].Partitions[0].Metadata = &md
		}, nil, kerr.OffsetMetadataTooLarge},
		{"unknown group with a generation", func(q *kmsg.TxnOffsetCommitRequest) { q.Generation = 3; q.MemberID = "m" }, nil, kerr.IllegalGeneration},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := kmsg.NewPtrTxnOffsetCommitRequest()
			req.Version = 4
			req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = "tx", "g", 7, 0
			req.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1, LeaderEpoch: -1}}}}
			if tc.mod != nil {
				tc.mod(req)
			}
			codes := r.sendTxnCommit(req, tc.auth)
			for p, c := range codes {
				if c != tc.want.Code {
					t.Errorf("partition %d: %v, want %v", p, kerr.ErrorForCode(c), tc.want)
				}
			}
		})
	}
	r.log.mu.Lock()
	n := r.log.appends
	r.log.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d appends for refused commits", n)
	}
}

type authFunc func(kernel.Resource) bool

func (f authFunc) Authorize(_ context.Context, _ kernel.Principal, _ string, _ kernel.Operation, r kernel.Resource) bool {
	return f(r)
}

// A classic group checks the member of v3+ commits that name one, and lets v0-v2
// commits (no member) through.
func TestTxnOffsetCommitClassicGroup(t *testing.T) {
	r := newTxnRig(t)
	s, e := r.m.coordinatorFor(context.Background(), "cg")
	if e != nil {
		t.Fatal(e)
	}
	if _, e := s.classicGroup("cg", true); e != nil {
		t.Fatal(e)
	}
	// The group is empty: a named member is unknown.
	codes := r.txnCommit("cg", 7, 0, map[int32]int64{0: 1}, func(q *kmsg.TxnOffsetCommitRequest) {
		q.Generation, q.MemberID = 1, "m1"
	})
	if codes[0] != kerr.UnknownMemberID.Code {
		t.Fatalf("unknown member: %v", kerr.ErrorForCode(codes[0]))
	}
	codes = r.txnCommit("cg", 7, 0, map[int32]int64{0: 1}, func(q *kmsg.TxnOffsetCommitRequest) { q.Version = 2 })
	codesOK(t, codes)
}

func TestFindCoordinatorTransaction(t *testing.T) {
	r := newTxnRig(t)
	find := func(key string) kmsg.FindCoordinatorResponseCoordinator {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version = 4
		req.CoordinatorType = 1
		req.CoordinatorKeys = []string{key}
		resp, err := r.m.handleFindCoordinator(context.Background(), testRequest(req, nil), req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Msg.(*kmsg.FindCoordinatorResponse).Coordinators[0]
	}
	if c := find("tx"); c.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("without a txn module: %+v", c)
	}
	loc := &fakeLocator{}
	r.m.txnLocator = loc
	if c := find("tx"); c.ErrorCode != 0 || c.NodeID != 1 || c.Host != "h1" || c.Port != 9001 || c.Key != "tx" {
		t.Fatalf("with a txn module: %+v", c)
	}
	if loc.asked != "tx" {
		t.Fatalf("locator asked %q", loc.asked)
	}
	if c := find(""); c.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("empty transactional id: %+v", c)
	}
	loc.err = errors.New("boom")
	if c := find("tx"); c.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("locator failure: %+v", c)
	}
}

type fakeLocator struct {
	asked string
	err   error
}

func (f *fakeLocator) TxnStatePartition(_ context.Context, id string) (kernel.TopicPartition, error) {
	f.asked = id
	return kernel.TopicPartition{Topic: "__transaction_state", Partition: 1}, f.err
}

// Deleting a group deletes its pending transactional offsets: the COMMIT applies
// nothing.
func TestTxnOffsetCommitGroupDeleted(t *testing.T) {
	r := newTxnRig(t)
	codesOK(t, r.txnCommit("g", 7, 0, map[int32]int64{0: 10}))
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Groups = []string{"g"}
	resp, err := r.m.handleDeleteGroups(context.Background(), testRequest(req, nil), req)
	if err != nil {
		t.Fatal(err)
	}
	if c := resp.Msg.(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode; c != 0 {
		t.Fatalf("DeleteGroups: %v", kerr.ErrorForCode(c))
	}
	r.endTxn(7, 0, true)
	r.want("g", map[int32]int64{0: -1})
	r.restart()
	r.want("g", map[int32]int64{0: -1})
}

// The replay starts at the earliest open transaction, below the applied offset, and
// re-applies what follows in log order: a committed transaction's offset there is
// re-applied at its marker and then overwritten again by the later plain commit.
func TestTxnReplayReappliesInLogOrder(t *testing.T) {
	r := newTxnRig(t)
	codesOK(t, r.txnCommit("g", 8, 0, map[int32]int64{1: 20})) // stays open: the replay starts here
	codesOK(t, r.txnCommit("g", 7, 0, map[int32]int64{0: 10}))
	r.endTxn(7, 0, true)
	r.commit("g", map[int32]int64{0: 50})
	r.want("g", map[int32]int64{0: 50, 1: -1})
	r.restart()
	r.want("g", map[int32]int64{0: 50, 1: -1})
	if got := r.fetch("g", true); got[1].code != kerr.UnstableOffsetCommit.Code || got[0].code != 0 {
		t.Fatalf("after the restart: %+v", got)
	}
	r.endTxn(8, 0, true)
	r.want("g", map[int32]int64{0: 50, 1: 20})
}

// Hammer: producers commit and abort transactions concurrently with plain commits and
// require_stable fetches; afterwards (and after a restart) every group holds its last
// committed transaction's offsets.
func TestTxnOffsetCommitHammer(t *testing.T) {
	r := newTxnRig(t)
	const producers, rounds = 6, 15
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Add(2)
	go func() { // plain commits to another group
		defer bg.Done()
		for i := int64(0); ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			r.commit("plain", map[int32]int64{int32(i % 4): i})
		}
	}()
	go func() { // readers
		defer bg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for p := range producers {
				r.fetch("h"+strconv.Itoa(p), true)
			}
		}
	}()
	var wg sync.WaitGroup
	want := make([]map[int32]int64, producers)
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, group := int64(100+p), "h"+strconv.Itoa(p)
			want[p] = map[int32]int64{0: -1, 1: -1}
			for i := range rounds {
				offs := map[int32]int64{0: int64(i), 1: int64(1000 + i)}
				for q, c := range r.txnCommit(group, id, 0, offs) {
					if c != 0 {
						t.Errorf("%s t/%d: %v", group, q, kerr.ErrorForCode(c))
					}
				}
				commit := i%3 != 1
				if commit {
					want[p] = offs
				}
				r.marker(id, 0, commit)
			}
		}()
	}
	wg.Wait()
	close(stop)
	bg.Wait()
	for p := range producers {
		r.waitSettled(int64(100 + p))
		r.want("h"+strconv.Itoa(p), want[p])
	}
	r.restart()
	for p := range producers {
		r.want("h"+strconv.Itoa(p), want[p])
	}
}

type fakeVerifier struct {
	mu    sync.Mutex
	err   error
	calls int
	adds  int // calls asking to add the partition (TxnOffsetCommit v5+)
}

func (f *fakeVerifier) VerifyTxnPartition(_ context.Context, id string, pid int64, epoch int16, tp kernel.TopicPartition, add bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if add {
		f.adds++
	}
	if id != "tx" || tp != offsetsTP {
		return fmt.Errorf("unexpected verification of %q in %v: %w", id, tp, kerr.UnknownServerError)
	}
	return f.err
}

// The transaction coordinator verifies the producer's first transactional batch in
// the partition (KIP-890 part 1); a refusal appends nothing.
func TestTxnOffsetCommitVerified(t *testing.T) {
	r := newTxnRig(t)
	v := &fakeVerifier{err: fmt.Errorf("txn: not in the transaction: %w", kerr.InvalidTxnState)}
	r.m.txnVerifier = v
	if c := r.txnCommit("g", 7, 0, map[int32]int64{0: 10}); c[0] != kerr.InvalidTxnState.Code {
		t.Fatalf("refused verification: %v", kerr.ErrorForCode(c[0]))
	}
	r.log.mu.Lock()
	n := r.log.appends
	r.log.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d appends after a refused verification", n)
	}
	v.mu.Lock()
	v.err = errors.New("cancelled")
	v.mu.Unlock()
	if c := r.txnCommit("g", 7, 0, map[int32]int64{0: 10}); c[0] != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("failed verification: %v", kerr.ErrorForCode(c[0]))
	}
	v.mu.Lock()
	v.err = fmt.Errorf("elsewhere: %w", kernel.ErrNotCoordinator) // not ours to check
	v.mu.Unlock()
	codesOK(t, r.txnCommit("g", 7, 0, map[int32]int64{0: 10}))
	v.mu.Lock()
	v.err, v.calls = kerr.InvalidTxnState, 0
	v.mu.Unlock()
	codesOK(t, r.txnCommit("g", 7, 0, map[int32]int64{1: 11})) // open already: not asked
	v.mu.Lock()
	calls := v.calls
	v.mu.Unlock()
	if calls != 0 {
		t.Fatalf("verified %d times with the transaction open in the partition", calls)
	}
	r.endTxn(7, 0, true)
	r.want("g", map[int32]int64{0: 10, 1: 11})
}

// TxnOffsetCommit v5 (KIP-890 part 2): the transaction coordinator adds the group's
// partition, for every commit (the open transaction may be the previous one, its
// marker at the bumped epoch still on the way); its CONCURRENT_TRANSACTIONS reaches
// the client as the retriable COORDINATOR_LOAD_IN_PROGRESS.
func TestTxnOffsetCommitV5Adds(t *testing.T) {
	r := newTxnRig(t)
	v := &fakeVerifier{}
	r.m.txnVerifier = v
	v5 := func(req *kmsg.TxnOffsetCommitRequest) { req.Version = 5 }
	codesOK(t, r.txnCommit("g", 7, 0, map[int32]int64{0: 10}, v5))
	codesOK(t, r.txnCommit("g", 7, 0, map[int32]int64{1: 11}, v5))
	v.mu.Lock()
	calls, adds := v.calls, v.adds
	v.err = fmt.Errorf("ending: %w", kerr.ConcurrentTransactions)
	v.mu.Unlock()
	if calls != 2 || adds != 2 {
		t.Fatalf("%d calls, %d adds; want 2 adds", calls, adds)
	}
	if c := r.txnCommit("g", 7, 1, map[int32]int64{0: 12}, v5); c[0] != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("while the previous transaction ends: %v, want COORDINATOR_LOAD_IN_PROGRESS", kerr.ErrorForCode(c[0]))
	}
	r.endTxn(7, 0, true)
	r.want("g", map[int32]int64{0: 10, 1: 11})
}

// Offset expiry skips partitions with pending transactional offsets (as Kafka): the
// transaction is about to replace them.
func TestTxnOffsetCommitExpirySkipsPending(t *testing.T) {
	r := newTxnRig(t)
	r.commit("g", map[int32]int64{0: 1, 1: 1})
	codesOK(t, r.txnCommit("g", 7, 0, map[int32]int64{0: 5}))
	s, e := r.m.coordinatorFor(context.Background(), "g")
	if e != nil {
		t.Fatal(e)
	}
	s.expireOffsets(context.Background(), time.Now().Add(24*time.Hour), time.Millisecond)
	r.want("g", map[int32]int64{0: 1, 1: -1})
	r.endTxn(7, 0, true)
	r.want("g", map[int32]int64{0: 5, 1: -1})
}

// TestTxnOffsetCommitTopicIDs: v6 names topics by id; the offsets land under the
// topic's name, and an unknown id is UNKNOWN_TOPIC_ID (the response echoes the ids).
func TestTxnOffsetCommitTopicIDs(t *testing.T) {
	r := newTxnRig(t)
	id := r.m.meta.Image().Topic("t").ID
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version = 6
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = "tx", "g", 7, 0
	for _, tid := range [][16]byte{id, {0xee}} {
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.TopicID = tid
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 1, 42
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	resp := callHandler[*kmsg.TxnOffsetCommitResponse](t, r.m.handleTxnOffsetCommit, req, nil)
	if len(resp.Topics) != 2 || resp.Topics[0].TopicID != id || resp.Topics[1].TopicID != [16]byte{0xee} {
		t.Fatalf("topics: %+v", resp.Topics)
	}
	if c := resp.Topics[0].Partitions[0].ErrorCode; c != 0 {
		t.Errorf("known id: %v", kerr.ErrorForCode(c))
	}
	if c := resp.Topics[1].Partitions[0].ErrorCode; c != kerr.UnknownTopicID.Code {
		t.Errorf("unknown id: %v, want UNKNOWN_TOPIC_ID", kerr.ErrorForCode(c))
	}
	r.endTxn(7, 0, true)
	r.want("g", map[int32]int64{1: 42})
}
