package storagetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/storage/internal/compact"
)

// The model-based compaction test: a random workload of keyed puts, tombstones,
// idempotent producers with retries, committed and aborted transactions, tail
// truncations, DeleteRecordsBefore, handle reopens and cleans at random times,
// checked after every clean against a model of what a read_committed consumer must
// see. testCompactModel drives it from math/rand; FuzzClean (in the
// package's tests) from the fuzzer's bytes.

// Chooser picks the workload's next step: Choose(n) is in [0, n); ok false ends the
// workload (a fuzz input ran out).
type Chooser interface {
	Choose(n int) (v int, ok bool)
}

// RandChooser chooses with r for a fixed number of steps.
type RandChooser struct {
	R     *rand.Rand
	Steps int // choices left
}

// Choose implements Chooser.
func (c *RandChooser) Choose(n int) (int, bool) {
	if c.Steps <= 0 {
		return 0, false
	}
	c.Steps--
	return c.R.IntN(n), true
}

// BytesChooser chooses from a fuzz input, one byte a choice.
type BytesChooser struct{ B []byte }

// Choose implements Chooser.
func (c *BytesChooser) Choose(n int) (int, bool) {
	if len(c.B) == 0 {
		return 0, false
	}
	v := int(c.B[0]) % n
	c.B = c.B[1:]
	return v, true
}

const (
	modelIdempotent = 2 // idempotent producers: ids 100, 101
	modelTxn        = 2 // transactional producers: ids 200, 201
	modelKeys       = 8
)

// modelRec is one record the workload produced.
type modelRec struct {
	offset    int64
	key       string
	value     string
	tombstone bool
	pid       int64
	status    int // recCommitted, recOpen, recAborted
	batchBase int64
}

const (
	recCommitted = iota
	recOpen
	recAborted
	recDropped // an open transaction's, forgotten with its producer (log start moved past it)
)

// sentBatch is a producer's batch as sent, kept for retries.
type sentBatch struct {
	bytes []byte
	seq   kernel.SeqRange
	res   kernel.AppendResult
	// rebuilt: a truncation rebuilt the producer state since; the segment log then
	// answers a duplicate with the batch's timestamp as its append time (it does
	// not store the append time), so only the offsets are compared.
	rebuilt bool
}

type modelProducer struct {
	pid     int64
	txn     bool
	nextSeq int32
	lastOff int64       // the last offset of its last batch or marker
	open    bool        // a transaction is open
	last    []sentBatch // the last batches, at most producers.MaxBatches (5)
}

type compactModel struct {
	t     *testing.T
	tp    kernel.TopicPartition
	s     kernel.Storage
	l     kernel.Log
	cfg   kernel.LogConfig
	c     Chooser
	nowMs int64
	hw    int64
	recs  []modelRec // every record produced, by offset
	prods []*modelProducer
	// The cleaner's progress as the passes reported it, and the time of each pass.
	firstDirty  int64
	lastPassNow int64
	// stamped: batch base -> NowMs of the first pass that covered it (its tombstones'
	// delete horizon is that + delete.retention.ms).
	stamped map[int64]int64
	passes  int
	stats   compact.Stats // summed over the passes
	ends    []int64       // the end (last offset + 1) of every appended batch, in order
}

// RunCompactionModel runs the model-based workload chosen by c on a fresh log of s.
// Each run uses its own partition, tp.
func RunCompactionModel(t *testing.T, s kernel.Storage, tp kernel.TopicPartition, c Chooser) {
	m := &compactModel{t: t, s: s, tp: tp, c: c, nowMs: 1000, hw: 0, stamped: map[int64]int64{}}
	seg, _ := c.Choose(8)
	ret, _ := c.Choose(8)
	m.cfg = CompactConfig()
	m.cfg.SegmentBytes = 256 + int64(seg)*128
	m.cfg.DeleteRetentionMs = 100 + int64(ret)*300
	m.cfg.MinCleanableDirtyRatio = 0
	m.l = mustOpen(t, s, tp, m.cfg)
	for i := range modelIdempotent {
		m.prods = append(m.prods, &modelProducer{pid: 100 + int64(i)})
	}
	for i := range modelTxn {
		m.prods = append(m.prods, &modelProducer{pid: 200 + int64(i), txn: true})
	}
	for {
		op, ok := c.Choose(100)
		if !ok {
			break
		}
		switch {
		case op < 25:
			m.put(false)
		case op < 33:
			m.put(true)
		case op < 48:
			m.produce(m.prods[m.pick(modelIdempotent)])
		case op < 56:
			m.retry()
		case op < 71:
			m.produce(m.prods[modelIdempotent+m.pick(modelTxn)])
		case op < 81:
			m.endTxn()
		case op < 94:
			m.clean()
		case op < 95:
			m.nowMs += int64(m.pick(2000))
		case op < 96:
			m.deleteRecords()
		case op < 98:
			m.truncateTail()
		default:
			m.reopen()
		}
		m.nowMs += int64(m.pick(50))
	}
	// Finally everything committed or aborted, replicated and cleaned.
	for _, p := range m.prods {
		if p.open {
			m.end(p, m.pick(2) == 0)
		}
	}
	m.hw = m.l.LogEndOffset()
	m.clean()
	m.nowMs += m.cfg.DeleteRetentionMs + 1
	m.clean()
	t.Logf("%d records, %d passes: %+v", len(m.recs), m.passes, m.stats)
}

// pick is Choose with the workload's end taken as 0.
func (m *compactModel) pick(n int) int {
	v, _ := m.c.Choose(n)
	return v
}

func (m *compactModel) key() string { return fmt.Sprintf("k%d", m.pick(modelKeys)) }

func (m *compactModel) put(tombstone bool) {
	k, v := m.key(), "<nil>"
	if !tombstone {
		v = fmt.Sprintf("put-%d", len(m.recs))
	}
	res, err := m.l.AppendLeader(Keyed(m.nowMs, k, v))
	if err != nil {
		m.t.Fatalf("put: %v", err)
	}
	m.add(res.BaseOffset, -1, recCommitted, []string{k, v})
}

func (m *compactModel) add(base, pid int64, status int, kv []string) {
	m.ends = append(m.ends, base+int64(len(kv)/2))
	for i := 0; i+1 < len(kv); i += 2 {
		r := modelRec{offset: base + int64(i/2), key: kv[i], value: kv[i+1], pid: pid, status: status, batchBase: base}
		if kv[i+1] == "<nil>" {
			r.tombstone, r.value = true, ""
		}
		m.recs = append(m.recs, r)
	}
}

func (m *compactModel) produce(p *modelProducer) {
	n := 1 + m.pick(3)
	var kv []string
	for i := range n {
		v := fmt.Sprintf("p%d-%d-%d", p.pid, p.nextSeq, i)
		if m.pick(8) == 0 {
			v = "<nil>"
		}
		kv = append(kv, m.key(), v)
	}
	recs := make([]recordbatch.Record, n)
	for i := range recs {
		recs[i] = recordbatch.Record{Key: []byte(kv[2*i]), TimestampDelta: int64(i)}
		if kv[2*i+1] != "<nil>" {
			recs[i].Value = []byte(kv[2*i+1])
		}
	}
	b := recordbatch.Build(recordbatch.Options{ProducerID: p.pid, ProducerEpoch: 0, BaseSequence: p.nextSeq, BaseTimestamp: m.nowMs, Transactional: p.txn}, recs...)
	seq := seqOf(p.pid, 0, p.nextSeq, n)
	res, err := m.l.AppendProducer(slices.Clone(b), seq)
	if err != nil || res.Duplicate {
		m.t.Fatalf("produce pid %d seq %d: %+v, %v", p.pid, p.nextSeq, res, err)
	}
	p.nextSeq += int32(n)
	p.lastOff = res.LastOffset
	p.last = append(p.last, sentBatch{bytes: b, seq: seq, res: res})
	if len(p.last) > 5 {
		p.last = p.last[1:]
	}
	status := recCommitted
	if p.txn {
		status = recOpen
		p.open = true
	}
	m.add(res.BaseOffset, p.pid, status, kv)
}

// retry resends one of a producer's last five batches: a duplicate, answered with
// the original offsets, however many cleans happened since.
func (m *compactModel) retry() {
	p := m.prods[m.pick(len(m.prods))]
	if len(p.last) == 0 {
		return
	}
	sb := p.last[m.pick(len(p.last))]
	res, err := m.l.AppendProducer(slices.Clone(sb.bytes), sb.seq)
	if err != nil || !res.Duplicate || res.BaseOffset != sb.res.BaseOffset || res.LastOffset != sb.res.LastOffset || (!sb.rebuilt && res.LogAppendTime != sb.res.LogAppendTime) {
		m.t.Fatalf("retry of pid %d seq %d after %d passes: %+v, %v; original %+v", p.pid, sb.seq.First, m.passes, res, err, sb.res)
	}
}

func (m *compactModel) endTxn() {
	p := m.prods[modelIdempotent+m.pick(modelTxn)]
	if p.open {
		m.end(p, m.pick(3) != 0)
	}
}

func (m *compactModel) end(p *modelProducer, commit bool) {
	res, err := m.l.AppendLeader(recordbatch.BuildMarker(p.pid, 0, recordbatch.Marker{Commit: commit}, m.nowMs))
	if err != nil {
		m.t.Fatalf("marker of pid %d: %v", p.pid, err)
	}
	m.ends = append(m.ends, res.LastOffset+1)
	p.lastOff = res.LastOffset
	p.open = false
	status := recAborted
	if commit {
		status = recCommitted
	}
	for i := range m.recs {
		if m.recs[i].pid == p.pid && m.recs[i].status == recOpen {
			m.recs[i].status = status
		}
	}
}

func (m *compactModel) reopen() {
	if err := m.l.Close(); err != nil {
		m.t.Fatal(err)
	}
	l, err := m.s.Open(m.tp, testTopicID, m.cfg)
	if err != nil {
		m.t.Fatal(err)
	}
	m.l = l
}

// deleteRecords moves the log start to an offset at or below the high watermark (as
// DeleteRecords does). Producers with nothing left at or above it are forgotten, with
// their open transaction, as in Kafka; their batches are not retried.
func (m *compactModel) deleteRecords() {
	ls := m.l.LogStartOffset()
	hw := m.l.HighWatermark()
	if hw <= ls {
		return
	}
	to := ls + int64(m.pick(int(min(hw-ls, 1<<20))+1))
	if err := m.l.DeleteRecordsBefore(to); err != nil {
		m.t.Fatal(err)
	}
	if got := m.l.LogStartOffset(); got != to {
		m.t.Fatalf("log start %d after DeleteRecordsBefore(%d)", got, to)
	}
	for _, p := range m.prods {
		if p.lastOff < to {
			p.last = nil
			if p.open {
				p.open = false
				for i := range m.recs {
					if m.recs[i].pid == p.pid && m.recs[i].status == recOpen {
						m.recs[i].status = recDropped
					}
				}
			}
		}
	}
}

// truncateTail appends a record and truncates it away: the producer state is rolled
// back (the memory log rebuilds it from the log, which the cleaner has rewritten), and
// must come back as it was, each producer's last batch included, since the cleaner
// keeps a producer's last data batch. Batches before it may have been cleaned away, so
// only the last one is retried from here on.
//
// Not once the log start moved: a rebuild then misses what the deleted segments held
// (a transaction's first offset, the sequences of a producer whose data went), which
// has nothing to do with cleaning.
func (m *compactModel) truncateTail() {
	if m.l.LogStartOffset() > 0 {
		return
	}
	res, err := m.l.AppendLeader(Keyed(m.nowMs, m.key(), "truncated"))
	if err != nil {
		m.t.Fatal(err)
	}
	before := m.l.Producers()
	if err := m.l.Truncate(res.BaseOffset); err != nil {
		m.t.Fatal(err)
	}
	if leo := m.l.LogEndOffset(); leo != res.BaseOffset {
		m.t.Fatalf("log end %d after truncating the last batch at %d", leo, res.BaseOffset)
	}
	after := m.l.Producers()
	key := func(ps []kernel.ProducerState) string {
		var out []string
		for _, p := range ps {
			out = append(out, fmt.Sprintf("pid %d epoch %d seq %d txn %d", p.ProducerID, p.Epoch, p.LastSequence, p.TxnStartOffset))
		}
		return fmt.Sprint(out)
	}
	if key(after) != key(before) {
		m.t.Fatalf("producer state after a truncation, %d passes:\n got %v\nwant %v", m.passes, key(after), key(before))
	}
	for _, p := range m.prods {
		if len(p.last) > 1 {
			p.last = p.last[len(p.last)-1:]
		}
		for i := range p.last {
			p.last[i].rebuilt = true
		}
	}
}

// clean moves the high watermark part of the way to the log end, runs one pass with a
// map of a random size (at least the largest batch) and checks the log.
func (m *compactModel) clean() {
	// The high watermark is always at a batch end, as replication moves it (a
	// follower's log end is one): part of the way to the log end, or all of it.
	i := sort.Search(len(m.ends), func(i int) bool { return m.ends[i] > m.hw })
	if i < len(m.ends) && m.pick(4) != 0 {
		m.hw = m.ends[i+m.pick(len(m.ends)-i)]
	}
	m.l.SetHighWatermark(m.hw)
	budgets := []int64{8 * 24, 24 * 24, 1 << 16}
	mp := compact.NewOffsetMap(budgets[m.pick(len(budgets))], 0.9)
	prodBefore := m.l.Producers()
	fuBefore, fuOK := m.l.FirstUnstableOffset()
	res, err := compactLog(m.t, m.l).Clean(context.Background(), &compact.Env{Map: mp, NowMs: m.nowMs})
	if err != nil {
		m.t.Fatalf("pass %d: %v", m.passes, err)
	}
	m.passes++
	m.stats.Add(res.Stats)
	if res.FirstDirty < m.firstDirty {
		m.t.Fatalf("pass %d: first dirty offset went down from %d to %d", m.passes, m.firstDirty, res.FirstDirty)
	}
	if res.FirstDirty > m.hw {
		m.t.Fatalf("pass %d: first dirty offset %d above the high watermark %d", m.passes, res.FirstDirty, m.hw)
	}
	for _, r := range m.recs {
		if r.offset >= m.firstDirty && r.offset < res.FirstDirty {
			if _, ok := m.stamped[r.batchBase]; !ok {
				m.stamped[r.batchBase] = m.nowMs
			}
		}
	}
	m.firstDirty = res.FirstDirty
	m.lastPassNow = m.nowMs
	if got := m.l.Producers(); fmt.Sprint(got) != fmt.Sprint(prodBefore) {
		m.t.Fatalf("pass %d changed the producer state:\n got %+v\nwant %+v", m.passes, got, prodBefore)
	}
	if fu, ok := m.l.FirstUnstableOffset(); fu != fuBefore || ok != fuOK {
		m.t.Fatalf("pass %d changed the first unstable offset: %d %v, was %d %v", m.passes, fu, ok, fuBefore, fuOK)
	}
	m.check()
}

// check compares what a read_committed consumer sees below the last stable offset
// with the model.
func (m *compactModel) check() {
	t := m.t
	lso := m.l.HighWatermark()
	wantFU, wantOpen := int64(0), false
	for _, r := range m.recs {
		if r.status == recOpen {
			wantFU, wantOpen = r.offset, true
			break
		}
	}
	if fu, ok := m.l.FirstUnstableOffset(); ok != wantOpen || (ok && fu != wantFU) {
		t.Fatalf("first unstable offset %d %v, model %d %v", fu, ok, wantFU, wantOpen)
	}
	if wantOpen {
		lso = min(lso, wantFU)
	}
	logStart := m.l.LogStartOffset()
	raw, err := ReadRecords(m.l, logStart)
	if err != nil {
		t.Fatal(err)
	}
	raw = atOrAbove(raw, logStart)
	byOff := map[int64]modelRec{}
	for _, r := range m.recs {
		byOff[r.offset] = r
	}
	// No aborted data below the first dirty offset, even for a read_uncommitted reader;
	// nothing that was not produced, anywhere.
	for _, r := range raw {
		if r.Control {
			continue
		}
		mr, ok := byOff[r.Offset]
		if !ok || mr.key != r.Key || mr.tombstone != r.Tombstone || mr.value != r.Value {
			t.Fatalf("pass %d: read %v, produced %+v", m.passes, r, mr)
		}
		if mr.status == recAborted && r.Offset < m.firstDirty {
			t.Fatalf("pass %d: aborted record %v kept below the first dirty offset %d", m.passes, r, m.firstDirty)
		}
	}
	seen := readCommitted(raw, m.l.AbortedTxns(nil, m.l.LogStartOffset(), m.l.LogEndOffset()))
	seen = below(seen, lso)
	for _, r := range seen {
		if byOff[r.Offset].status != recCommitted {
			t.Fatalf("pass %d: read_committed sees %v (status %d)", m.passes, r, byOff[r.Offset].status)
		}
	}
	// Below the first dirty offset: the latest committed record of each key there (a
	// tombstone may be gone once its horizon passed); above it, every committed record.
	latest := map[string]modelRec{}
	var above []string
	for _, r := range m.recs {
		if r.status != recCommitted || r.offset >= lso || r.offset < logStart {
			continue
		}
		if r.offset < m.firstDirty {
			latest[r.key] = r
		} else {
			above = append(above, Rec{Offset: r.offset, Key: r.key, Value: r.value, Tombstone: r.tombstone}.String())
		}
	}
	var gotAbove []string
	gotBelow := map[string]Rec{}
	for _, r := range seen {
		if r.Offset >= m.firstDirty {
			gotAbove = append(gotAbove, r.String())
			continue
		}
		if prev, dup := gotBelow[r.Key]; dup {
			t.Fatalf("pass %d: key %s twice below the first dirty offset %d: %v and %v", m.passes, r.Key, m.firstDirty, prev, r)
		}
		gotBelow[r.Key] = r
		if w, ok := latest[r.Key]; !ok || w.offset != r.Offset {
			t.Fatalf("pass %d: %v below the first dirty offset %d; the latest committed there is %+v", m.passes, r, m.firstDirty, w)
		}
	}
	for k, w := range latest {
		if _, ok := gotBelow[k]; ok {
			continue
		}
		if !w.tombstone {
			t.Fatalf("pass %d: latest value of %s (%+v) missing below the first dirty offset %d", m.passes, k, w, m.firstDirty)
		}
		if st, ok := m.stamped[w.batchBase]; !ok || m.lastPassNow < st+m.cfg.DeleteRetentionMs {
			t.Fatalf("pass %d: tombstone %+v gone before its horizon (first cleaned at %d, last pass at %d, delete.retention.ms %d)",
				m.passes, w, st, m.lastPassNow, m.cfg.DeleteRetentionMs)
		}
	}
	if fmt.Sprint(gotAbove) != fmt.Sprint(above) {
		t.Fatalf("pass %d: at or above the first dirty offset %d:\n got %v\nwant %v", m.passes, m.firstDirty, gotAbove, above)
	}
}

// readCommitted filters raw as a read_committed Kafka consumer does with the
// aborted transactions of a fetch: a producer's transactional batches are skipped
// from an aborted transaction's first offset until its ABORT marker; markers are not
// returned.
func readCommitted(raw []Rec, aborted []kernel.AbortedTxn) []Rec {
	sort.SliceStable(aborted, func(i, j int) bool { return aborted[i].FirstOffset < aborted[j].FirstOffset })
	skipping := map[int64]bool{}
	var out []Rec
	for _, r := range raw {
		for len(aborted) > 0 && aborted[0].FirstOffset <= r.BatchLast {
			skipping[aborted[0].ProducerID] = true
			aborted = aborted[1:]
		}
		if r.Control {
			if !r.Commit {
				delete(skipping, r.PID)
			}
			continue
		}
		if r.Transactional && skipping[r.PID] {
			continue
		}
		out = append(out, r)
	}
	return out
}

func testCompactModel(t *testing.T, s kernel.Storage) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			tp := kernel.TopicPartition{Topic: "model", Partition: int32(seed)}
			RunCompactionModel(t, s, tp, &RandChooser{R: rand.New(rand.NewPCG(seed, 0x5eed)), Steps: 3000})
		})
	}
}
