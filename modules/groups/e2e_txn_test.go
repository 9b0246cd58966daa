package groups_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/sluicehq/sluice/internal/testbroker"
)

// txnGroupConfig is fastGroupConfig with the transaction coordinator.
const txnGroupConfig = fastGroupConfig + `  transaction.state.log.num.partitions: "4"
modules:
  txn: {use: coordinator, sweep_interval_ms: 50}
`

// txnRaw drives one transactional id with raw requests (kgo routes each to its
// coordinator), so the test decides exactly when offsets are committed and markers
// written.
type txnRaw struct {
	t     *testing.T
	cl    *kgo.Client
	id    string
	pid   int64
	epoch int16
}

// tv0Versions caps EndTxn and TxnOffsetCommit below KIP-890 part 2.
func tv0Versions() *kversion.Versions {
	v := kversion.Stable()
	v.SetMaxKeyVersion(kmsg.EndTxn.Int16(), 4)
	v.SetMaxKeyVersion(kmsg.TxnOffsetCommit.Int16(), 4)
	return v
}

// retriable codes of the transaction and group coordinators while they load or a
// previous transaction's markers are still being written.
func retriable(code int16) bool {
	switch kerr.ErrorForCode(code) {
	case kerr.ConcurrentTransactions, kerr.CoordinatorLoadInProgress, kerr.NotCoordinator, kerr.CoordinatorNotAvailable:
		return true
	}
	return false
}

// do sends req until code(resp) is not retriable, and returns the last response.
func do[R kmsg.Response](t *testing.T, cl *kgo.Client, req kmsg.Request, code func(R) int16) R {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := cl.Request(ctx, req)
		cancel()
		if err == nil {
			r := resp.(R)
			if !retriable(code(r)) || time.Now().After(deadline) {
				return r
			}
		} else if time.Now().After(deadline) {
			t.Fatalf("%T: %v", req, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// doOK is do that fails the test (naming the request what) unless the last response's
// code is 0.
func doOK[R kmsg.Response](t *testing.T, cl *kgo.Client, req kmsg.Request, what string, code func(R) int16) R {
	t.Helper()
	r := do(t, cl, req, code)
	if c := code(r); c != 0 {
		t.Fatalf("%s: %v", what, kerr.ErrorForCode(c))
	}
	return r
}

func (x *txnRaw) init() {
	x.t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = &x.id
	req.TransactionTimeoutMillis = 60000
	req.ProducerID, req.ProducerEpoch = -1, -1
	r := doOK(x.t, x.cl, req, "InitProducerId", func(r *kmsg.InitProducerIDResponse) int16 { return r.ErrorCode })
	x.pid, x.epoch = r.ProducerID, r.ProducerEpoch
}

func (x *txnRaw) addOffsets(group string) {
	x.t.Helper()
	req := kmsg.NewPtrAddOffsetsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = x.id, x.pid, x.epoch, group
	doOK(x.t, x.cl, req, "AddOffsetsToTxn", func(r *kmsg.AddOffsetsToTxnResponse) int16 { return r.ErrorCode })
}

// commit sends a TxnOffsetCommit of topic/partition → offset with epoch and returns
// the first partition's code.
func (x *txnRaw) commit(group, topic string, epoch int16, offs map[int32]int64) int16 {
	x.t.Helper()
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = x.id, group, x.pid, epoch
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = topic
	for p, o := range offs {
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = p, o, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	r := do(x.t, x.cl, req, func(r *kmsg.TxnOffsetCommitResponse) int16 { return r.Topics[0].Partitions[0].ErrorCode })
	for _, p := range r.Topics[0].Partitions {
		if p.ErrorCode != r.Topics[0].Partitions[0].ErrorCode {
			x.t.Fatalf("TxnOffsetCommit: mixed codes %+v", r.Topics[0].Partitions)
		}
	}
	return r.Topics[0].Partitions[0].ErrorCode
}

func (x *txnRaw) end(commit bool) {
	x.t.Helper()
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = x.id, x.pid, x.epoch, commit
	doOK(x.t, x.cl, req, fmt.Sprintf("EndTxn(commit=%v)", commit), func(r *kmsg.EndTxnResponse) int16 { return r.ErrorCode })
}

// fetchStable returns offset and code per partition of topic for group, with
// require_stable.
func fetchStable(t *testing.T, cl *kgo.Client, group, topic string, parts ...int32) (map[int32]int64, map[int32]int16) {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.RequireStable = true
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = group
	g.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: topic, Partitions: parts}}
	req.Groups = []kmsg.OffsetFetchRequestGroup{g}
	req.Group, req.Topics = group, []kmsg.OffsetFetchRequestTopic{{Topic: topic, Partitions: parts}}
	r := do(t, cl, req, func(r *kmsg.OffsetFetchResponse) int16 {
		if len(r.Groups) > 0 {
			return r.Groups[0].ErrorCode
		}
		return r.ErrorCode
	})
	offs, codes := map[int32]int64{}, map[int32]int16{}
	if len(r.Groups) > 0 {
		if r.Groups[0].ErrorCode != 0 {
			t.Fatalf("OffsetFetch: %v", kerr.ErrorForCode(r.Groups[0].ErrorCode))
		}
		for _, rt := range r.Groups[0].Topics {
			for _, p := range rt.Partitions {
				offs[p.Partition], codes[p.Partition] = p.Offset, p.ErrorCode
			}
		}
		return offs, codes
	}
	for _, rt := range r.Topics {
		for _, p := range rt.Partitions {
			offs[p.Partition], codes[p.Partition] = p.Offset, p.ErrorCode
		}
	}
	return offs, codes
}

// waitStable waits until group's offsets of topic are stable and equal want.
func waitStable(t *testing.T, cl *kgo.Client, group, topic string, want map[int32]int64) {
	t.Helper()
	var parts []int32
	for p := range want {
		parts = append(parts, p)
	}
	slices.Sort(parts)
	waitFor(t, 20*time.Second, fmt.Sprintf("%s's offsets %v", group, want), func() string {
		offs, codes := fetchStable(t, cl, group, topic, parts...)
		for _, p := range parts {
			if codes[p] != 0 || offs[p] != want[p] {
				return fmt.Sprintf("offsets %v codes %v", offs, codes)
			}
		}
		return ""
	})
}

// TestTxnOffsetCommitE2E: transactional offsets with the real transaction coordinator,
// replication and storage: pending (UNSTABLE_OFFSET_COMMIT) until EndTxn, visible on
// commit, dropped on abort, pending across a broker restart and then committed, and
// an old epoch fenced.
func TestTxnOffsetCommitE2E(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig(txnGroupConfig))
	createTopic(t, b.Admin(t), "in", 2)
	// Transaction version 0 requests (EndTxn and TxnOffsetCommit v4): the epoch stays,
	// and AddOffsetsToTxn is the client's to send.
	cl := b.Client(t, kgo.MaxVersions(tv0Versions()))
	x := &txnRaw{t: t, cl: cl, id: "t-raw"}
	x.init()

	// Without AddOffsetsToTxn the transaction coordinator refuses (KIP-890 part 1).
	if c := x.commit("g1", "in", x.epoch, map[int32]int64{0: 1}); c != kerr.InvalidTxnState.Code {
		t.Fatalf("TxnOffsetCommit outside a transaction: %v, want INVALID_TXN_STATE", kerr.ErrorForCode(c))
	}

	// Commit.
	x.addOffsets("g1")
	if c := x.commit("g1", "in", x.epoch, map[int32]int64{0: 5, 1: 6}); c != 0 {
		t.Fatalf("TxnOffsetCommit: %v", kerr.ErrorForCode(c))
	}
	offs, codes := fetchStable(t, cl, "g1", "in", 0, 1)
	if codes[0] != kerr.UnstableOffsetCommit.Code || codes[1] != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("before EndTxn: offsets %v codes %v, want UNSTABLE_OFFSET_COMMIT", offs, codes)
	}
	if got := fetchAll(t, b.Admin(t), "g1"); len(got["in"]) != 0 {
		t.Fatalf("pending offsets visible before EndTxn: %v", got)
	}
	x.end(true)
	waitStable(t, cl, "g1", "in", map[int32]int64{0: 5, 1: 6})

	// Abort.
	x.addOffsets("g1")
	if c := x.commit("g1", "in", x.epoch, map[int32]int64{0: 9}); c != 0 {
		t.Fatalf("TxnOffsetCommit: %v", kerr.ErrorForCode(c))
	}
	x.end(false)
	waitStable(t, cl, "g1", "in", map[int32]int64{0: 5, 1: 6})

	// A restart between the commit and EndTxn.
	x.addOffsets("g1")
	if c := x.commit("g1", "in", x.epoch, map[int32]int64{0: 12}); c != 0 {
		t.Fatalf("TxnOffsetCommit: %v", kerr.ErrorForCode(c))
	}
	b.Restart(t)
	cl = b.Client(t, kgo.MaxVersions(tv0Versions()))
	x.cl = cl
	if _, codes := fetchStable(t, cl, "g1", "in", 0); codes[0] != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("after the restart: code %v, want UNSTABLE_OFFSET_COMMIT", kerr.ErrorForCode(codes[0]))
	}
	x.end(true)
	waitStable(t, cl, "g1", "in", map[int32]int64{0: 12, 1: 6})
	b.Restart(t) // and after the marker: the replay agrees
	cl = b.Client(t, kgo.MaxVersions(tv0Versions()))
	x.cl = cl
	waitStable(t, cl, "g1", "in", map[int32]int64{0: 12, 1: 6})

	// Fencing: a new epoch's commit fences the old epoch's.
	old := x.epoch
	x.init()
	if x.epoch <= old {
		t.Fatalf("InitProducerId did not bump the epoch: %d -> %d", old, x.epoch)
	}
	x.addOffsets("g1")
	if c := x.commit("g1", "in", x.epoch, map[int32]int64{1: 20}); c != 0 {
		t.Fatalf("TxnOffsetCommit: %v", kerr.ErrorForCode(c))
	}
	if c := x.commit("g1", "in", old, map[int32]int64{1: 99}); c != kerr.InvalidProducerEpoch.Code && c != kerr.ProducerFenced.Code {
		t.Fatalf("old epoch: %v, want INVALID_PRODUCER_EPOCH", kerr.ErrorForCode(c))
	}
	x.end(true)
	waitStable(t, cl, "g1", "in", map[int32]int64{0: 12, 1: 20})
}

// TestGroupTransactSessionE2E: kgo's consume-transform-produce loop. Committed
// offsets advance only when a transaction commits; an aborted round leaves them (and
// the output a read_committed consumer sees) unchanged, and the session rewinds to
// them, so every input record reaches the output exactly once.
func TestGroupTransactSessionE2E(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig(txnGroupConfig))
	adm := b.Admin(t)
	createTopic(t, adm, "src", 1)
	createTopic(t, adm, "dst", 1)
	prod := b.Client(t, kgo.DefaultProduceTopic("src"))
	produceRange := func(from, to int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for i := from; i < to; i++ {
			if err := prod.ProduceSync(ctx, kgo.StringRecord(strconv.Itoa(i))).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	opts := append(fastGroupOpts("gts", "src"),
		kgo.SeedBrokers(b.Addr),
		kgo.TransactionalID("gts-tx"),
		kgo.TransactionTimeout(30*time.Second),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.DefaultProduceTopic("dst"),
		kgo.DisableAutoCommit(),
	)
	sess, err := kgo.NewGroupTransactSession(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()

	cl := b.Client(t)
	// round consumes until it has seen records up to (excluding) upTo, copies them
	// to dst inside the transaction and ends it.
	round := func(upTo int64, commit bool) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		next := int64(-1)
		for next < upTo {
			fs := sess.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("polling up to %d: got to %d: %v", upTo, next, ctx.Err())
			}
			if errs := fs.Errors(); len(errs) > 0 {
				for _, e := range errs {
					if !errors.Is(e.Err, context.DeadlineExceeded) {
						t.Logf("fetch error: %v", e.Err)
					}
				}
			}
			fs.EachRecord(func(r *kgo.Record) {
				sess.Produce(ctx, kgo.StringRecord(string(r.Value)), func(_ *kgo.Record, err error) {
					// An aborted round's records may fail with ErrAborting.
					if err != nil && (commit || !errors.Is(err, kgo.ErrAborting)) {
						t.Errorf("produce: %v", err)
					}
				})
				next = r.Offset + 1
			})
		}
		try := kgo.TryAbort
		if commit {
			try = kgo.TryCommit
		}
		ok, err := sess.End(ctx, try)
		if err != nil {
			t.Fatalf("End(commit=%v): %v", commit, err)
		}
		if ok != commit {
			t.Fatalf("End(commit=%v) committed=%v", commit, ok)
		}
	}

	produceRange(0, 10)
	round(10, true)
	// EndTxn answers before the markers are written: wait for them.
	waitStable(t, cl, "gts", "src", map[int32]int64{0: 10})
	produceRange(10, 20)
	round(20, false)
	waitStable(t, cl, "gts", "src", map[int32]int64{0: 10})
	round(20, true) // rewound to 10 after the abort
	waitStable(t, cl, "gts", "src", map[int32]int64{0: 20})

	// A read_committed consumer of dst sees each input exactly once.
	rc := b.Client(t, kgo.ConsumeTopics("dst"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	seen := map[string]int{}
	n := 0
	waitFor(t, 20*time.Second, "20 committed output records", func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		rc.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			seen[string(r.Value)]++
			n++
		})
		if len(seen) < 20 {
			return fmt.Sprintf("%d distinct of %d", len(seen), n)
		}
		return ""
	})
	for v, c := range seen {
		if c != 1 {
			t.Errorf("output %s seen %d times", v, c)
		}
	}
	if n != 20 {
		t.Errorf("%d output records, want 20", n)
	}
}
