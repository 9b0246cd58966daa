package memory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/kconfig"
	"github.com/sluicehq/sluice/internal/recordbatch"
	"github.com/sluicehq/sluice/kernel"
	"github.com/sluicehq/sluice/modules/storage/internal/batches"
	"github.com/sluicehq/sluice/modules/storage/internal/epochs"
	"github.com/sluicehq/sluice/modules/storage/internal/producers"
)

// ID is the module ID.
const ID = "storage.memory"

// Info describes the module for the registry.
func Info() kernel.ModuleInfo {
	return kernel.ModuleInfo{ID: ID, New: func() kernel.Module { return New() }}
}

// Module is the in-memory storage module.
type Module struct {
	// RetentionCheckIntervalMs is how often retention runs. Default (0): the broker
	// config log.retention.check.interval.ms (300000).
	RetentionCheckIntervalMs int64 `yaml:"retention_check_interval_ms"`

	store  *Store
	logger *slog.Logger
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns a Module with defaults.
func New() *Module {
	return &Module{store: NewStore()}
}

// Provision gets the logger and the broker's retention check interval.
func (m *Module) Provision(ctx kernel.Context) error {
	m.logger = ctx.Logger()
	if m.RetentionCheckIntervalMs == 0 {
		b := kconfig.ResolveBroker(kconfig.MergeBroker(ctx.Broker().StaticConfigs, nil, nil))
		m.RetentionCheckIntervalMs = b.LogRetentionCheckIntervalMs
	}
	return nil
}

// Validate checks the settings.
func (m *Module) Validate() error {
	if m.RetentionCheckIntervalMs < 0 {
		return fmt.Errorf("retention_check_interval_ms must be >= 0 (0: the broker config), got %d", m.RetentionCheckIntervalMs)
	}
	return nil
}

// Start starts the retention loop.
func (m *Module) Start(context.Context) error {
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		every := m.RetentionCheckIntervalMs
		if every <= 0 { // not provisioned (a test): Kafka's default
			every = 300000
		}
		t := time.NewTicker(time.Duration(every) * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				for _, l := range m.store.openLogs() {
					if err := l.EnforceRetention(now); err != nil && !errors.Is(err, kernel.ErrLogClosed) && m.logger != nil {
						m.logger.Warn("retention failed", "err", err)
					}
				}
			}
		}
	}()
	return nil
}

// Stop stops the retention loop and waits for it.
func (m *Module) Stop(ctx context.Context) error {
	if m.cancel != nil {
		m.cancel()
	}
	return kernel.WaitGroup(ctx, &m.wg)
}

// Cleanup drops all data.
func (m *Module) Cleanup() error {
	m.store.reset()
	return nil
}

// Open implements kernel.Storage.
func (m *Module) Open(tp kernel.TopicPartition, topicID [16]byte, cfg kernel.LogConfig) (kernel.Log, error) {
	return m.store.Open(tp, topicID, cfg)
}

// Remove implements kernel.Storage.
func (m *Module) Remove(tp kernel.TopicPartition) error { return m.store.Remove(tp) }

// Dirs implements kernel.Storage.
func (m *Module) Dirs() []kernel.LogDir { return m.store.Dirs() }

// Store is the in-memory kernel.Storage.
type Store struct {
	mu    sync.Mutex
	parts map[kernel.TopicPartition]*partition
	open  map[kernel.TopicPartition]*Log
	now   func() time.Time
}

// NewStore returns an empty Store.
func NewStore() *Store {
	return &Store{parts: map[kernel.TopicPartition]*partition{}, open: map[kernel.TopicPartition]*Log{}, now: time.Now}
}

func (s *Store) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.open {
		l.closed.Store(true)
	}
	s.parts = map[kernel.TopicPartition]*partition{}
	s.open = map[kernel.TopicPartition]*Log{}
}

func (s *Store) openLogs() []*Log {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Values(s.open))
}

// Open implements kernel.Storage.
func (s *Store) Open(tp kernel.TopicPartition, topicID [16]byte, cfg kernel.LogConfig) (kernel.Log, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.open[tp]; ok {
		l.SetConfig(cfg)
		return l, nil
	}
	p, ok := s.parts[tp]
	if ok && p.topicID != topicID && topicID != ([16]byte{}) && p.topicID != ([16]byte{}) {
		// An older incarnation of a re-created topic: the new id wins, start empty.
		ok = false
	}
	if !ok {
		p = &partition{topicID: topicID, now: s.now, prod: producers.New()}
		p.segs = []*segment{p.newSegment(0)}
		p.hw.Store(-1)
		s.parts[tp] = p
	}
	p.mu.Lock()
	p.cfg = cfg
	p.mu.Unlock()
	l := &Log{p: p, store: s, tp: tp}
	s.open[tp] = l
	return l, nil
}

// Remove implements kernel.Storage.
func (s *Store) Remove(tp kernel.TopicPartition) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.open[tp]; ok {
		l.closed.Store(true)
		delete(s.open, tp)
	}
	delete(s.parts, tp)
	return nil
}

// Dirs implements kernel.Storage: one pseudo directory, "memory".
func (s *Store) Dirs() []kernel.LogDir {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := kernel.LogDir{Path: "memory", TotalBytes: -1, UsableBytes: -1}
	for tp, p := range s.parts {
		d.Partitions = append(d.Partitions, kernel.LogDirPartition{TP: tp, Size: p.size()})
	}
	sort.Slice(d.Partitions, func(i, j int) bool {
		a, b := d.Partitions[i].TP, d.Partitions[j].TP
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})
	return []kernel.LogDir{d}
}

func (s *Store) closeLog(l *Log) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open[l.tp] == l {
		delete(s.open, l.tp)
	}
}

// batchPos locates one batch inside a segment's data.
type batchPos struct {
	base, last int64
	pos        int
	maxTs      int64
	appendMs   int64
}

type segment struct {
	base      int64
	data      []byte // append-only; Truncate replaces it with a copy
	batches   []batchPos
	firstTs   int64 // max timestamp of the first batch; -1 when empty
	createdMs int64
	maxTs     int64
	maxTsOff  int64 // base offset of the first batch holding maxTs
}

func (s *segment) next() int64 {
	if len(s.batches) == 0 {
		return s.base
	}
	return s.batches[len(s.batches)-1].last + 1
}

// partition is the data of one partition; it outlives the Log handles over it.
type partition struct {
	mu       sync.RWMutex
	topicID  [16]byte
	cfg      kernel.LogConfig
	segs     []*segment
	logStart int64
	now      func() time.Time
	// prod is the producer state of the batches in segs (plus the sequence ranges of
	// empty AppendProducer calls); rebuilt from segs by Truncate.
	prod *producers.State
	// epochs is the leader-epoch cache: every append adds the newer epochs of its
	// batches, Truncate cuts it at the new log end, a moving log start cuts its head.
	epochs epochs.Cache
	// hw is the high watermark the replication module last set (-1: never); read
	// clamped to [logStart, leo]. Atomic: set on every HW move without the lock.
	hw atomic.Int64
	// firstDirty is the cleaner's progress (compacted logs): every record below it was
	// in the offset map of some pass, so the log below it holds at most one record per
	// key (plus tombstones and markers within their delete horizon). Never above the
	// log end: Truncate lowers it, Reset sets it to the new offset.
	firstDirty int64
}

func (p *partition) newSegment(base int64) *segment {
	return &segment{base: base, firstTs: -1, maxTs: -1, createdMs: p.now().UnixMilli()}
}

func (p *partition) leo() int64 { return p.segs[len(p.segs)-1].next() }

func (p *partition) size() int64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	var n int64
	for _, s := range p.segs {
		n += int64(len(s.data))
	}
	return n
}

// Log is a handle on one in-memory partition.
type Log struct {
	p      *partition
	store  *Store
	tp     kernel.TopicPartition
	closed atomic.Bool
}

// AppendLeader implements kernel.Log.
func (l *Log) AppendLeader(records []byte) (kernel.AppendResult, error) {
	return l.append(records, producers.Leader, nil)
}

// AppendFollower implements kernel.Log.
func (l *Log) AppendFollower(records []byte) (kernel.AppendResult, error) {
	return l.append(records, producers.Follower, nil)
}

// append appends records after checking their producer effects in mode (seq, if set,
// replaces the first batch's sequence range). The producer state changes only once
// the append is certain to succeed.
func (l *Log) append(records []byte, mode producers.Mode, seq *kernel.SeqRange) (kernel.AppendResult, error) {
	leader := mode != producers.Follower
	p := l.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if l.closed.Load() {
		return kernel.AppendResult{}, kernel.ErrLogClosed
	}
	if len(records) == 0 {
		return kernel.AppendResult{}, batches.Corrupt(recordbatch.ErrShort)
	}
	leo := p.leo()
	nowMs := p.now().UnixMilli()
	pend := p.prod.Begin()
	// Validate the whole set first: all or nothing. Newer leader epochs are collected
	// and assigned after the append (rare: at most one per leader change).
	next, maxTs, first := leo, int64(-1), int64(-1)
	latestEpoch := p.epochs.LatestEpoch()
	var newEpochs []kernel.EpochEntry
	for b := records; len(b) > 0; {
		h, err := recordbatch.ParseHeader(b)
		if err != nil {
			return kernel.AppendResult{}, batches.Corrupt(err)
		}
		if h.Size() > len(b) || h.LastOffsetDelta < 0 {
			return kernel.AppendResult{}, batches.Corrupt(recordbatch.ErrShort)
		}
		if !leader && h.BaseOffset < next {
			return kernel.AppendResult{}, fmt.Errorf("%w: batch at %d, log end %d", kernel.ErrInvalidOffset, h.BaseOffset, next)
		}
		base := next
		if !leader {
			base = h.BaseOffset
		}
		if first < 0 {
			first = base
		}
		if h.PartitionLeaderEpoch > latestEpoch {
			latestEpoch = h.PartitionLeaderEpoch
			newEpochs = append(newEpochs, kernel.EpochEntry{Epoch: latestEpoch, StartOffset: base})
		}
		h.BaseOffset = base
		pb, err := producers.FromHeader(&h, b[:h.Size()], nowMs)
		if err != nil {
			return kernel.AppendResult{}, batches.Corrupt(err)
		}
		if seq != nil && first == base {
			pb.FirstSeq, pb.LastSeq = seq.First, seq.Last
		}
		d, dup, err := pend.Check(pb, mode)
		if err != nil {
			return kernel.AppendResult{}, err
		}
		if dup {
			if first != base || h.Size() != len(b) {
				return kernel.AppendResult{}, fmt.Errorf("%w: duplicate batch inside a multi-batch append", kernel.ErrOutOfOrderSequence)
			}
			return kernel.AppendResult{BaseOffset: d.BaseOffset, LastOffset: d.LastOffset, LogAppendTime: d.AppendMs, LogStartOffset: p.logStart, Duplicate: true}, nil
		}
		next = base + int64(h.LastOffsetDelta) + 1
		maxTs = max(maxTs, h.MaxTimestamp)
		b = b[h.Size():]
	}
	act := p.segs[len(p.segs)-1]
	if batches.ShouldRoll(&p.cfg, batches.RollInfo{Size: int64(len(act.data)), FirstBatchTs: act.firstTs, CreatedMs: act.createdMs, BaseOffset: act.base}, int64(len(records)), maxTs, next-1, nowMs) {
		act = p.newSegment(first)
		p.segs = append(p.segs, act)
	}
	off := leo
	for b := records; len(b) > 0; {
		h, _ := recordbatch.ParseHeader(b)
		n := h.Size()
		if leader {
			recordbatch.SetBaseOffset(b, off)
		} else {
			off = h.BaseOffset
		}
		bp := batchPos{base: off, last: off + int64(h.LastOffsetDelta), pos: len(act.data), maxTs: h.MaxTimestamp, appendMs: nowMs}
		act.data = append(act.data, b[:n]...)
		act.batches = append(act.batches, bp)
		if act.firstTs < 0 {
			act.firstTs = h.MaxTimestamp
		}
		if h.MaxTimestamp > act.maxTs {
			act.maxTs, act.maxTsOff = h.MaxTimestamp, off
		}
		off = bp.last + 1
		b = b[n:]
	}
	pend.Commit()
	for _, e := range newEpochs {
		// Cannot fail: epochs increase and starts are at or past the log end, which
		// is at or past every entry's start.
		_, _ = p.epochs.Assign(e.Epoch, e.StartOffset)
	}
	return kernel.AppendResult{BaseOffset: first, LastOffset: next - 1, LogAppendTime: nowMs, LogStartOffset: p.logStart}, nil
}

// Read implements kernel.Log.
func (l *Log) Read(offset, maxBytes, maxOffset int64, minOneBatch bool) (kernel.ReadResult, error) {
	p := l.p
	p.mu.RLock()
	defer p.mu.RUnlock()
	if l.closed.Load() {
		return kernel.ReadResult{Release: noRelease}, kernel.ErrLogClosed
	}
	leo := p.leo()
	if offset < p.logStart || offset > leo {
		return kernel.ReadResult{Release: noRelease}, fmt.Errorf("%w: %d not in [%d, %d]", kernel.ErrOffsetOutOfRange, offset, p.logStart, leo)
	}
	i := sort.Search(len(p.segs), func(i int) bool { return p.segs[i].base > offset }) - 1
	if i < 0 {
		i = 0
	}
	var rr kernel.ReadResult
	rr.Release = noRelease
	for ; i < len(p.segs); i++ {
		s := p.segs[i]
		j := sort.Search(len(s.batches), func(j int) bool { return s.batches[j].last >= offset })
		start, end := 0, 0
		if j < len(s.batches) {
			start = s.batches[j].pos
			end = start
		}
		full := false
		for ; j < len(s.batches); j++ {
			bp := s.batches[j]
			if bp.base >= maxOffset {
				full = true
				break
			}
			bend := len(s.data)
			if j+1 < len(s.batches) {
				bend = s.batches[j+1].pos
			}
			if rr.Size+int64(bend-start) > maxBytes && !(rr.Size == 0 && end == start && minOneBatch) {
				full = true
				break
			}
			end = bend
			rr.NextOffset = bp.last + 1
		}
		if end > start {
			rr.Chunks = append(rr.Chunks, kernel.Chunk{Bytes: s.data[start:end:end]})
			rr.Size += int64(end - start)
		}
		if full {
			break
		}
	}
	return rr, nil
}

func noRelease() {}

// LogStartOffset implements kernel.Log.
func (l *Log) LogStartOffset() int64 {
	l.p.mu.RLock()
	defer l.p.mu.RUnlock()
	return l.p.logStart
}

// LogEndOffset implements kernel.Log.
func (l *Log) LogEndOffset() int64 {
	l.p.mu.RLock()
	defer l.p.mu.RUnlock()
	return l.p.leo()
}

// OffsetForTimestamp implements kernel.Log.
func (l *Log) OffsetForTimestamp(ts int64) (int64, int64, bool, error) {
	p := l.p
	p.mu.RLock()
	defer p.mu.RUnlock()
	if l.closed.Load() {
		return 0, 0, false, kernel.ErrLogClosed
	}
	for _, s := range p.segs {
		if s.maxTs < ts {
			continue
		}
		for j, bp := range s.batches {
			if bp.maxTs < ts || bp.last < p.logStart {
				continue
			}
			end := len(s.data)
			if j+1 < len(s.batches) {
				end = s.batches[j+1].pos
			}
			batch := s.data[bp.pos:end]
			h, err := recordbatch.ParseHeader(batch)
			if err != nil {
				return 0, 0, false, batches.Corrupt(err)
			}
			if off, rts, ok := batches.FirstAtOrAfter(batch, h, ts, p.logStart); ok {
				return off, rts, true, nil
			}
		}
	}
	return 0, 0, false, nil
}

// MaxTimestamp implements kernel.Log.
func (l *Log) MaxTimestamp() (int64, int64, bool) {
	p := l.p
	p.mu.RLock()
	defer p.mu.RUnlock()
	ts, off, ok := int64(-1), int64(0), false
	for _, s := range p.segs {
		if len(s.batches) > 0 && (!ok || s.maxTs > ts) {
			ts, off, ok = s.maxTs, s.maxTsOff, true
		}
	}
	return ts, off, ok
}

// DeleteRecordsBefore implements kernel.Log.
func (l *Log) DeleteRecordsBefore(offset int64) error {
	p := l.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if l.closed.Load() {
		return kernel.ErrLogClosed
	}
	if offset > p.leo() {
		return fmt.Errorf("%w: delete records before %d, log end %d", kernel.ErrOffsetOutOfRange, offset, p.leo())
	}
	if offset > p.logStart {
		p.logStart = offset
	}
	p.deleteOldest(p.deletable(time.Time{}))
	p.prod.TruncateHead(p.logStart)
	p.epochs.TruncateFromStart(p.logStart)
	return nil
}

// EnforceRetention deletes the segments that retention.ms, retention.bytes or the log
// start offset no longer keep. When the active segment itself is past retention, a new,
// empty segment is rolled at the log end offset and every old one is deleted: the log
// is empty and keeps its offsets.
func (l *Log) EnforceRetention(now time.Time) error {
	p := l.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if l.closed.Load() {
		return kernel.ErrLogClosed
	}
	n := p.deletable(now)
	if n == len(p.segs) {
		p.segs = append(p.segs, p.newSegment(p.leo()))
	}
	p.deleteOldest(n)
	p.prod.TruncateHead(p.logStart)
	p.prod.Expire(now.UnixMilli(), p.cfg.ProducerIDExpirationMs)
	p.epochs.TruncateFromStart(p.logStart)
	return nil
}

// deletable counts deletable segments; a zero now checks only the log start offset.
func (p *partition) deletable(now time.Time) int {
	sums := make([]batches.SegmentSummary, len(p.segs))
	for i, s := range p.segs {
		sums[i] = batches.SegmentSummary{Size: int64(len(s.data)), MaxTs: s.maxTs, Next: s.next()}
		if i+1 < len(p.segs) {
			sums[i].Next = p.segs[i+1].base
		}
	}
	cfg := p.cfg
	if now.IsZero() {
		cfg.RetentionMs, cfg.RetentionBytes = -1, -1
	}
	return batches.Deletable(&cfg, sums, p.logStart, now.UnixMilli())
}

func (p *partition) deleteOldest(n int) {
	if n == 0 {
		return
	}
	p.segs = append(p.segs[:0:0], p.segs[n:]...)
	p.logStart = max(p.logStart, p.segs[0].base)
}

// Truncate implements kernel.Log.
func (l *Log) Truncate(offset int64) error {
	p := l.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if l.closed.Load() {
		return kernel.ErrLogClosed
	}
	if offset >= p.leo() {
		// Nothing to cut, but an epoch entry at the log end goes, as in Kafka: a
		// former leader that assigned its epoch and appended nothing would otherwise
		// keep fetching with that epoch and diverge at every fetch.
		p.epochs.TruncateFromEnd(p.leo())
		return nil
	}
	defer func() {
		p.epochs.TruncateFromEnd(p.leo())
		p.lowerHW(p.leo())
		p.firstDirty = min(p.firstDirty, p.leo())
	}()
	if offset <= p.logStart || offset <= p.segs[0].base {
		p.segs = []*segment{p.newSegment(offset)}
		p.logStart = offset
		p.prod.Reset()
		return nil
	}
	p.truncate(offset)
	if p.leo() < p.logStart {
		// The cut batch straddled the log start: start empty at the log start.
		p.segs = []*segment{p.newSegment(p.logStart)}
	}
	p.rebuildProducers()
	return nil
}

// truncate cuts the log before the batch holding offset. mu held.
func (p *partition) truncate(offset int64) {
	i := sort.Search(len(p.segs), func(i int) bool { return p.segs[i].base > offset }) - 1
	s := p.segs[i]
	j := sort.Search(len(s.batches), func(j int) bool { return s.batches[j].last >= offset })
	p.segs = p.segs[:i+1]
	if j == len(s.batches) {
		return
	}
	if j == 0 && i > 0 {
		p.segs = p.segs[:i]
		return
	}
	ns := p.newSegment(s.base)
	ns.createdMs = s.createdMs
	cut := s.batches[j].pos
	if j > 0 {
		ns.data = append([]byte(nil), s.data[:cut]...)
		ns.batches = append([]batchPos(nil), s.batches[:j]...)
		ns.firstTs = s.firstTs
		for _, bp := range ns.batches {
			if bp.maxTs > ns.maxTs {
				ns.maxTs, ns.maxTsOff = bp.maxTs, bp.base
			}
		}
	}
	p.segs[i] = ns
}

// SetConfig implements kernel.Log.
func (l *Log) SetConfig(cfg kernel.LogConfig) {
	l.p.mu.Lock()
	l.p.cfg = cfg
	l.p.mu.Unlock()
}

// Flush implements kernel.Log; memory has nothing to flush.
func (l *Log) Flush() error {
	if l.closed.Load() {
		return kernel.ErrLogClosed
	}
	return nil
}

// Size implements kernel.Log.
func (l *Log) Size() int64 { return l.p.size() }

// Close implements kernel.Log. The data stays in the Store.
func (l *Log) Close() error {
	l.closed.Store(true)
	l.store.closeLog(l)
	return nil
}

var (
	_ kernel.Provisioner  = (*Module)(nil)
	_ kernel.Validator    = (*Module)(nil)
	_ kernel.Starter      = (*Module)(nil)
	_ kernel.Stopper      = (*Module)(nil)
	_ kernel.CleanerUpper = (*Module)(nil)
	_ kernel.Storage      = (*Module)(nil)
	_ kernel.Storage      = (*Store)(nil)
	_ kernel.Log          = (*Log)(nil)
)
